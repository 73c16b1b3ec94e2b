"""A command handed to the team's command server, and the asking side.

``up`` starts a command server for the team (:mod:`fabrikito.cli.serverctl`, :mod:`fabrikito.cli.server`):
a process that has already imported what ``say``, ``flush`` and ``status`` need.
Asked, it forks, and the child runs the command exactly as the asking process
would have: the same arguments, environment, working folder and umask, the
asker's own standard input, output and error (passed over the socket), the
sender found from the asker's process (``delivery.identity``).  The asker
waits for the child's exit status and exits with it, and passes a signal it
receives (Ctrl-C, ``SIGTERM``, ``SIGHUP``) on to the child, so the command
stops as it would have stopped itself.  This module is on every such
command's way, so it imports ``os``, ``sys`` and the C socket and signal
modules only: ``re``, ``enum``, ``pathlib`` and ``json`` are most of a cold
command (docs/benchmarks.md).

The server's socket is ``<team dir>/.state/.fabrikito.<team file name>.sock``,
found from the command line's ``--team``, else ``$FABRIKITO_TEAM``, else
``./team.toml``, without reading the file.

A request, in bytes, NUL-separated: ``PROTOCOL``, the package's folder, the
working folder, the umask (octal), the number of arguments, the arguments,
then ``NAME=value`` for every variable of the environment; the three
descriptors ride on its first bytes (``SCM_RIGHTS``); the asker then closes its
side.  The answers are lines: ``output <code> <out bytes> <err bytes>`` then those
bytes (a plain ``status``, answered by the server itself: printed here once
whole), or ``started <pid>`` (from then on the command runs, and is never
run again here), then ``exit <code>``, or ``signal <number>``
when the child was ended by one (the asker then ends by that signal too); ``declined`` before anything was started
(another install of fabrikito, a changed package, an unreadable request):
the command then runs in the asking process.
"""

from __future__ import annotations

import _socket
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    import signal as _signal  # the same functions and numbers; its stubs are the typed ones
else:
    import _signal  # signal.py itself imports enum

Request = tuple[str, str, int, list[str], dict[str, str]]  # package, cwd, umask, argv, environment

# What ``status`` reads of its environment: the time zone of its times, where tmux and its socket
# are, where the user's qualifications are, the say-notice settings.  A plain ``status`` is
# answered by the server itself with these set as the asker has them (test_command_server.py
# checks that status reads no other); anything else runs in a child with the whole environment.
ENV_READ = (
    "TZ",
    "PATH",
    "HOME",
    "TMUX_TMPDIR",
    "XDG_CONFIG_HOME",
    "FABRIKITO_SAY_RESEND_WINDOW",
    "FACTORY_SAY_RESEND_WINDOW",
    "FABRIKITO_SAY_NOTICE_COUNT",
    "FACTORY_SAY_NOTICE_COUNT",
)

PROTOCOL = b"fabrikito-run/1"
DECLINED = b"declined\n"
STATE_ROOT = ".state"  # as fabrikito.base.statedir.STATE_ROOT
MAX_SUN_PATH = 107  # sockaddr_un's sun_path, less its NUL
FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
STDIO = (0, 1, 2)


def socket_name(team_path: str) -> str:
    """The socket's file name in the team file's ``.state/``."""
    return f".fabrikito.{os.path.basename(team_path)}.sock"


def socket_dir(team_path: str) -> str:
    return os.path.join(os.path.dirname(team_path), STATE_ROOT)


def absolute(path: str, cwd: str | None = None) -> str:
    """``path`` made absolute as ``pathlib.Path.absolute`` does (no ``..`` resolved, ``.`` parts dropped),
    from ``cwd`` (default: this process's working folder)."""
    joined = path if os.path.isabs(path) else os.path.join(os.getcwd() if cwd is None else cwd, path)
    lead = "//" if joined.startswith("//") and not joined.startswith("///") else "/"
    return lead + "/".join(part for part in joined.split("/") if part not in ("", "."))


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
    if named is None:
        named = (os.environ if env is None else env).get("FABRIKITO_TEAM") or "team.toml"
    return absolute(named, cwd)


def encode_request(package: str, cwd: str, umask: int, argv: list[str], env: dict[str, str]) -> bytes:
    fields = [package, cwd, f"{umask:o}", str(len(argv)), *argv, *(f"{k}={v}" for k, v in env.items())]
    return PROTOCOL + b"".join(b"\0" + os.fsencode(field) for field in fields)


def decode_request(raw: bytes) -> Request | None:
    """``(package, cwd, umask, argv, env)``; ``None`` for anything else."""
    parts = raw.split(b"\0")
    if len(parts) < 5 or parts[0] != PROTOCOL:
        return None
    package, cwd, umask, count = (os.fsdecode(part) for part in parts[1:5])
    try:
        mask, argc = int(umask, 8), int(count)
    except ValueError:
        return None
    if not os.path.isabs(cwd) or not 0 <= mask <= 0o777 or not 0 <= argc <= len(parts) - 5:
        return None
    argv = [os.fsdecode(part) for part in parts[5 : 5 + argc]]
    env = {}
    for entry in parts[5 + argc :]:
        name, equals, value = os.fsdecode(entry).partition("=")
        if not equals or not name:
            return None
        env[name] = value
    return package, cwd, mask, argv, env


class _Signalled(Exception):
    """A signal came before the server said what it does with the command."""

    def __init__(self, signo: int) -> None:
        super().__init__(signo)
        self.signo = signo


def run(argv: list[str]) -> int | None:
    """Run ``fabrikito ARGV`` in the team's command server; its exit status, or ``None`` when it
    was not started there (no server, not this user's, declined): then it runs here."""
    team_path = team_of(argv)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    child = 0

    def on_signal(signo: int, _frame: object) -> None:
        if child > 0:
            _forward(child, signo)  # the command has its own handlers: it stops as it stops by itself
        else:
            raise _Signalled(signo)

    try:
        if not _connect(sock, socket_dir(team_path), socket_name(team_path)) or _peer_uid(sock) != os.getuid():
            return None
        mask = os.umask(0o22)
        os.umask(mask)
        package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        request = encode_request(package, os.getcwd(), mask, argv, dict(os.environ))
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in STDIO)
        for signo in FORWARDED:
            _signal.signal(signo, on_signal)
        lines = _Lines(sock)
        try:
            sent = sock.sendmsg([request[:4096]], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
            sock.sendall(request[sent:])
            sock.shutdown(_socket.SHUT_WR)
            first = lines.next()
        except _Signalled as signalled:  # a child started meanwhile gets the signal; else it ends here
            first = _first_line_soon(lines)
            if not first.startswith(b"started "):
                return _interrupted(argv, signalled.signo)
            child = int(first.split()[1])
            _forward(child, signalled.signo)
            return _outcome(lines)
        if first.startswith(b"output "):  # answered by the server itself, whole: printed here
            return _print(lines, first)
        if not first.startswith(b"started "):
            _default_signals()
            return None
        child = int(first.split()[1])
        return _outcome(lines)
    except (OSError, ValueError):  # refused (a server gone), a descriptor that cannot be passed: run here
        if child:
            raise
        _default_signals()
        return None
    finally:
        sock.close()


def _first_line_soon(lines: _Lines) -> bytes:
    """The server's first line, when it comes within a second (it says at once what it does)."""
    lines.sock.settimeout(1.0)
    try:
        return lines.next()
    except OSError:
        return b""
    finally:
        lines.sock.settimeout(None)


def _interrupted(argv: list[str], signo: int) -> int:
    """A signal before the server started anything: the command ends as it ends when the signal
    comes before it has done anything."""
    if signo == _signal.SIGINT:  # as cli.main ends a command on Ctrl-C
        _say(f"fabrikito {argv[0]}: interrupted\n")
        return 130
    _signal.signal(signo, _signal.SIG_DFL)
    os.kill(os.getpid(), signo)
    return 128 + signo


def _default_signals() -> None:
    for signo in FORWARDED:
        _signal.signal(signo, _signal.default_int_handler if signo == _signal.SIGINT else _signal.SIG_DFL)


def encode_output(code: int, out: str, err: str) -> bytes:
    """The server's own answer: the exit status, then what goes to stdout and to stderr."""
    out_b, err_b = out.encode("utf-8", "surrogateescape"), err.encode("utf-8", "surrogateescape")
    return b"output %d %d %d\n" % (code, len(out_b), len(err_b)) + out_b + err_b


def _print(lines: _Lines, head: bytes) -> int | None:
    """Write an answer of the server's own once it has all arrived (``None``: cut short, run here)."""
    code, out_len, err_len = (int(field) for field in head.split()[1:4])
    data = lines.take(out_len + err_len)
    if data is None:
        return None
    for fd, whole in ((1, data[:out_len]), (2, data[out_len:])):
        chunk = whole
        try:
            while chunk:
                chunk = chunk[os.write(fd, chunk) :]
        except OSError:  # a closed stdout (| head) ends the output quietly, as a printed status does
            pass
    return code


def _outcome(lines: _Lines) -> int:
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

    def take(self, size: int) -> bytes | None:
        """The next ``size`` bytes, or ``None`` when the answer ends before."""
        while len(self.buffer) < size:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data


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
    """The uid of the process at the other end (``SO_PEERCRED``: pid, uid, gid as C ints)."""
    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(cred[4:8], sys.byteorder)
