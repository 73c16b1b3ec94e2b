"""The portable implementation of :mod:`fabrikito.base.hostos`: what macOS runs (psutil, POSIX calls).

Nothing here needs ``/proc``: processes are read through psutil (imported when
a function is first called, not at import), a peer's credentials are macOS's
``LOCAL_PEERCRED`` (a ``struct xucred``: what ``getpeereid`` reads) and
``LOCAL_PEERPID``, and the anonymous lock file is a 0600 file unlinked as soon
as it is opened.

On Linux (``FABRIKITO_PORTABLE=1``) the same code runs; only the kernel's answer
to the two socket options is made from ``SO_PEERCRED`` (:func:`_local_sockopt`),
laid out as macOS lays it out, so the decoding is the one a Mac runs.
"""

from __future__ import annotations

import _socket
import os
import struct
import sys
import time

from fabrikito import TYPE_CHECKING
from fabrikito.base.hostos.kinds import PeerCred, ProcessGone, ProcessUnreadable, ProcInfo, Stat, signalled

if TYPE_CHECKING:
    from collections.abc import Callable
    from socket import socket
    from typing import TypeVar

    import psutil as psutil_types

    T = TypeVar("T")

NAME = "portable"
MAX_SOCKET_PATH = 103
"""Bytes in a unix socket's path: macOS's ``sun_path`` is 104, less its NUL (Linux's is 108)."""
SHORT_ROOT = os.path.realpath("/tmp")  # noqa: S108 (a per-user 0700 directory is made in it, and checked)
"""Where a socket whose path would be too long goes instead, resolved: macOS's ``/tmp`` is a link to
``/private/tmp``, and a state directory is not made through a link; the path recorded is then the path
resolved, so its hash is the same whether a reader resolves it or not (message-claude.md)."""

SOL_LOCAL = 0  # <sys/un.h>
LOCAL_PEERCRED = 0x001
LOCAL_PEERPID = 0x002
XUCRED_VERSION = 0
XUCRED = struct.Struct("IIh16I")  # cr_version, cr_uid, cr_ngroups, cr_groups[NGROUPS] (76 bytes)
PS_TIMEOUT = 5.0
_STATES = {"zombie": "Z", "dead": "X", "stopped": "T", "running": "R", "sleeping": "S", "disk-sleep": "D"}


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def _ticks(created: float, boot: float) -> int:
    """A start time (seconds since the epoch) as clock ticks since boot: Linux's ``procStart`` unit."""
    return round((created - boot) * _clock_ticks())


def _process(pid: int) -> psutil_types.Process:
    return _ask(pid, lambda proc: proc)


def _ask(pid: int, question: Callable[[psutil_types.Process], T]) -> T:
    """``question`` asked of process ``pid``, psutil's errors raised as :class:`ProcessGone` (no such process)
    and :class:`ProcessUnreadable` (any other)."""
    import psutil

    try:
        return question(psutil.Process(pid))
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None
    except psutil.Error as exc:
        raise ProcessUnreadable(f"process {pid}: {exc}") from None


def info(pid: int) -> ProcInfo:
    import psutil

    proc = _process(pid)
    try:
        with proc.oneshot():
            return ProcInfo(
                pid=pid,
                ppid=proc.ppid(),
                name=proc.name(),
                start_ticks=_ticks(proc.create_time(), psutil.boot_time()),
                tty_pgrp=-1,  # psutil does not read it: foreground_group asks ps
                pgrp=os.getpgid(pid),
                sid=os.getsid(pid),
            )
    except (psutil.NoSuchProcess, ProcessLookupError):
        raise ProcessGone(pid) from None
    except (psutil.Error, OSError) as exc:
        raise ProcessUnreadable(f"process {pid}: {exc}") from None


def foreground_group(proc: ProcInfo) -> int:
    """The foreground process group of ``proc``'s terminal (-1: it has none, or it cannot be told).

    Neither psutil nor ``tcgetpgrp`` tells it for a terminal that is not this process's own (both systems
    answer ``ENOTTY``); ``ps -o tpgid`` reads it from the kernel's process table on macOS and Linux alike.
    """
    if proc.tty_pgrp > 0:
        return proc.tty_pgrp
    from fabrikito.base import spawn

    try:
        code, out, _err = spawn.run(["ps", "-o", "tpgid=", "-p", str(proc.pid)], b"", PS_TIMEOUT, os.environ)
    except (OSError, spawn.TimedOut):
        return -1
    try:
        return int(out) if code == 0 else -1
    except ValueError:
        return -1


def stat(pid: int) -> Stat | None:
    """State, start time and parent, or ``None`` when the process cannot be read."""
    import psutil

    try:
        proc = _process(pid)
        with proc.oneshot():
            state = _STATES.get(proc.status(), "S")
            start = str(_ticks(proc.create_time(), psutil.boot_time()))
            return Stat(state=state, start=start, ppid=proc.ppid())
    except (ProcessGone, ProcessUnreadable, psutil.Error):
        return None


def parent(pid: int) -> int | None:
    import psutil

    try:
        return int(_process(pid).ppid())
    except (ProcessGone, ProcessUnreadable, psutil.Error):
        return None


def exe_path(pid: int) -> str | None:
    """The program a process runs, or ``None`` when it cannot be read."""
    import psutil

    proc = _process(pid)
    try:
        return str(proc.exe()) or None
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None
    except psutil.Error:
        return None


def exe_name(pid: int) -> str:
    """The base name of the program a process runs, or its name when that cannot be read."""
    found = exe_path(pid)
    return os.path.basename(found) if found is not None else info(pid).name


def cmdline(pid: int) -> list[str]:
    return _ask(pid, lambda proc: [part for part in proc.cmdline() if part])


def environ(pid: int) -> dict[str, str]:
    """The environment a process started with (same user only)."""
    return _ask(pid, lambda proc: dict(proc.environ()))


def environ_values(pid: int, names: tuple[str, ...]) -> dict[str, str]:
    """The values of ``names`` in the environment a process started with."""
    env = environ(pid)
    return {name: env[name] for name in names if name in env}


def cwd(pid: int) -> str | None:
    """A process's working directory, or ``None`` when it cannot be read."""
    import psutil

    try:
        return str(_process(pid).cwd()) or None
    except (ProcessGone, ProcessUnreadable, psutil.Error):
        return None


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    return _ask(pid, lambda proc: [child.pid for child in proc.children()])


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    told = signalled(pid)
    if told is not None:
        return told
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def pids() -> list[int]:
    """Every process's pid."""
    import psutil

    return list(psutil.pids())


def pid_domain() -> str | None:
    """Claude Code's ``pidDomain``, which it writes on Linux only (``linux:…``): off Linux there is none.

    A fact of the system, not of an implementation: on Linux (the portable implementation forced) the Linux
    one is asked, since Claude Code there skips a registry entry whose domain is not its own, and a Mac's
    Claude Code never reads one.
    """
    if sys.platform.startswith("linux"):
        from fabrikito.base.hostos import linux

        return linux.pid_domain()
    return None


def pid_domain_matches(recorded: str) -> bool | None:
    """Whether a ``pidDomain`` Claude Code recorded is this process's: a Linux one, off Linux, is not (the
    entry was written on another system sharing the folder); on Linux, as the Linux implementation says;
    anything else cannot be told (``None``: the pid is checked as it is)."""
    if sys.platform.startswith("linux"):
        from fabrikito.base.hostos import linux

        return linux.pid_domain_matches(recorded)
    return False if recorded.startswith("linux:") else None


def _local_sockopt(sock: socket | _socket.socket, option: int, size: int) -> bytes:
    """``getsockopt(SOL_LOCAL, option)``: the system's own on macOS; on Linux made from ``SO_PEERCRED`` as
    macOS lays it out (a ``struct xucred`` for ``LOCAL_PEERCRED``, a ``pid_t`` for ``LOCAL_PEERPID``)."""
    if sys.platform == "darwin":
        return sock.getsockopt(SOL_LOCAL, option, size)
    pid, uid, gid = struct.unpack("3i", sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12))
    if option == LOCAL_PEERCRED:
        return XUCRED.pack(XUCRED_VERSION, uid, 1, gid, *([0] * 15))[:size]
    if option == LOCAL_PEERPID:
        return struct.pack("i", pid)[:size]
    raise OSError(f"socket option {option} is not simulated")


def decode_xucred(raw: bytes) -> int:
    """The uid in a ``struct xucred`` (what ``getpeereid`` returns on macOS)."""
    if len(raw) < XUCRED.size:
        raise OSError(f"LOCAL_PEERCRED gave {len(raw)} bytes, not a struct xucred ({XUCRED.size})")
    version, uid, _ngroups, *_groups = XUCRED.unpack(raw[: XUCRED.size])
    if version != XUCRED_VERSION:
        raise OSError(f"LOCAL_PEERCRED gave a struct xucred of version {version}, not {XUCRED_VERSION}")
    return int(uid)


def peer_cred(sock: socket | _socket.socket) -> PeerCred:
    """The uid (``LOCAL_PEERCRED``) and, when the system gives it, the pid (``LOCAL_PEERPID``) at ``connect``."""
    uid = decode_xucred(_local_sockopt(sock, LOCAL_PEERCRED, XUCRED.size))
    try:
        (pid,) = struct.unpack("i", _local_sockopt(sock, LOCAL_PEERPID, 4))
    except (OSError, struct.error):
        pid = 0
    return PeerCred(uid=uid, pid=pid if pid > 0 else None)


def lock_file(name: str) -> int:
    """A descriptor of an anonymous file, for ``lockf`` between this process and those it forks: a 0600 file
    made in the temporary directory (never through a link, never an existing one) and unlinked at once."""
    base = os.environ.get("TMPDIR") or "/tmp"  # noqa: S108 (a new 0600 file, O_EXCL, O_NOFOLLOW, unlinked)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        path = os.path.join(base, f".{name}-{os.getpid()}-{os.urandom(8).hex()}")
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        os.unlink(path)
        return fd


def socket_owner(socket_path: str, candidates: list[int], *, deadline: float) -> int | None:
    """The pid of a process holding the unix socket bound at ``socket_path``: ``candidates`` first, then the
    system's table (all of it where it is readable, as on Linux; on macOS only root reads it), then every
    process until ``deadline`` (``time.monotonic``)."""
    import psutil

    paths = {socket_path, os.path.realpath(socket_path)}
    for pid in candidates:
        if _holds(pid, paths):
            return pid
    try:
        for conn in psutil.net_connections(kind="unix"):
            if isinstance(conn.laddr, str) and conn.laddr in paths and conn.pid is not None:
                return int(conn.pid)
        return None
    except psutil.AccessDenied:
        pass
    for pid in psutil.pids():
        if time.monotonic() >= deadline:
            return None
        if _holds(pid, paths):
            return pid
    return None


def _holds(pid: int, paths: set[str]) -> bool:
    import psutil

    try:
        conns = psutil.Process(pid).net_connections(kind="unix")
    except psutil.Error:
        return False
    return any(isinstance(conn.laddr, str) and conn.laddr in paths for conn in conns)
