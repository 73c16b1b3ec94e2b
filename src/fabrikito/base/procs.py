"""What fabrikito reads about processes: parent, name, start time, terminal.

On Linux this reads ``/proc`` directly, which costs nothing at import time
(``say`` and the hook run on every message).  Elsewhere it uses psutil,
imported only when a function is called.  "Could not look" is kept apart from
"not there": :class:`ProcessUnreadable` is raised when a process exists but
cannot be read, :class:`ProcessGone` when it does not exist.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from fabrikito.base.values import frozen

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from pathlib import Path

_LINUX = sys.platform.startswith("linux")


class ProcessGone(Exception):
    """The process does not exist (any more)."""


class ProcessUnreadable(Exception):
    """The process exists but its details cannot be read."""


@frozen
class ProcInfo:
    pid: int
    ppid: int
    name: str
    start_ticks: int  # field 22 of /proc/<pid>/stat: start time in clock ticks since boot
    tty_pgrp: int  # foreground process group of the process's terminal (-1: none)
    pgrp: int = -1  # the process's own process group (-1: not known)
    sid: int = -1  # the process's session (-1: not known)


def info(pid: int) -> ProcInfo:
    if not _LINUX:
        return _info_psutil(pid)
    raw = _read_proc(pid, "stat")
    # The name is in parentheses and may itself hold ") ": split at the last one.
    head, sep, tail = raw.rpartition(b") ")
    if not sep:
        raise ProcessUnreadable(f"process {pid}: unexpected /proc/{pid}/stat")
    name = head.partition(b" (")[2].decode("utf-8", "replace")
    fields = tail.split()
    try:
        ppid = int(fields[1])
        pgrp = int(fields[2])
        sid = int(fields[3])
        tpgid = int(fields[5])
        start = int(fields[19])
    except (IndexError, ValueError):
        raise ProcessUnreadable(f"process {pid}: unexpected /proc/{pid}/stat") from None
    return ProcInfo(pid=pid, ppid=ppid, name=name, start_ticks=start, tty_pgrp=tpgid, pgrp=pgrp, sid=sid)


def _info_psutil(pid: int) -> ProcInfo:
    import psutil

    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return ProcInfo(
                pid=pid,
                ppid=proc.ppid(),
                name=proc.name(),
                start_ticks=int(proc.create_time() * 100),
                tty_pgrp=-1,
                pgrp=os.getpgid(pid),
                sid=os.getsid(pid),
            )
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None
    except psutil.Error as exc:
        raise ProcessUnreadable(f"process {pid}: {exc}") from None


def exe_path(pid: int) -> str | None:
    """The program a process runs (``/proc/<pid>/exe``), or ``None`` when it cannot be read."""
    if _LINUX:
        try:
            return os.readlink(f"/proc/{pid}/exe")
        except FileNotFoundError:
            raise ProcessGone(pid) from None
        except OSError:
            return None
    import psutil

    try:
        return str(psutil.Process(pid).exe()) or None
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None
    except psutil.Error:
        return None


def exe_name(pid: int) -> str:
    """The base name of the program a process runs (``/proc/<pid>/exe``), or its name."""
    if _LINUX:
        try:
            return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except FileNotFoundError:
            raise ProcessGone(pid) from None
        except OSError:
            return info(pid).name
    import psutil

    try:
        return os.path.basename(psutil.Process(pid).exe())
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None
    except psutil.Error:
        return info(pid).name


def _read_proc(pid: int, name: str) -> bytes:
    """``/proc/<pid>/<name>``, with gone and unreadable kept apart."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ProcessGone(pid) from None
    except OSError as exc:
        raise ProcessUnreadable(f"process {pid}: {exc.strerror}") from None


def cmdline(pid: int) -> list[str]:
    if _LINUX:
        raw = _read_proc(pid, "cmdline")
        return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
    import psutil

    try:
        return list(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None
    except psutil.Error as exc:
        raise ProcessUnreadable(f"process {pid}: {exc}") from None


def environ(pid: int) -> dict[str, str]:
    """The environment a process started with (same user only)."""
    if _LINUX:
        raw = _read_proc(pid, "environ")
        env: dict[str, str] = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep:
                env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        return env
    import psutil

    try:
        return dict(psutil.Process(pid).environ())
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None
    except psutil.Error as exc:
        raise ProcessUnreadable(f"process {pid}: {exc}") from None


def claude_config_dir(env: Mapping[str, str]) -> str | None:
    """``${CLAUDE_CONFIG_DIR:-$HOME/.claude}`` in the environment ``env``; ``None`` with neither set."""
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return os.path.expanduser(configured)
    home = env.get("HOME")
    return os.path.join(home, ".claude") if home else None


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``${CLAUDE_CONFIG_DIR:-$HOME/.claude}`` as a path, from ``env`` (default: this process's)."""
    from pathlib import Path

    return Path(config_dir_name(env))


def config_dir_name(env: Mapping[str, str] | None = None) -> str:
    """:func:`config_dir` as a string (``send`` does not import pathlib)."""
    found = claude_config_dir(os.environ if env is None else env)
    return found if found is not None else os.path.join(os.path.expanduser("~"), ".claude")


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux: from every task's children file)."""
    if _LINUX:
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
    import psutil

    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        raise ProcessGone(pid) from None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not _LINUX:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b") ")[2][:1] != b"Z"
    except OSError:
        return True


def session_members(sid: int) -> list[ProcInfo]:
    """Every running process of session ``sid`` that can be read (zombies left out): what a process
    started in a tmux pane (the session's leader) and everything it started keep, whatever they are
    re-parented to, unless they start a session of their own."""
    if _LINUX:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    else:
        import psutil

        pids = psutil.pids()
    found = []
    for pid in pids:
        try:
            proc = info(pid)
        except (ProcessGone, ProcessUnreadable, OSError):
            continue
        if proc.sid == sid and alive(pid):
            found.append(proc)
    return found
