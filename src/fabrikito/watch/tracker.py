"""Open conditions from round to round, as events: each change told once.

* A condition is **opened** the first round it is read (or, with a threshold,
  the first round it has lasted that long).
* One that turns into another kind under its key (a seat whose agent left a
  shell, ``not-agent``, then whose pane ended, ``exited``) is **opened** again
  as the new kind, once: the owner is told what it is now, and a notify
  command that takes only some kinds is not left with the first.
* It is **resolved** once it has not been read for :data:`SETTLE` seconds, so
  a state that flaps (a registry flipping busy/idle, a screen caught between
  two frames) is told once, not every round.
* A tracker started again is given the items its events file still has open
  (:func:`fabrikito.log.events.open_items`): a condition still true then is
  not told again, one that is no longer true is resolved, and one true now that
  the file does not have open is told, as any new one.  What is open is
  re-derived from what is read, never kept only in memory.
"""

from __future__ import annotations

from collections.abc import Mapping

from fabrikito.log.events import OPENED, RESOLVED, Event
from fabrikito.watch.conditions import Condition

SETTLE = 3.0


class Tracker:
    def __init__(self, told: Mapping[str, Event], *, settle: float = SETTLE) -> None:
        self.settle = settle
        self.open: dict[str, Event] = dict(told)
        self.first_seen: dict[str, float] = {key: e.since for key, e in told.items()}
        self.absent_since: dict[str, float] = {}

    def step(self, found: Mapping[str, Condition], now: float) -> list[Event]:
        """This round's events: conditions opened, then conditions resolved."""
        out: list[Event] = []
        for key, c in found.items():
            self.absent_since.pop(key, None)
            seen = self.first_seen.setdefault(key, now)
            start = c.since if c.since is not None else seen
            told = self.open.get(key)
            if told is not None:
                if told.kind == c.kind:
                    continue
                start = told.since  # the same condition turned into another kind: told again, as what it is now
            elif now - start < c.after:
                continue
            event = Event(at=now, seat=c.seat, kind=c.kind, event=OPENED, detail=c.detail, since=start, key=key)
            self.open[key] = event
            out.append(event)
        for key in [k for k in self.first_seen if k not in found]:
            gone = self.absent_since.setdefault(key, now)
            if now - gone < self.settle:
                continue
            del self.first_seen[key]
            del self.absent_since[key]
            opened = self.open.pop(key, None)
            if opened is not None:
                out.append(
                    Event(
                        at=now,
                        seat=opened.seat,
                        kind=opened.kind,
                        event=RESOLVED,
                        detail=f"cleared: {opened.detail}",
                        since=opened.since,
                        key=key,
                    )
                )
        return out
