"""Running a program with its stdin, stdout and stderr as pipes, under a deadline.

``subprocess.run`` without ``subprocess``: that module (with ``selectors``,
``signal`` and ``threading``) costs 4 ms of start-up to ``say`` and
``status``, more than a tmux or ssh call.  Used by the one module that runs
tmux (:mod:`fabrikito.base.tmux`) and the one that runs ssh
(:mod:`fabrikito.base.ssh`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from fabrikito.base.values import frozen


class TimedOut(TimeoutError):
    """The deadline passed: ``str()`` is what the program wrote on stderr, ``out`` what it wrote on stdout."""

    def __init__(self, err: str, out: bytes) -> None:
        super().__init__(err)
        self.out = out


@frozen
class Started:
    """A program :func:`start` started: its pid, its pipes (``in_w`` -1: its stdin closed), and when it started."""

    pid: int
    in_w: int
    out_r: int
    err_r: int
    data: bytes
    started: float


def start(argv: list[str], env: Mapping[str, str], data: bytes = b"", *, keep_stdin: bool = False) -> Started:
    """Start ``argv`` with three pipes; :func:`finish` feeds it ``data`` and reads what it writes.

    ``keep_stdin``: its stdin stays open for the caller to write (``in_w``) though
    ``data`` is empty (a tmux control-mode client reads its commands there).

    Between the two the caller does its own work while the program runs (``status``
    starts its pane list before it imports the rest).  Descriptors fabrikito opens
    are not inherited (Python opens them close-on-exec).
    """
    import time

    started = time.monotonic()
    # In this order, whatever of 0, 1, 2 is closed: a pipe end that lands there is
    # never overwritten by an earlier redirection of the child (in -> 0, out -> 1, err -> 2).
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    dup2 = os.POSIX_SPAWN_DUP2
    try:
        # setsigmask: nothing blocked, whatever this process holds (a served say holds the stop signals
        # until its guard is up, cli/served.py)
        actions = [(dup2, in_r, 0), (dup2, out_w, 1), (dup2, err_w, 2)]
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsigmask=())
    except BaseException:
        for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        raise
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    if not data and not keep_stdin:
        os.close(in_w)
        in_w = -1
    return Started(pid, in_w, out_r, err_r, data, started)


def finish(run: Started, timeout: float, on_out: Callable[[bytes], None] | None = None) -> tuple[int, bytes, bytes]:
    """Wait for a started program, ``timeout`` seconds from its start; its exit status, stdout and stderr.

    One poll loop: past the deadline the process is killed and reaped, and
    :class:`TimedOut` carries what it wrote on stderr (and on stdout).
    """
    import select
    import time

    deadline = run.started + timeout
    in_w, out_r, err_r, pid = run.in_w, run.out_r, run.err_r, run.pid
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    poller = select.poll()
    poller.register(out_r, select.POLLIN)
    poller.register(err_r, select.POLLIN)
    reading = {out_r, err_r}
    pending = memoryview(run.data)
    if in_w >= 0:
        os.set_blocking(in_w, False)
        poller.register(in_w, select.POLLOUT)
    status: int | None = None
    try:
        while reading:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut(b"".join(chunks[err_r]).decode("utf-8", "replace"), b"".join(chunks[out_r]))
            for fd, _event in poller.poll(left * 1000):
                if fd == in_w:
                    try:
                        pending = pending[os.write(in_w, pending[: 1 << 16]) :]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        poller.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                    continue
                block = os.read(fd, 1 << 16)
                if block:
                    chunks[fd].append(block)
                    if on_out is not None and fd == out_r:
                        on_out(block)  # as it comes (up's progress from another host)
                else:
                    poller.unregister(fd)
                    reading.discard(fd)
        _, status = os.waitpid(pid, 0)
    finally:
        for fd in (out_r, err_r, in_w):
            if fd >= 0:
                os.close(fd)
        if status is None:  # timed out or interrupted: the process does not outlive the call
            end(pid)
    return os.waitstatus_to_exitcode(status), b"".join(chunks[out_r]), b"".join(chunks[err_r])


def end(pid: int) -> None:
    """Kill child ``pid`` if it still runs, and reap it."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == 0:  # still running (reaped now if it had ended)
            os.kill(pid, _SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        # Reaped already: a signal whose handler raised (SIGTERM to say) came just after the
        # waitpid above returned.  Its exception goes on, not an ECHILD of ours, and a pid
        # that may be another process's by now is never signalled.
        pass


def run(
    argv: list[str],
    data: bytes,
    timeout: float,
    env: Mapping[str, str],
    on_out: Callable[[bytes], None] | None = None,
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with ``data`` on its stdin; its exit status, stdout and stderr.

    ``subprocess.run`` without ``subprocess``: that module (with ``selectors``,
    ``signal`` and ``threading``) costs 4 ms of start-up to ``say`` and
    ``status``, more than a tmux call.  ``posix_spawnp`` with three pipes
    (:func:`start`), one poll loop, a deadline (:func:`finish`).
    """
    return finish(start(argv, env, data), timeout, on_out)


_SIGKILL = 9  # signal.SIGKILL, without importing signal (an enum of every signal)
