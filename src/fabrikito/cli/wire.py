"""A command handed to the team's command server: the request, the lines, and the asking side.

``up`` starts a command server for the team (:mod:`fabrikito.cli.server`): a
process that has already imported what ``say``, ``flush`` and ``status``
need.  Asked, it forks, and the child runs the command exactly as the asking
process would have: the same arguments, environment, working folder and umask,
the asker's own standard input, output and error (passed over the socket, with
how the asker's Python set them up), the sender found from the asker's process
(``delivery.identity``).  The asker waits for the child's exit status and
exits with it, and passes a signal it receives (Ctrl-C, ``SIGTERM``,
``SIGHUP``) on to the child, so the command stops as it would have stopped
itself.  This module is on every such command's way, so it imports ``os``,
``sys``, ``time`` and the C socket and signal modules only: ``re``, ``enum``,
``pathlib`` and ``json`` are most of a cold command (docs/benchmarks.md).

The server's socket is ``<team dir>/.state/.fabrikito.<team file name>.sock``,
found from the command line's ``--team``, else ``$FABRIKITO_TEAM``, else
``./team.toml``, without reading the file.

A request: ``fabrikito-run/2 <length>\\n``, then ``length`` bytes of
NUL-separated fields: the package's folder, the working folder, the umask
(octal), the standard streams (:func:`stdio_of`), the number of arguments, the
arguments, then ``NAME=value`` for every variable of the environment.  At most
:data:`MAX_REQUEST` bytes: a larger one is never sent (the command runs here),
and a server declines one whole.

The server answers a line: ``declined <why>`` (the command then runs in the
asking process), or ``started <pid>`` from the child that will run it.  Only
then does the asker commit: it writes ``go``, with its three descriptors
(``SCM_RIGHTS``), and from then on the command is never run again here; the
child runs it only once it has read ``go`` and them, and an asker that gave
up first (its deadline passed, a signal came) just closes the connection, so
the child ends without running anything, and nothing of the asker's (a pipe a
shell waits on) was ever held by a server that did not answer.  The child's last
line is ``exit <code>``; the server's is ``signal <number>`` when the child was
ended by one (the asker then ends by that signal too); ``notrun`` from a child
that stopped waiting for ``go`` (the command then runs here after all).

The asker waits :data:`ASK_WAIT` seconds at most for ``started``: a server that
is stuck, stopped or flooded costs at most that, then the command runs here.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from fabrikito import TYPE_CHECKING
from fabrikito.base import hostos, teampath
from fabrikito.base.values import frozen

if TYPE_CHECKING:
    import signal as _signal  # the same functions and numbers; its stubs are the typed ones
else:
    import _signal  # signal.py itself imports enum

PROTOCOL = b"fabrikito-run/2"
MAX_REQUEST = 4 << 20  # argv and environment: the kernel's ARG_MAX (2 MiB here) is the most a real one has
MAX_HEAD = 64
ASK_WAIT = 1.0  # seconds from connecting to the server's "started"
SERVED = ("say", "flush", "status")  # the commands the server runs; anything else is declined
GUARDED = ("say", "flush")  # those that owe a log line: a stop signal is held until their guard is up
STATE_ROOT = ".state"  # as fabrikito.base.statedir.STATE_ROOT
MAX_SUN_PATH = hostos.MAX_SOCKET_PATH  # sockaddr_un's sun_path, less its NUL
FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
STDIO = (0, 1, 2)
GO = b"go\n"
NOT_RUN = b"notrun"


@frozen
class Request:
    """A request as the server reads it."""

    package: str
    cwd: str
    umask: int
    stdio: str
    argv: list[str]
    env: dict[str, str]
    ignored: tuple[int, ...] = ()  # the stop signals the asker ignores (a background job's SIGINT): the child too


def socket_name(team_path: str) -> str:
    """The socket's file name in the team file's ``.state/``."""
    return f".fabrikito.{os.path.basename(team_path)}.sock"


def socket_dir(team_path: str) -> str:
    return os.path.join(os.path.dirname(team_path), STATE_ROOT)


def team_of(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    """The team file a command line names (the last ``--team FILE`` or ``--team=FILE`` before any
    ``--``, as argparse reads it), else ``$FABRIKITO_TEAM``, else ``./team.toml`` (as
    ``teamfile.resolve_team_path``), absolute from ``cwd``; ``env`` and ``cwd`` default to this process's."""
    named = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--team" and i + 1 < len(argv):
            named = argv[i + 1]
        elif arg.startswith("--team="):
            named = arg[len("--team=") :]
    return teampath.resolve(named, env, cwd)


def stdio_of(streams: tuple[object, object, object]) -> str:
    """How this Python set up its standard streams (``encoding,errors,flags`` each, ``;`` between; flags:
    ``l`` line-buffered, ``w`` written through): the served command's are set up alike."""
    parts = []
    for stream in streams:
        flags = ("l" if getattr(stream, "line_buffering", False) else "") + (
            "w" if getattr(stream, "write_through", False) else ""
        )
        parts.append(f"{getattr(stream, 'encoding', 'utf-8')},{getattr(stream, 'errors', 'strict')},{flags}")
    return ";".join(parts)


def encode_request(
    package: str,
    cwd: str,
    umask: int,
    argv: list[str],
    env: dict[str, str],
    stdio: str = "utf-8,strict,",
    ignored: tuple[int, ...] = (),
) -> bytes:
    fields = [package, cwd, f"{umask:o}", stdio, ",".join(str(s) for s in ignored), str(len(argv))]
    fields += [*argv, *(f"{k}={v}" for k, v in env.items())]
    body = b"\0".join(os.fsencode(field) for field in fields)
    return PROTOCOL + b" %d\n" % len(body) + body


def request_length(head: bytes) -> int | None:
    """The body's length a request's first line gives (``None``: not a request of this protocol)."""
    name, _, size = head.partition(b" ")
    if name != PROTOCOL or not size.isdigit() or len(size) > 12:
        return None
    return int(size)


def decode_request(body: bytes) -> Request | None:
    """A request's body read back; ``None`` for anything else."""
    parts = body.split(b"\0")
    if len(parts) < 6:
        return None
    package, cwd, umask, stdio, ignored, count = (os.fsdecode(part) for part in parts[:6])
    try:
        mask, argc = int(umask, 8), int(count)
        signals = tuple(int(s) for s in ignored.split(",")) if ignored else ()
    except ValueError:
        return None
    if not os.path.isabs(cwd) or not 0 <= mask <= 0o777 or not 0 <= argc <= len(parts) - 6:
        return None
    if stdio.count(";") != 2 or any(s.count(",") != 2 for s in stdio.split(";")):
        return None
    if not set(signals) <= set(FORWARDED):
        return None
    argv = [os.fsdecode(part) for part in parts[6 : 6 + argc]]
    env = {}
    for entry in parts[6 + argc :]:
        name, equals, value = os.fsdecode(entry).partition("=")
        if not equals or not name:
            return None
        env[name] = value
    return Request(package, cwd, mask, stdio, argv, env, signals)


#: ``recvmsg``'s room for descriptors (one more than "go" brings, to see one that brings too many) and its
#: flags: what is received is never inherited by a program started later (a tmux call).
FD_ROOM = (_socket.CMSG_SPACE(4 * 4), getattr(_socket, "MSG_CMSG_CLOEXEC", 0))


def received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors ``SCM_RIGHTS`` brought (none inheritable)."""
    found = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            for at in range(0, len(payload) - len(payload) % 4, 4):
                fd = int.from_bytes(payload[at : at + 4], sys.byteorder)
                os.set_inheritable(fd, False)
                found.append(fd)
    return found


Handlers = dict[int, object]  # each stop signal's handler before the asker set its own


class _Signalled(Exception):
    """A signal came before the asker committed the command to the server."""

    def __init__(self, signo: int) -> None:
        super().__init__(signo)
        self.signo = signo


def ask(argv: list[str]) -> int | None:
    """Run ``fabrikito ARGV`` in the team's command server; its exit status, or ``None`` when it was not
    started there (no server, not this user's, declined, too slow, a signal first): then it runs here,
    with the stop signal that came first held until its guard is up (:func:`holding`)."""
    if any(not _open(fd) for fd in STDIO):
        return None  # a closed standard stream cannot be passed: the command runs as it is, here
    team_path = team_of(argv)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    child = 0

    def on_signal(signo: int, _frame: object) -> None:
        if child > 0:
            _forward(child, signo)  # the command has its own handlers: it stops as it stops by itself
        elif signo not in ignored:  # one this process ignored (a background job's SIGINT) it still ignores
            raise _Signalled(signo)

    deadline = time.monotonic() + ASK_WAIT
    before: Handlers = {signo: _signal.getsignal(signo) for signo in FORWARDED}
    ignored = tuple(signo for signo, handler in before.items() if handler == _signal.SIG_IGN)
    try:
        for signo in FORWARDED:
            _signal.signal(signo, on_signal)
        lines = _Lines(sock)
        try:
            _within(sock, deadline)
            if not _connect(sock, socket_dir(team_path), socket_name(team_path)) or _peer_uid(sock) != os.getuid():
                return _here(before)
            request = _request(argv, ignored)
            if len(request) > MAX_HEAD + MAX_REQUEST:
                return _here(before)  # never cut: it runs here, with all of it
            _within(sock, deadline)
            sock.sendall(request)
            _within(sock, deadline)
            first = lines.next()
            word, _, pid = first.partition(b" ")
            if word != b"started" or not pid.isdigit():
                return _here(before)
            child = int(pid)
            fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in STDIO)
            sock.settimeout(None)
            # Committed once this is sent: from here on it runs there, never here.  The descriptors go only
            # now, so a server that never got this far (stopped, flooded) holds none of them.
            sock.sendmsg([GO], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        except _Signalled as signalled:  # nothing was committed: the child, if any, reads no "go" and ends
            sock.close()
            return _stopped_here(argv, signalled.signo, before)
        except (OSError, ValueError):  # refused, gone, too slow, a descriptor that cannot be passed: run here
            return _here(before)
        return _outcome(lines, before)
    finally:
        sock.close()


def _request(argv: list[str], ignored: tuple[int, ...]) -> bytes:
    """This process's request to run ``argv``: as it is, its folder, umask, streams, the stop signals it
    ignores and its whole environment."""
    mask = os.umask(0o22)
    os.umask(mask)
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    stdio = stdio_of((sys.stdin, sys.stdout, sys.stderr))
    return encode_request(package, os.getcwd(), mask, argv, dict(os.environ), stdio, ignored)


def _here(before: Handlers) -> int | None:
    """The command runs here after all: the signals are handled as before it asked."""
    _restore(before)
    return None


def _restore(before: Handlers) -> None:
    for signo, handler in before.items():
        _signal.signal(signo, handler)  # type: ignore[arg-type]


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _within(sock: _socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the command server did not answer in time")
    sock.settimeout(left)


def _stopped_here(argv: list[str], signo: int, before: Handlers) -> int | None:
    """A stop signal before the server took the command: the command runs here, and the signal stops it
    as it stops a command run here.  ``say`` and ``flush`` hold it until their guard is up (the log line
    is then owed and written); any other command ends by it now."""
    _restore(before)
    if argv[0] in GUARDED:
        _signal.pthread_sigmask(_signal.SIG_BLOCK, FORWARDED)
        os.kill(os.getpid(), signo)  # pending until the guard unblocks it
        return None
    if signo == _signal.SIGINT and before[signo] == _signal.default_int_handler:  # as cli.main ends on Ctrl-C
        _say(f"fabrikito {argv[0]}: interrupted\n")
        return 130
    _signal.signal(signo, _signal.SIG_DFL)
    os.kill(os.getpid(), signo)
    return 128 + signo


def holding() -> bool:
    """Whether this process holds the stop signals (blocked: a command that is to write its log line once
    its guard is up, :func:`release`)."""
    return any(signo in _signal.pthread_sigmask(_signal.SIG_BLOCK, ()) for signo in FORWARDED)


def release() -> None:
    """Let the held stop signals through (one that came meanwhile is delivered now)."""
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, FORWARDED)


def _outcome(lines: _Lines, before: Handlers) -> int | None:
    try:
        last = lines.next()
    except OSError:
        last = b""
    word, _, number = last.partition(b" ")
    if word == b"exit" and number.isdigit():
        return int(number)
    if word == b"signal" and number.isdigit():  # end as the command ended: by the same signal
        _signal.signal(int(number), _signal.SIG_DFL)
        os.kill(os.getpid(), int(number))
        return 128 + int(number)
    if last == NOT_RUN:  # the child stopped waiting for "go" before it came: nothing ran there
        return _here(before)
    _say("fabrikito: the command server went away while the command ran: its exit status is not known\n")
    return 1


def _forward(child: int, signo: int) -> None:
    try:
        os.kill(child, signo)
    except OSError:
        pass


def _say(text: str) -> None:
    try:
        os.write(2, text.encode())
    except OSError:
        pass


class _Lines:
    """The server's answer, a line at a time."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def next(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(256)
            if not chunk:
                line, self.buffer = self.buffer, b""
                return line
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def _connect(sock: _socket.socket, where: str, name: str) -> bool:
    full = os.path.join(where, name)
    if len(os.fsencode(full)) <= MAX_SUN_PATH:
        sock.connect(full)
        return True
    try:  # a deep team folder: a path too long for a socket address is reached from inside it
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        os.chdir(where)
        try:
            sock.connect(name)
        finally:
            os.fchdir(here)
    finally:
        os.close(here)
    return True


def _peer_uid(sock: _socket.socket) -> int:
    """The uid of the process at the other end (:func:`fabrikito.base.hostos.peer_cred`)."""
    return hostos.peer_cred(sock).uid
