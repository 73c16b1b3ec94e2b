"""What is known of a team's delivery worker without starting or signalling it: for ``status`` and ``queue``.

Kept apart from :mod:`fabrikito.delivery.worker` (the process itself), so
``status`` reads the worker's state without importing the worker's machinery.
"""

from __future__ import annotations

import json
from pathlib import Path

from fabrikito.base import daemons, procs, statedir
from fabrikito.base.errors import StateFileError
from fabrikito.base.values import frozen
from fabrikito.team.teamfile import Team

QUEUE_DIR = "queue"  # .state/<team>/queue: the messages (fabrikito.delivery.queue)
LOCK_NAME = "worker.lock"
INFO_NAME = "worker.json"
MODULE = "fabrikito.delivery.worker"


@frozen
class Info:
    running: bool
    pid: int | None
    since: float | None
    waits: dict[str, str]


def queue_dir(team: Team) -> Path:
    return team.state_dir / QUEUE_DIR


def lock_path(team: Team) -> Path:
    return team.state_dir / LOCK_NAME


def info_path(team: Team) -> Path:
    return team.state_dir / INFO_NAME


def start_ticks(pid: int) -> int | None:
    try:
        return procs.info(pid).start_ticks
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return None


def read_info(team: Team) -> Info:
    """Whether the team's worker runs (its lock is held), its pid and what each seat waits for."""
    running = lock_held(team)
    try:
        data = json.loads(statedir.read_plain(info_path(team)) or b"{}")
    except (OSError, ValueError, StateFileError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    pid = data.get("pid") if isinstance(data.get("pid"), int) else None
    since = data.get("since") if isinstance(data.get("since"), (int, float)) else None
    raw_waits = data.get("waits")
    waits: dict[object, object] = raw_waits if isinstance(raw_waits, dict) else {}
    if not running or pid is None or not is_worker(pid, data.get("start_ticks")):
        return Info(running, None, None, {})
    return Info(True, pid, since, {str(k): str(v) for k, v in waits.items()})


def lock_held(team: Team) -> bool:
    return daemons.lock_held(lock_path(team))


def is_worker(pid: int, start_ticks: object) -> bool:
    try:
        argv = procs.cmdline(pid)
        ticks = procs.info(pid).start_ticks
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return False
    return MODULE in argv and (start_ticks is None or ticks == start_ticks)
