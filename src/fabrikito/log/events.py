"""The events file, ``.state/<team>/events.jsonl``: the one module that writes and reads it.

One JSON object a line, appended with one ``write()`` on an ``O_APPEND``
descriptor (0600, never through a link), as the message log is::

    {"time": "2026-12-02T21:05:09", "seat": "dev", "kind": "permission", "event": "opened",
     "detail": "...", "since": "2026-12-02T21:05:08", "key": "permission dev", "at": 1796…}

``event`` is ``opened`` or ``resolved``; ``key`` names the condition (kind,
seat, and what else tells two apart: a queued message's id), so a resolved line
matches its opened one; ``at`` is the time in seconds since the epoch.

The file rotates as the message log does (:func:`rotate`: ``events.jsonl.1`` …,
the team file's ``log_keep``), and the new file starts with every condition
still open, each copied with ``"carried": true``: so the current file alone
says what is open (a watcher started again reads it), while readers of the
whole history (:func:`read`) count each opened line once.

A line that does not parse is skipped by readers; a file that cannot be read
as the events file (not a plain file, not UTF-8 lines of JSON at its start) is
set aside as ``events.jsonl.damaged-<time>`` by the watcher, which says so on
its error file and starts a new one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from fabrikito.base import rotate, statedir
from fabrikito.base.errors import StateFileError
from fabrikito.base.values import frozen

NAME = "events.jsonl"
OPENED = "opened"
RESOLVED = "resolved"
#: A thing that happened, neither a condition opened nor one resolved (a seat restarted).
NOTED = "noted"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


@frozen
class Event:
    at: float  # seconds since the epoch
    seat: str
    kind: str
    event: str  # OPENED or RESOLVED
    detail: str
    since: float
    key: str
    carried: bool = False  # a copy of an open condition at the top of a rotated file
    host: str | None = None  # the host whose watcher wrote it, as read by the team's machine (None: here)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "time": local_time(self.at),
            "seat": self.seat,
            "kind": self.kind,
            "event": self.event,
            "detail": self.detail,
            "since": local_time(self.since),
            "key": self.key,
            "at": round(self.at, 3),
            "since_at": round(self.since, 3),
        }
        if self.carried:
            data["carried"] = True
        if self.host is not None:
            data["host"] = self.host
        return data

    def line(self) -> bytes:
        return (json.dumps(self.to_json(), ensure_ascii=False, separators=(", ", ": ")) + "\n").encode()


def local_time(when: float) -> str:
    return time.strftime(TIME_FORMAT, time.localtime(when))


def path_for(state_dir: Path) -> Path:
    return state_dir / NAME


def append(path: Path, event: Event) -> None:
    """One line, one ``write()``; raises ``OSError``/``StateFileError`` when it could not be written."""
    statedir.append_line(path, event.line())


def parse(raw: bytes) -> Event | None:
    """One line as an :class:`Event`, ``None`` when it is not one."""
    try:
        data = json.loads(raw)
        return Event(
            at=float(data["at"]),
            seat=str(data["seat"]),
            kind=str(data["kind"]),
            event=str(data["event"]),
            detail=str(data.get("detail", "")),
            since=float(data.get("since_at", data["at"])),
            key=str(data["key"]),
            carried=data.get("carried") is True,
            host=data["host"] if isinstance(data.get("host"), str) else None,
        )
    except (ValueError, KeyError, TypeError):
        return None


def read(path: Path, *, since: float | None = None) -> list[Event]:
    """Every event of the file and its rotated generations (at or after ``since``), oldest first; none when
    there is no file.  A carried copy is left out when its opened line was read already."""
    try:
        data = rotate.read_all(path)
    except (OSError, StateFileError):
        return []
    return parse_all(data, since=since)


def parse_all(data: bytes, *, since: float | None = None) -> list[Event]:
    """The events of a whole history's bytes (a host's, read over ssh), as :func:`read` gives them."""
    return list(_events(data, since))


def _events(data: bytes, since: float | None) -> Iterator[Event]:
    opened: set[str] = set()
    for raw in data.splitlines():
        event = parse(raw) if raw.strip() else None
        if event is None:
            continue
        if event.carried and event.key in opened:
            continue
        if event.event == OPENED:
            opened.add(event.key)
        elif event.event == RESOLVED:
            opened.discard(event.key)
        if since is None or event.at >= since:
            yield event


def rotate_carrying(path: Path, *, max_size: int, keep: int) -> bool:
    """Rotate the events file past ``max_size`` bytes and start the new one with what is still open
    (``True`` when it rotated).  Run by the watcher, the one writer of opened and resolved lines, between
    its rounds; a line another writer (``up``'s restart notes) appends meanwhile lands in one of the two."""
    if size(path) < max_size:
        return False
    still = open_items(read(path))
    if not rotate.rotate(path, max_size=max_size, keep=keep):
        return False
    for event in sorted(still.values(), key=lambda e: e.at):
        append(path, Event(event.at, event.seat, event.kind, event.event, event.detail, event.since, event.key, True))
    return True


def open_items(events: list[Event]) -> dict[str, Event]:
    """The conditions opened and not resolved, by key: what a watcher started again has told already."""
    found: dict[str, Event] = {}
    for event in events:
        if event.event == OPENED:
            found[event.key] = event
        else:
            found.pop(event.key, None)
    return found


def damaged(path: Path) -> str | None:
    """Why ``path`` cannot be the events file (``None``: it can, or it does not exist)."""
    try:
        data = statedir.read_plain(path)
    except StateFileError as exc:
        return str(exc)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    first = data.split(b"\n", 1)[0]
    if parse(first) is None:
        return "its first line is not an event"
    return None


def set_aside(path: Path, why: str) -> str:
    """Move a damaged events file out of the way; what was done, for the error file."""
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    try:
        os.rename(path, aside)
    except OSError as exc:
        return f"the events file {path} is damaged ({why}) and could not be set aside ({exc.strerror})"
    return f"the events file {path} was damaged ({why}): set aside as {aside}; a new one is started"


def read_from(path: Path, position: int) -> tuple[list[Event], int]:
    """The whole lines appended after byte ``position`` (from the start of a file that is now shorter: set
    aside or rotated since), carried copies left out; and the position after them."""
    end = size(path)
    if end < position:
        position = 0
    if end == position:
        return [], position
    try:
        fd = statedir.open_plain(path, os.O_RDONLY)
    except (OSError, StateFileError):
        return [], position
    try:
        chunk = os.pread(fd, end - position, position)
    finally:
        os.close(fd)
    whole = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written is read next time
    found = [e for raw in whole.splitlines() if (e := parse(raw)) is not None and not e.carried]
    return found, position + len(whole)


def follow(path: Path, *, start: int, poll: float = 0.2) -> Iterator[Event]:
    """The events appended after byte ``start``, as they come (a file set aside and started again is
    read from its beginning; a carried copy was told before the rotation)."""
    position = start
    while True:
        found, position = read_from(path, position)
        yield from found
        if not found:
            time.sleep(poll)


def size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
