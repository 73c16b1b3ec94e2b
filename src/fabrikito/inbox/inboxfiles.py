"""Where a seat's inbox keeps its files, and what is known of it without signalling it.

Under ``.state/<team>/inbox/`` (0700): ``<role>.lock`` (held while it runs),
``<role>.json`` (its pid, socket, registry files), ``<role>.sock`` (0600),
``<role>.log`` (connections it closed, and why) and ``<role>.err`` (what the
process printed).  A Unix socket path holds at most 107 bytes (103 on macOS:
:data:`fabrikito.base.hostos.MAX_SOCKET_PATH`): when ``.state`` lies deeper
than that allows, the socket goes to ``/tmp/fabrikito-<uid>/inbox-<hash>.sock``
(``/private/tmp`` on macOS, where ``/tmp`` is a link; a 0700 directory of this user's).

Kept apart from :mod:`fabrikito.inbox.server` so ``status`` and ``down`` read
and clean up without the server's machinery.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from fabrikito.base import daemons, hostos, procs, statedir
from fabrikito.base.errors import StateFileError
from fabrikito.base.values import frozen
from fabrikito.team.teamfile import Team

INBOX_DIR = "inbox"
ERR_SUFFIX = ".err"
INBOX_MARK = "fabrikitoInbox"
"""The registry entry's key that says fabrikito's inbox wrote it (Claude Code ignores it)."""
MAX_SOCKET_PATH = hostos.MAX_SOCKET_PATH
SHORT_ROOT = hostos.SHORT_ROOT


@frozen
class Places:
    dir: Path
    lock: Path
    info: Path
    notes: Path
    socket: str
    sessions: Path


@frozen
class Info:
    running: bool
    pid: int | None
    socket: str | None
    registry: str | None
    key: str | None
    session_id: str | None
    name: str | None


def sessions_dir(env: Mapping[str, str] | None = None) -> Path:
    return procs.config_dir(env) / "sessions"


def places(team: Team, role: str, env: Mapping[str, str] | None = None) -> Places:
    """The inbox's paths for ``role`` (its directories are created, 0700)."""
    statedir.ensure_state_dir(team.base_dir, team.name)
    where = statedir.ensure_dir(team.state_dir / INBOX_DIR)
    sock = str(where / f"{role}.sock")
    if len(os.fsencode(sock)) > MAX_SOCKET_PATH:
        short = Path(SHORT_ROOT) / f"fabrikito-{os.getuid()}"
        statedir.ensure_dir(short)
        if os.lstat(short).st_uid != os.getuid():
            raise StateFileError(f"{short} belongs to another user: remove it, or keep the team in a shorter path")
        sock = str(short / f"inbox-{hashlib.sha256(sock.encode()).hexdigest()[:20]}.sock")
    return Places(
        dir=where,
        lock=where / f"{role}.lock",
        info=where / f"{role}.json",
        notes=where / f"{role}.log",
        socket=sock,
        sessions=sessions_dir(env),
    )


def read_info(where: Places) -> Info:
    """Whether the inbox runs (its lock is held) and what its info file records."""
    running = daemons.lock_held(where.lock)
    try:
        data = json.loads(statedir.read_plain(where.info) or b"{}")
    except (OSError, ValueError, StateFileError):
        data = {}
    if not isinstance(data, dict):
        data = {}

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    pid = data.get("pid")
    return Info(
        running=running,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        socket=text("socket"),
        registry=text("registry"),
        key=text("key"),
        session_id=text("sessionId"),
        name=text("name"),
    )


def remove_registry(where: Places) -> None:
    """Remove the registry file and key file the info file records, if they are still this inbox's."""
    found = read_info(where)
    if found.registry is None:
        return
    registry = Path(found.registry)
    try:
        data = json.loads(registry.read_bytes())
    except (OSError, ValueError):
        data = None
    ours = (
        isinstance(data, dict) and isinstance(data.get(INBOX_MARK), dict) and data.get("sessionId") == found.session_id
    )
    if ours:
        statedir.remove_quietly(registry)
    # The key file is named by this inbox's socket: no Claude Code session shares it.
    if (ours or data is None) and found.key is not None:
        statedir.remove_quietly(Path(found.key))


def clear_stale(where: Places, *, lock_is_ours: bool = False) -> None:
    """What an inbox that was killed left behind (registry, key, socket, info); nothing while one runs.

    ``lock_is_ours``: the caller holds the inbox's lock (a new inbox, before it binds).
    """
    if not lock_is_ours and daemons.lock_held(where.lock):
        return
    found = read_info(where)
    remove_registry(where)
    for path in {p for p in (found.socket, where.socket) if p is not None}:
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass
    statedir.remove_quietly(where.info)
