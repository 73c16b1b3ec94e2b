"""What guards one seat's typing: its lock, and the record of a paste in progress.

``.state/<team>/say/<role>.lock`` lets one ``say`` or ``flush`` at a time type into a seat;
``say/paste-<role>`` records what ``say`` pasted until its Enter landed, so ``flush`` can submit
what ``say`` itself left in a box and nothing else.  A refusal raised here has typed nothing.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fabrikito.base import daemons, statedir
from fabrikito.base.errors import StateFileError
from fabrikito.team.teamfile import Team

LOCK_TIMEOUT = 8.0
SEC = "sec"


class SeatRefusal(Exception):
    """A delivery refused with nothing typed (its text is the reason)."""


class SeatNotReady(SeatRefusal):
    """Refused for the seat's state at this moment (its box, a dialog, the lock, down): a queue waits it out."""


def say_dir(team: Team) -> Path:
    return team.state_dir / "say"


def paste_record_path(team: Team, role: str) -> Path:
    return say_dir(team) / f"paste-{role}"


@contextmanager
def seat_lock(team: Team, role: str, *, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """One ``say`` (or ``flush``) at a time types into a seat."""
    path = say_dir(team) / f"{role}.lock"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1):
        kind = (
            "a symlink" if stat.S_ISLNK(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a plain file"
        )
        raise SeatRefusal(f"the lock {path} is {kind}: remove it, then send again")
    try:
        fd = statedir.open_plain(path, os.O_RDWR | os.O_CREAT)
    except StateFileError as exc:
        raise SeatRefusal(f"the lock is unusable: {exc}") from None
    try:
        if not daemons.flock_within(fd, timeout):
            raise SeatNotReady(f"another say is typing into this seat and has not finished within {timeout:g} seconds")
        yield
    finally:
        os.close(fd)


def write_paste_record(team: Team, role: str, sender: str, label: str, text: str) -> None:
    private = SEC in (sender, role)
    record = {"sender": sender, "label": label, "body": None if private else text, "time": time.time()}
    try:
        # Not synced: it describes a box of a running agent, which a reboot (all a sync guards against) ends
        # too; a say killed by a signal still leaves it whole (docs/decisions/0010-start-up-imports.md).
        data = json.dumps(record, ensure_ascii=False).encode()
        statedir.write_atomic(paste_record_path(team, role), data, sync=False)
    except (OSError, StateFileError) as exc:
        raise SeatRefusal(f"the paste record could not be written ({exc}), so nothing was typed") from None
