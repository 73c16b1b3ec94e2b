"""The team's watcher, from outside: whether it runs, starting it (``up``) and ending it (``down``).

The watcher itself is :mod:`fabrikito.watch.watcher`.  While it runs it holds
``.state/<team>/watcher.lock`` (which names its pid once it runs) and rewrites
``.state/<team>/watcher.json`` every round: that file's age is its liveness,
so ``status`` says "stuck?" only when no round was seen for
:data:`STALE_AFTER` seconds and otherwise prints the same line every time.
Its errors (a ``notify`` command that failed, an events file set aside) go to
``.state/<team>/watcher.err``.
"""

from __future__ import annotations

import os
import sys
import time

from fabrikito import TYPE_CHECKING
from fabrikito.base import daemons, statedir
from fabrikito.base.errors import FabrikitoError, StateFileError
from fabrikito.base.values import frozen
from fabrikito.team.teamfile import Team

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

MODULE = "fabrikito.watch.watcher"
LOCK_NAME = "watcher.lock"
STATE_NAME = "watcher.json"
ERR_NAME = "watcher.err"
START_WAIT = 5.0
STOP_WAIT = 5.0
STALE_AFTER = 10.0


@frozen
class Info:
    running: bool
    pid: int | None
    stale: float | None  # seconds since its last round, when more than STALE_AFTER


def lock_path(team: Team) -> Path:
    return team.state_dir / LOCK_NAME


def state_path(team: Team) -> Path:
    return team.state_dir / STATE_NAME


def err_path(team: Team) -> Path:
    return team.state_dir / ERR_NAME


def info(team: Team, *, now: float | None = None) -> Info:
    """What ``status`` shows of the watcher, read without signalling it."""
    if not daemons.lock_held(lock_path(team)):
        return Info(False, None, None)
    pid: int | None = None
    try:
        fields = (statedir.read_plain(lock_path(team)) or b"").split()
        pid = int(fields[0]) if fields else None
    except (OSError, StateFileError, ValueError):
        pid = None
    try:
        age = (time.time() if now is None else now) - os.stat(state_path(team)).st_mtime
    except OSError:
        age = None
    return Info(True, pid, age if age is not None and age > STALE_AFTER else None)


def ensure_running(team: Team, *, env: Mapping[str, str] | None = None) -> bool:
    """Start the team's watcher unless one runs; ``True`` when one was started (``up`` restarts a
    watcher that died this way).  Returns once it holds its lock, so a ``down`` right after it ends it."""
    if daemons.lock_held(lock_path(team)):
        return False
    statedir.ensure_state_dir(team.base_dir, team.name)
    child = daemons.start_detached(
        [sys.executable, "-m", MODULE, str(team.path)], cwd=team.base_dir, err_path=err_path(team), env=env
    )
    if not daemons.wait_started(child, lambda: info(team).pid == child.pid, START_WAIT):
        raise FabrikitoError(f"it did not start: see {err_path(team)}")
    return True


def start_for_up(team: Team) -> bool | None:
    """``up``'s start of it, on every machine with seats of the team (``_host up`` runs ``up`` on the other
    hosts), and on the team's own machine, which also reads the other hosts' watchers; ``None`` elsewhere."""
    from fabrikito.team import hosts

    here = hosts.here_of(team)
    if here is not None and not any(hosts.is_here(seat, here) for seat in team.seats):
        return None
    if here is None and not team.seats:
        return None
    return ensure_running(team)


#: What ``up`` starts after the delivery worker (fabrikito.launch.lifecycle.Helper).
UP_HELPER = ("watcher", start_for_up, "nobody is told when a seat needs attention; status still shows it")


def stop(team: Team) -> str | None:
    """End the team's watcher; what happened, for people (``None``: none was running)."""
    found = info(team)
    if not found.running or found.pid is None:
        return None
    if daemons.end(found.pid, lambda: daemons.lock_held(lock_path(team)), STOP_WAIT):
        return f"stopped the watcher (pid {found.pid})"
    return f"killed the watcher (pid {found.pid}): it did not stop within {STOP_WAIT:g} s"
