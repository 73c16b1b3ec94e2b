"""The team's events file: one JSON line per event a seat's restart gives, in ``.state/<team>/events.jsonl``.

Each line is ``{"time", "seat", "kind", "detail", "since"}`` (times in seconds since
the epoch; ``since`` is when the condition the event reports began), written with one
``write()`` on an ``O_APPEND`` descriptor of a 0600 file opened without following a link,
so two writers never mix their lines.  :func:`emit` is the only writer here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from fabrikito.base import statedir
from fabrikito.base.errors import FabrikitoError
from fabrikito.team.teamfile import Team

EVENTS_FILE = "events.jsonl"


def events_path(team: Team) -> Path:
    return team.state_dir / EVENTS_FILE


def emit(team: Team, seat: str, kind: str, detail: str, *, since: float | None = None, now: float | None = None) -> str:
    """Append one event; returns ``""``, or why it could not be written (for the caller's output)."""
    at = time.time() if now is None else now
    line = {"time": round(at, 3), "seat": seat, "kind": kind, "detail": detail, "since": round(since or at, 3)}
    data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        statedir.ensure_state_dir(team.base_dir, team.name)
        statedir.append_line(events_path(team), data)
    except (OSError, FabrikitoError) as exc:
        return f"the event could not be written to {events_path(team)}: {exc}"
    return ""


def read(team: Team) -> list[dict[str, object]]:
    """Every event of the team, oldest first (a damaged line is left out)."""
    raw = statedir.read_plain(events_path(team)) or b""
    events: list[dict[str, object]] = []
    for line in raw.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events
