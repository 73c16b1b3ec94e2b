"""A seat's restart, told as an event in the team's events file (``.state/<team>/events.jsonl``).

The file and its line are the watcher's (:mod:`fabrikito.log.events`): each restart
decision is one line of kind ``resumed``, ``fresh-start``, ``exited``, ``restarting``,
``restarted``, ``restart-capped`` or ``not-restarted``, marked ``noted`` (a thing that happened, neither
opened nor resolved), so ``fabrikito events`` shows it beside the watcher's own and
``notify`` is not run twice for one state.
"""

from __future__ import annotations

import time
from pathlib import Path

from fabrikito.base import statedir
from fabrikito.base.errors import FabrikitoError
from fabrikito.log import events
from fabrikito.team.teamfile import Team


def events_path(team: Team) -> Path:
    return events.path_for(team.state_dir)


def emit(team: Team, seat: str, kind: str, detail: str, *, since: float | None = None, now: float | None = None) -> str:
    """Append one event; returns ``""``, or why it could not be written (for the caller's output)."""
    at = time.time() if now is None else now
    event = events.Event(
        at=at, seat=seat, kind=kind, event=events.NOTED, detail=detail, since=since or at, key=f"{seat}:{kind}:{at:.3f}"
    )
    try:
        statedir.ensure_state_dir(team.base_dir, team.name)
        events.append(events_path(team), event)
    except (OSError, FabrikitoError) as exc:
        return f"the event could not be written to {events_path(team)}: {exc}"
    return ""


def read(team: Team) -> list[dict[str, object]]:
    """The restart events of the team (the ``noted`` lines; the watcher's conditions are left out), oldest
    first, as their lines have them."""
    return [e.to_json() for e in events.read(events_path(team)) if e.event == events.NOTED]
