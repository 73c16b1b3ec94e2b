"""Automatic restarts: a seat with ``restart = "on-exit"`` whose agent exited is started again, resumed.

:class:`AutoRestart` is the policy.  Each :meth:`AutoRestart.round` takes what was
seen of the seats (:class:`Seen`: its pane alive, exited, or gone) and decides:

* only a seat whose policy is ``on-exit`` and whose conversation record says it
  is meant to be running: never one stopped on purpose (``down`` marks its record
  stopped before its pane goes; ``restart`` holds the team's start lock), never
  one whose pane is alive (its agent is the pane's process: busy or not, it runs);
* the first restart waits :data:`BACKOFF_FIRST` seconds after the exit was
  seen, each next one twice as long, up to :data:`BACKOFF_MOST`;
* at most :data:`CAP` restarts within :data:`CAP_WINDOW` seconds: past that the
  seat is left down and an event says so, until ``up`` starts it again.

Every decision is an event (:func:`fabrikito.launch.seatevents.emit`).  The team's
watcher runs the rounds, after each of its own (``fabrikito.watch.watcher.default_consumers``),
for a team with a seat whose policy is ``on-exit``; ``down`` ends the watcher before
it marks the records stopped and closes the panes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from fabrikito.launch import resume, seatevents
from fabrikito.launch.status import SeatState, Status
from fabrikito.team.teamfile import Team

BACKOFF_FIRST = 1.0
BACKOFF_MOST = 300.0
CAP = 5
CAP_WINDOW = 600.0


class Seen(StrEnum):
    ALIVE = "alive"
    EXITED = "exited"  # its pane is kept, its agent has ended
    GONE = "gone"  # no session (the tmux server or the session ended)
    UNKNOWN = "unknown"  # could not look: decide nothing


@dataclass
class _History:
    restarts: list[float] = field(default_factory=list)
    down_since: float | None = None
    capped: bool = False


#: Starts the named seats again, resumed; returns, per role, ``""`` when it came up, else why not.
Starter = Callable[[Team, list[str]], Mapping[str, str]]
Emit = Callable[[Team, str, str, str, float], None]


def _emit(team: Team, seat: str, kind: str, detail: str, since: float) -> None:
    seatevents.emit(team, seat, kind, detail, since=since)


@dataclass
class AutoRestart:
    team: Team
    start: Starter
    emit: Emit = _emit
    histories: dict[str, _History] = field(default_factory=dict)

    def delay(self, role: str, now: float) -> float:
        """The back-off before the seat's next restart: doubling with each restart in the window."""
        recent = [t for t in self.histories.get(role, _History()).restarts if now - t < CAP_WINDOW]
        return min(BACKOFF_FIRST * 2.0 ** len(recent), BACKOFF_MOST)

    def round(self, seen: Mapping[str, Seen], now: float) -> list[str]:
        """Decide and act for every seat in ``seen``; returns the roles restarted this round."""
        due: list[str] = []
        for seat in self.team.seats:
            look = seen.get(seat.role, Seen.UNKNOWN)
            history = self.histories.setdefault(seat.role, _History())
            if look is Seen.ALIVE:
                history.down_since = None
                continue
            if look is Seen.UNKNOWN or self.team.restart_for(seat) != "on-exit":
                continue
            record, _ = resume.read_record(self.team, seat.role)
            if record is None or record.state != resume.RUNNING:
                history.down_since = None  # stopped on purpose (or never started by up): not ours to start
                continue
            if history.capped:
                continue
            if history.down_since is None:
                history.down_since = now
                self.emit(
                    self.team,
                    seat.role,
                    "exited",
                    f"its agent {look.value}: restart in {self.delay(seat.role, now):g}s",
                    now,
                )
            recent = [t for t in history.restarts if now - t < CAP_WINDOW]
            if len(recent) >= CAP:
                history.capped = True
                self.emit(
                    self.team,
                    seat.role,
                    "restart-capped",
                    f"restarted {len(recent)} times within {CAP_WINDOW / 60:g} minutes: left down. Fix the cause, "
                    f"then `fabrikito up --resume {seat.role}`",
                    history.down_since,
                )
                continue
            if now - history.down_since >= self.delay(seat.role, now):
                due.append(seat.role)
        if not due:
            return []
        for role in due:
            history = self.histories[role]
            wait = self.delay(role, now)
            self.emit(self.team, role, "restarting", f"restart {len(history.restarts) + 1}, after {wait:g}s", now)
        try:
            outcome = self.start(self.team, due)
        except resume.TeamStarting:
            return []  # an up or a restart is starting seats: look again next round
        for role in due:
            history = self.histories[role]
            since = history.down_since or now
            history.restarts.append(now)
            why = outcome.get(role, "")
            history.down_since = now if why else None  # it did not come up: the next back-off counts from now
            detail = f"restart {len(history.restarts)}" + (f": it did not come up ({why})" if why else ": resumed")
            self.emit(self.team, role, "restarted", detail, since)
        return due


# -- what the rounds see, and what they start ---------------------------------------------


def seen_in(found: Status) -> dict[str, Seen]:
    """Each seat's pane as a round of the watcher read it (``status.collect``: no tmux call of its own): no
    session, a dead pane, or a live one (its agent running, busy or not, or a shell in its place)."""
    by_state = {SeatState.DOWN: Seen.GONE, SeatState.EXITED: Seen.EXITED}
    return {s.role: by_state.get(s.state, Seen.ALIVE) for s in found.seats if s.host is None}


def start_resumed(team: Team, roles: list[str]) -> dict[str, str]:
    """``up --resume`` for ``roles``, quietly; per role ``""`` when it came up, else why not."""
    from fabrikito.launch import lifecycle

    result = lifecycle.up(team, roles, out=lambda _line: None, resume=True)
    return {r.role: r.detail if r.step is lifecycle.Step.FAILED else "" for r in result.seats}


def wanted(team: Team) -> bool:
    """Whether any seat of the team has ``restart = "on-exit"`` (the watcher then runs the policy's rounds)."""
    return any(team.restart_for(seat) == "on-exit" for seat in team.seats)
