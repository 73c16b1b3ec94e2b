"""The team file this process read last, kept so that reading it again unchanged costs a ``stat``.

By its stamp, the home folder its ``~`` was read against and the stamp of its
kept parse: read again unchanged (a command server's forked children, the
server itself, a command that loads it twice) it is neither read nor checked
again.  Kept only beside a kept parse (a team brought up), and not when its
check looked at the file system (a ``command`` that reads like a shell line);
any change to the file or to its kept parse is read and checked again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

_LOADED: dict[tuple[str, str | None, tuple[int, int, int, int] | None], object] = {}  # a Team, by its stamps


def recall(stamp: str, cache: Path) -> object | None:
    """The team read last from a file of ``stamp`` beside the kept parse ``cache``, if both are unchanged."""
    return _LOADED.get((stamp, os.environ.get("HOME"), stamp_of(cache)))


def keep(stamp: str, cache: Path, data: Mapping[str, Any], team: object) -> None:
    """Remember ``team``, read from a file of ``stamp`` whose parse is ``data`` (kept in ``cache``)."""
    kept = stamp_of(cache)
    _LOADED.clear()
    if kept is not None and not checks_files(data):
        _LOADED[(stamp, os.environ.get("HOME"), kept)] = team


def stamp_of(cache: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.lstat(cache)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def checks_files(data: Mapping[str, Any]) -> bool:
    """Whether the team file's check looks at the file system for ``data`` (a seat's one-string
    ``command`` of several words is checked against a file of that name)."""
    seats = data.get("seat")
    if not isinstance(seats, list):
        return False
    return any(
        isinstance(seat, dict) and isinstance(seat.get("command"), str) and len(seat["command"].split()) > 1
        for seat in seats
    )
