"""The Linux implementation of :mod:`fabrikito.base.hostos`: ``/proc``, ``SO_PEERCRED``, ``memfd_create``.

Reading ``/proc`` directly costs nothing at import time and about a tenth of
what psutil costs per call (docs/benchmarks.md); ``say`` and the hook read
processes on every message.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from fabrikito import TYPE_CHECKING
from fabrikito.base.hostos.kinds import PeerCred, ProcessGone, ProcessUnreadable, ProcInfo, Stat, signalled

if TYPE_CHECKING:
    from socket import socket

NAME = "linux"
MAX_SOCKET_PATH = 107
"""Bytes in a unix socket's path (``sockaddr_un``'s ``sun_path`` is 108, less its NUL)."""
SHORT_ROOT = "/tmp"  # noqa: S108 (a per-user 0700 directory is made in it, and checked)
"""Where a socket whose path would be too long goes instead (not a link on Linux)."""
LISTENING = 0x10000  # /proc/net/unix's flag of a listening socket


def _read(pid: int, name: str) -> bytes:
    """``/proc/<pid>/<name>``, with gone and unreadable kept apart."""
    try:  # os.open and os.read: a file object costs three system calls more (status reads 200 of these)
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY)
        try:
            chunks = [os.read(fd, 1 << 16)]
            while chunks[-1]:
                chunks.append(os.read(fd, 1 << 16))
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise ProcessGone(pid) from None
    except OSError as exc:
        raise ProcessUnreadable(f"process {pid}: {exc.strerror}") from None
    return b"".join(chunks)


def _stat_fields(pid: int) -> tuple[str, list[bytes]]:
    raw = _read(pid, "stat")
    # The name is in parentheses and may itself hold ") ": split at the last one.
    head, sep, tail = raw.rpartition(b") ")
    if not sep:
        raise ProcessUnreadable(f"process {pid}: unexpected /proc/{pid}/stat")
    return head.partition(b" (")[2].decode("utf-8", "replace"), tail.split()


def info(pid: int) -> ProcInfo:
    name, fields = _stat_fields(pid)
    try:
        ppid, pgrp, sid, tpgid, start = (int(fields[i]) for i in (1, 2, 3, 5, 19))
    except (IndexError, ValueError):
        raise ProcessUnreadable(f"process {pid}: unexpected /proc/{pid}/stat") from None
    return ProcInfo(pid=pid, ppid=ppid, name=name, start_ticks=start, tty_pgrp=tpgid, pgrp=pgrp, sid=sid)


def foreground_group(proc: ProcInfo) -> int:
    """The foreground process group of ``proc``'s terminal (-1: it has none): :func:`info` read it."""
    return proc.tty_pgrp


def stat(pid: int) -> Stat | None:
    """State, start time and parent, or ``None`` when the process cannot be read."""
    try:
        _, fields = _stat_fields(pid)
        return Stat(state=fields[0].decode("ascii", "replace"), start=fields[19].decode("ascii"), ppid=int(fields[1]))
    except (ProcessGone, ProcessUnreadable, IndexError, ValueError, UnicodeDecodeError):
        return None


def parent(pid: int) -> int | None:
    found = stat(pid)
    return None if found is None else found.ppid


def exe_path(pid: int) -> str | None:
    """The program a process runs, or ``None`` when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except FileNotFoundError:
        raise ProcessGone(pid) from None
    except OSError:
        return None


def exe_name(pid: int) -> str:
    """The base name of the program a process runs, or its name when that cannot be read."""
    found = exe_path(pid)
    return os.path.basename(found) if found is not None else info(pid).name


def cmdline(pid: int) -> list[str]:
    return [part.decode("utf-8", "replace") for part in _read(pid, "cmdline").split(b"\0") if part]


def environ(pid: int) -> dict[str, str]:
    """The environment a process started with (same user only)."""
    env: dict[str, str] = {}
    for item in _read(pid, "environ").decode("utf-8", "replace").split("\0"):  # one decode (a NUL ends no
        key, sep, value = item.partition("=")  # character), as each name and value decoded on its own
        if sep:
            env[key] = value
    return env


def environ_values(pid: int, names: tuple[str, ...]) -> dict[str, str]:
    """The values of ``names`` in the environment a process started with, as :func:`environ` has them (the
    last of a name given twice), without decoding the rest: ``status`` reads two names of every seat's."""
    raw = b"\0" + _read(pid, "environ")
    found: dict[str, str] = {}
    for name in names:
        key = b"\0" + name.encode("utf-8", "surrogateescape") + b"="
        at = raw.rfind(key)  # a value holds no NUL, so only an entry's start matches
        if at >= 0:
            start = at + len(key)
            end = raw.find(b"\0", start)
            found[name] = raw[start : end if end >= 0 else len(raw)].decode("utf-8", "replace")
    return found


def cwd(pid: int) -> str | None:
    """A process's working directory, or ``None`` when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid``, from every task's children file."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise ProcessGone(pid) from None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                kids += [int(x) for x in f.read().split()]
        except OSError:
            continue
    return kids


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    told = signalled(pid)
    if told is not None:
        return told
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b") ")[2][:1] != b"Z"
    except OSError:
        return True


def pids() -> list[int]:
    """Every process's pid."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def pid_domain() -> str | None:
    """``linux:<machine id>:pid:[<pid namespace>]``, as Claude Code writes ``pidDomain``.

    Measured on 2.1.316: the middle part is ``/etc/machine-id`` (not the boot id).
    """
    machine = None
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path, encoding="ascii") as f:
                machine = f.read().strip()
        except OSError:
            continue
        if machine:
            break
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"linux:{machine}:{ns}" if machine else None


def pid_domain_matches(recorded: str) -> bool | None:
    """Whether a ``pidDomain`` Claude Code recorded is this process's (``None``: this one cannot be read)."""
    ours = pid_domain()
    return None if ours is None else ours == recorded


def peer_cred(sock: socket | _socket.socket) -> PeerCred:
    """``SO_PEERCRED``: pid, uid and gid as C ints, as they were at ``connect`` (``_socket``: the command
    line's client does not import ``socket``)."""
    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    pid = int.from_bytes(raw[0:4], sys.byteorder, signed=True)
    uid = int.from_bytes(raw[4:8], sys.byteorder)
    return PeerCred(uid=uid, pid=pid if pid > 0 else None)


def lock_file(name: str) -> int:
    """A descriptor of an anonymous file, for ``lockf`` between this process and those it forks."""
    return os.memfd_create(name)


def socket_owner(socket_path: str, candidates: list[int], *, deadline: float) -> int | None:
    """The pid of a process holding the listening unix socket bound at ``socket_path``: ``candidates`` first,
    then every process until ``deadline`` (``time.monotonic``)."""
    inodes = _listening_inodes(socket_path)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in candidates:
        if _holds(pid, wanted):
            return pid
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if time.monotonic() >= deadline:
            return None
        if entry.isdigit() and _holds(int(entry), wanted):
            return int(entry)
    return None


def _listening_inodes(socket_path: str) -> set[str]:
    """Inodes of listening sockets bound at the path."""
    try:
        with open("/proc/net/unix", "rb") as handle:
            table = handle.read().decode("utf-8", "surrogateescape")
    except OSError:
        return set()
    paths = {socket_path, os.path.realpath(socket_path)}
    inodes = set()
    for row in table.split("\n")[1:]:
        parts = row.split(None, 7)
        # Num RefCount Protocol Flags Type St Inode Path
        if len(parts) == 8 and parts[7] in paths:
            try:
                listening = int(parts[3], 16) & LISTENING
            except ValueError:
                continue
            if listening:
                inodes.add(parts[6])
    return inodes


def _holds(pid: int, wanted: set[str]) -> bool:
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"{fd_dir}/{fd}") in wanted:
                return True
        except OSError:
            continue
    return False
