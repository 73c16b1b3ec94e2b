"""What both implementations of :mod:`fabrikito.base.hostos` answer with, and the errors they raise."""

from __future__ import annotations

import os

from fabrikito.base.values import frozen


class ProcessGone(Exception):
    """The process does not exist (any more)."""


class ProcessUnreadable(Exception):
    """The process exists but its details cannot be read."""


@frozen
class ProcInfo:
    pid: int
    ppid: int
    name: str
    start_ticks: int  # start time in clock ticks since boot (Linux: field 22 of the process's stat)
    tty_pgrp: int  # foreground process group of its terminal (-1: none, or not read: hostos.foreground_group)
    pgrp: int = -1  # the process's own process group (-1: not known)
    sid: int = -1  # the process's session (-1: not known)


@frozen
class Stat:
    """What a registry entry is checked against: the process's state letter (``Z`` a zombie), its start
    time in clock ticks as Claude Code records it (``procStart``; ``None`` when it cannot be told), its parent."""

    state: str
    start: str | None
    ppid: int


@frozen
class PeerCred:
    """Who is at the other end of a connected unix socket: its uid, and its pid when the system says."""

    uid: int
    pid: int | None


def signalled(pid: int) -> bool | None:
    """What signal 0 tells of ``pid``: ``False`` no such process, ``True`` one runs that this user may not
    signal; ``None``: it can be signalled, and is a live process or a zombie (each system tells which)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return None
