"""The team's long-running helpers (the delivery worker, the inboxes, the command server): started
detached, found by the lock each holds while it runs, and ended by signal.

Each holds an ``flock`` on a lock file for as long as it runs, so "is it running"
is whether that lock is held, whatever pid files say; a helper that died left
no lock behind.
"""

from __future__ import annotations

import fcntl
import os
import time

from fabrikito import TYPE_CHECKING
from fabrikito.base import statedir
from fabrikito.base.errors import StateFileError

if TYPE_CHECKING:  # status reads whether the worker runs: it imports neither subprocess nor signal
    import subprocess
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path


def lock_held(path: Path) -> bool:
    """Whether some process holds ``path``'s lock (a missing or unsafe file: no)."""
    try:
        fd = statedir.open_plain(path, os.O_RDONLY)
    except (OSError, StateFileError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def hold_lock(path: Path) -> int | None:
    """Open ``path`` (0600, no link) and take its lock for as long as the descriptor returned stays
    open (the helper's life); ``None`` when another process holds it: one helper runs, not two."""
    fd = statedir.open_plain(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def flock_within(fd: int, seconds: float, step: float = 0.02) -> bool:
    """Take ``fd``'s exclusive ``flock``, trying every ``step`` seconds for at most ``seconds``;
    ``False`` when another process kept it that long."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(step)


def start_detached(
    argv: Sequence[str], *, cwd: Path, err_path: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``argv`` in a session of its own (closing the terminal that started it does not end it),
    no input, its output dropped, its errors appended to ``err_path`` (0600, no link)."""
    import subprocess

    err = statedir.open_plain(err_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=str(cwd),
            env=None if env is None else dict(env),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(err)


def wait_started(child: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float) -> bool:
    """Wait until ``ready()`` (it holds its lock, it listens) or the child has ended; whether it is ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        if child.poll() is not None:
            return ready()
        time.sleep(0.01)
    return ready()


def end(pid: int, running: Callable[[], bool], timeout: float) -> bool:
    """SIGTERM ``pid`` and wait until ``running()`` is false; SIGKILL it after ``timeout``.
    ``True`` when it stopped by itself."""
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not running():
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    time.sleep(0.1)
    return False
