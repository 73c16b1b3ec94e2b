"""Ending every process a seat started, whatever it was re-parented to.

Closing a pane is not enough: Gemini CLI survives the death of its pane (its
``node`` and the copy it relaunches are re-parented to init), and any agent's
tool calls can leave children behind.  tmux starts a pane's process as the
leader of a new session, and every process it starts keeps that session id
however it is re-parented, unless it starts a session of its own.  So ``up``
records the pane's process id with its start time (``<role>.launch.json``),
and ``down`` ends the session's members that started no earlier than it
(a later session that reuses the id is someone else's), plus the descendants
of those members (a child that started a session of its own but was not yet
re-parented): ``SIGTERM``, a grace period, then ``SIGKILL``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

from fabrikito.base import procs
from fabrikito.base.values import frozen

TERM_GRACE = 5.0
KILL_WAIT = 2.0


@frozen
class Tracked:
    """A process of a seat, known by id and start time (so a reused id is never signalled)."""

    pid: int
    start_ticks: int


def seat_processes(leader: int, leader_ticks: int) -> list[Tracked]:
    """The processes of the seat whose pane process was ``leader`` (started at ``leader_ticks``)."""
    found: dict[int, Tracked] = {}
    for proc in procs.session_members(leader):
        if leader_ticks and proc.start_ticks < leader_ticks:
            continue
        found[proc.pid] = Tracked(proc.pid, proc.start_ticks)
    for pid in list(found):
        for child in _descendants(pid):
            if child not in found:
                try:
                    found[child] = Tracked(child, procs.info(child).start_ticks)
                except (procs.ProcessGone, procs.ProcessUnreadable):
                    continue
    own = os.getpid()
    return [t for t in found.values() if t.pid != own]


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    queue = [pid]
    while queue and len(out) < 256:
        try:
            kids = procs.children_of(queue.pop(0))
        except (procs.ProcessGone, procs.ProcessUnreadable):
            continue
        out += kids
        queue += kids
    return out


def still_running(tracked: Iterable[Tracked]) -> list[Tracked]:
    """Those of ``tracked`` that run and are still the same process (same start time)."""
    left = []
    for t in tracked:
        try:
            same = procs.info(t.pid).start_ticks == t.start_ticks
        except procs.ProcessGone:
            continue
        except procs.ProcessUnreadable:
            same = True
        if same and procs.alive(t.pid):
            left.append(t)
    return left


def end(tracked: Iterable[Tracked], *, grace: float = TERM_GRACE) -> list[Tracked]:
    """``SIGTERM`` each, wait up to ``grace``, ``SIGKILL`` what is left; return what still runs after that."""
    left = still_running(tracked)
    _signal(left, signal.SIGTERM)
    left = _wait(left, grace)
    if left:
        _signal(left, signal.SIGKILL)
        left = _wait(left, KILL_WAIT)
    return left


def _signal(tracked: Iterable[Tracked], sig: signal.Signals) -> None:
    for t in still_running(tracked):
        try:
            os.kill(t.pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def _wait(left: list[Tracked], timeout: float) -> list[Tracked]:
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = still_running(left)
    return left
