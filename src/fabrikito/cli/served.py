"""A command the team's command server runs: its forked child becomes the asker's command.

The child (:func:`run_child`, forked by :mod:`fabrikito.cli.server` with every
signal held) first says ``started <pid>`` and waits for the asker's ``go``
(:mod:`fabrikito.cli.wire`): an asker that gave up meanwhile closes the
connection and nothing runs.  Then it lets go of everything of the server's
(its listener, its lock, the other connections, its handlers and wake-up pipe)
and takes the asker's place: the asker's descriptors as its 0, 1 and 2, with
standard streams over them set up as the asker's Python set up its own
(encoding, errors, line buffering, written through or not: ``PYTHONUNBUFFERED``
is the asker's, never the server's), the asker's folder, umask, arguments and
whole environment (its own, a process of its own: the server's does not
change).  It runs :func:`fabrikito.cli.main` with an
:class:`~fabrikito.cli.invocation.Invocation` that names the asker's process as
the one that speaks, those streams, and the server's tmux control-mode client.

The stop signals the asker passes on stay held until the command's guard is
up (``say``, ``flush``: the log line is then owed and written), or until the
command starts (``status``), so a signal at any moment after ``started`` stops
the command as it stops one run by itself, with its line.  The exit status
goes back as ``exit <code>``; the child then ends at once (``os._exit``: the
server's own cleanups are not the command's), its streams flushed.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import sys
import time
import traceback

from fabrikito import TYPE_CHECKING
from fabrikito.cli import wire

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

    from fabrikito.base.tmuxcontrol import Control

GO_WAIT = 10.0  # how long the child waits for the asker's "go"


def run_child(
    conn: socket.socket, caller: int, request: wire.Request, *, control: Control | None, leave: Callable[[], None]
) -> None:
    """In the forked child: become the asker's command, run it, say its exit status, end.  ``caller`` is the
    asker's pid; ``leave`` closes what is the server's."""
    code = 1
    streams: tuple[TextIO, ...] = ()
    try:
        _leave_the_server(leave, request.ignored)
        fds = _go(conn)
        if fds is None:
            os._exit(0)
        for target, fd in zip(wire.STDIO, fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            if fd not in wire.STDIO:
                os.close(fd)
        os.chdir(request.cwd)
        os.umask(request.umask)
        os.environ.clear()
        os.environ.update(request.env)
        time.tzset()
        sys.dont_write_bytecode = bool(request.env.get("PYTHONDONTWRITEBYTECODE"))
        sys.argv = ["fabrikito", *request.argv]
        streams = standard_streams(request.stdio)
        sys.stdin, sys.stdout, sys.stderr = streams
        from fabrikito import cli
        from fabrikito.cli.invocation import Invocation

        invocation = Invocation(
            pid=caller, stdin=streams[0], stdout=streams[1], stderr=streams[2], served=True, control=control, held=True
        )
        code = cli.main(request.argv, invocation)
    except SystemExit as exc:  # as Python ends on one
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # as an uncaught exception ends a command run by itself: its traceback, 1
        traceback.print_exc()
        code = 1
    finally:
        for stream in streams[1:]:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            conn.sendall(b"exit %d\n" % (code & 0xFF))
        except OSError:
            pass
        os._exit(0)


def _leave_the_server(leave: Callable[[], None], ignored: tuple[int, ...]) -> None:
    """Drop what is the server's: its handlers and wake-up pipe, and (``leave``) its listener, lock,
    selector and the other connections; the stop signals handled as a Python started by the asker
    handles them (``ignored``: as the asker ignores them), and held (the forked mask held them all)."""
    signal.set_wakeup_fd(-1)
    for signo in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signo, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in ignored:  # as Python leaves one ignored when it starts (the guard of say takes it anyway)
        signal.signal(number, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, set(wire.FORWARDED) - set(ignored))  # an ignored one is dropped
    leave()


def _go(conn: socket.socket) -> list[int] | None:
    """Say ``started``; the asker's three descriptors once it said ``go`` with them within :data:`GO_WAIT`
    seconds (it says it as soon as it reads ``started``; it closes the connection instead when it gave up:
    ``None``, nothing is run).  ``notrun`` to an asker that may still be waiting when it did not, or
    ``declined`` when ``go`` came without them: it then runs the command itself."""
    said, fds = b"", []
    try:
        conn.setblocking(True)
        conn.sendall(b"started %d\n" % os.getpid())
        conn.settimeout(GO_WAIT)
        while len(said) < len(wire.GO):
            chunk, ancillary, flags, _ = conn.recvmsg(len(wire.GO) - len(said), *wire.FD_ROOM)
            fds += wire.received_fds(ancillary)
            if not chunk or flags & socket.MSG_CTRUNC:
                break
            said += chunk
        conn.settimeout(None)
        if said == wire.GO and len(fds) == len(wire.STDIO):
            return fds
        if said == wire.GO:
            conn.sendall(b"declined not three descriptors\n")
    except TimeoutError:
        try:
            conn.sendall(wire.NOT_RUN + b"\n")
        except OSError:
            pass
    except OSError:
        pass
    for fd in fds:
        os.close(fd)
    return None


def standard_streams(description: str) -> tuple[TextIO, TextIO, TextIO]:
    """Standard input, output and error over descriptors 0, 1 and 2, as :func:`fabrikito.cli.wire.stdio_of`
    described the asker's."""
    specs = [spec.split(",") for spec in description.split(";")]
    made = []
    for fd, (encoding, errors, flags) in zip(wire.STDIO, specs, strict=True):
        through = "w" in flags and fd != 0
        binary: io.RawIOBase | io.BufferedIOBase
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        if fd == 0:
            binary = io.BufferedReader(raw)
        elif through:
            binary = raw
        else:
            binary = io.BufferedWriter(raw)
        try:
            stream = io.TextIOWrapper(
                binary, encoding=encoding, errors=errors, line_buffering="l" in flags, write_through=through
            )
        except LookupError:  # an encoding or error handler this Python does not know: as its own defaults
            stream = io.TextIOWrapper(binary, encoding="utf-8", line_buffering="l" in flags, write_through=through)
        made.append(stream)
    return made[0], made[1], made[2]
