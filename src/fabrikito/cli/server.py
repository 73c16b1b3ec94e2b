"""The team's command server: ``say``, ``flush`` and ``status`` run by a process that has them imported.

(Started and ended from :mod:`fabrikito.cli.serverctl`; it runs :func:`fabrikito.cli.main`.)

A cold ``say`` or ``status`` spends a third to three quarters of its time
starting Python and importing ``re``, ``enum``, ``pathlib``, ``json`` and the
recognisers, not doing its work (docs/benchmarks.md).  ``up`` starts this
server for a team whose seats are all on this machine; those commands hand
themselves to it (:mod:`fabrikito.cli.wire`), and for each it forks: the
child takes the asker's standard input, output and error (passed over the
socket), arguments, environment, working folder and umask, speaks for the
asker's process (``delivery.identity.caller_pid``: who is speaking is found
from the asker's ancestors), and runs ``fabrikito.cli.main`` as the asker
would have.  Nothing is shared between two commands but what was imported.

It runs commands for its own user only (``SO_PEERCRED``) and from the same
copy of fabrikito only; it declines (the command then runs in the asking
process) a request it cannot read, or any request once the package's files
changed since it started (an upgrade or an edit: it then exits).

``python -m fabrikito.cli.server TEAM_FILE`` runs it.  It holds
``.state/.fabrikito.<file name>.lock`` while it runs (that file names its pid and
start time once it listens), listens on ``.state/.fabrikito.<file name>.sock``
(0600, in the 0700 ``.state/``), and ends on SIGTERM (``down``), SIGINT or
SIGHUP, or by itself once the team's tmux server has ended, the team file or
its socket is gone, or its package changed (looked at every
:data:`CHECK_EVERY` seconds).  Commands it started finish on their own.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import stat
import struct
import sys
import time
import traceback
from pathlib import Path

from fabrikito.base import daemons, procs, tmuxcontrol
from fabrikito.base.errors import FabrikitoError, TmuxError
from fabrikito.cli import wire
from fabrikito.cli.serverctl import MODULE, connect_control, lock_path, socket_path

CHECK_EVERY = 10.0
REAP_EVERY = 0.5  # how soon a child ended by a signal is told to its asker
REQUEST_TIMEOUT = 5.0
MAX_REQUEST = 16 << 20
PACKAGE = Path(__file__).resolve().parent.parent  # the fabrikito package's folder


class _Stop(BaseException):
    """A signal asked the server to end (not an ``Exception``: what catches those, answering a status or
    connecting the tmux client, lets it through)."""


def _on_signal(signo: int, frame: object) -> None:
    del signo, frame
    raise _Stop


HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def package_stamp() -> tuple[tuple[str, int, int], ...]:
    """Every module file of the package with its modification time and size."""
    found = []
    for folder, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                found.append((os.path.join(folder, name), st.st_mtime_ns, st.st_size))
    return tuple(sorted(found))


class Server:
    """One team file's server: its listening socket, its children and what it checks."""

    def __init__(
        self, team_path: Path, listener: socket.socket, inode: int, tmux_socket: str | None, lock_fd: int = -1
    ) -> None:
        self.team_path = team_path
        self.lock_fd = lock_fd
        self.listener = listener
        self.inode = inode
        self.tmux_socket = tmux_socket
        self.stamp = package_stamp()
        self.stale = False
        self.children: dict[int, socket.socket] = {}  # each command running, with its asker's connection
        self.control: tmuxcontrol.Control | None = None  # the tmux control-mode client its commands share

    def still_wanted(self) -> bool:
        """Whether to keep running: its socket is its own, the team file is there, the tmux server runs."""
        try:
            if os.lstat(socket_path(self.team_path)).st_ino != self.inode:
                return False
        except OSError:
            return False
        if not self.team_path.exists() or package_stamp() != self.stamp:
            return False
        if self.control is not None and self.control.broken is None:
            return self._sessions_besides_its_own()
        return self.tmux_socket is None or _listening(self.tmux_socket)

    def check(self) -> bool:
        """Every :data:`CHECK_EVERY` seconds: whether to keep running; and, without a tmux control client
        (none was attached when it started, or it went away), connect one if tmux lists no attached
        client now (:func:`~fabrikito.cli.serverctl.connect_control`)."""
        if not self.still_wanted():
            return False
        if self.control is None or self.control.broken is not None:
            if self.control is not None:
                self.control.close()  # its pipes (its client has ended)
            self.connect()
        return True

    def connect(self) -> None:
        """Connect the tmux control client its commands share, with the stop signals held until it is
        connected and shared: a client its owner leaves half connected can keep tmux 3.3a from ever
        exiting (measured: 2 of 5), while one it closes cannot (0 of 10); a stop then closes it."""
        held = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        try:
            self.control = _connect(self.team_path)
            tmuxcontrol.share(self.control)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _sessions_besides_its_own(self) -> bool:
        """Whether the team's tmux server has a session but the control client's (which keeps the tmux
        server running: when the seats are gone the server ends, and its client's session with it)."""
        from fabrikito.base.tmux import Server as Tmux

        if self.tmux_socket is None:
            return True
        try:
            names = Tmux(socket_path=self.tmux_socket).run("list-sessions", "-F", "#{session_name}").split()
        except TmuxError:
            return False
        return any(name != tmuxcontrol.CONTROL_SESSION for name in names)

    def serve(self, conn: socket.socket) -> None:
        """Read one request and start its command, or decline it; ``conn`` is kept while it runs."""
        conn.settimeout(REQUEST_TIMEOUT)
        caller, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid != os.getuid() or caller <= 0:
            conn.close()
            return
        raw, fds, flags, _ = socket.recv_fds(conn, 1 << 16, len(wire.STDIO))
        try:
            while raw and len(raw) <= MAX_REQUEST:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                raw += chunk
            request = wire.decode_request(raw)
            whole = len(fds) == len(wire.STDIO) and not flags & socket.MSG_CTRUNC
            if package_stamp() != self.stamp:
                self.stale = True
                request = None
            if request is None or not whole or request[0] != str(PACKAGE) or not os.path.isdir(request[1]):
                conn.sendall(wire.DECLINED)
                conn.close()
                return
            answer = answer_status(request)
            if answer is not None:
                conn.sendall(answer)
                conn.close()
                return
            child = os.fork()
            if child == 0:
                _run_child(self, conn, fds, request, caller)  # never returns
            self.children[child] = conn  # the child says "started" itself, before its exit line
        finally:
            for fd in fds:
                os.close(fd)

    def reap(self) -> None:
        """Collect the commands that ended (and any tmux call a status left unread); tell the asker of
        a command ended by a signal."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.control is not None and pid == self.control.proc.pid:
                self.control.broken = "it ended"  # commands run tmux themselves until check connects again
                tmuxcontrol.share(None)
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            if os.WIFSIGNALED(status):
                try:
                    conn.sendall(b"signal %d\n" % os.WTERMSIG(status))
                except OSError:
                    pass
            conn.close()


def plain_status(argv: list[str]) -> str | None:
    """The flags of a plain ``status`` line (``--team FILE``; ``--json``: ``j``; ``--no-screens``:
    ``n``); ``None`` for anything else (``--help``, an error: argparse reads it)."""
    if argv[:1] != ["status"]:
        return None
    flags, rest = set(), argv[1:]
    while rest:
        option = rest.pop(0)
        if option in ("--json", "--no-screens"):
            flags.add(option[2])
        elif option == "--team" and rest and not rest[0].startswith("-"):
            rest.pop(0)
        else:
            return None
    return "".join(sorted(flags))


def answer_status(request: wire.Request) -> bytes | None:
    """A plain ``status``, run here in the server (no fork: everything is imported, and a screen
    recognised before is not recognised again: ``status._reading``) with the variables it reads
    set as the asker has them; the answer the asker prints.  ``None``: not a plain status, a team
    with seats on other hosts, or ``FABRIKITO_DEBUG`` (a traceback is the command's own): a child
    runs it."""
    _package, cwd, _umask, argv, env = request
    flags = plain_status(argv)
    if flags is None or env.get("FABRIKITO_DEBUG") == "1":
        return None
    from fabrikito.cli import serverctl
    from fabrikito.launch import status
    from fabrikito.team import teamfile

    team_path = wire.team_of(argv, env, cwd)
    mine = {name: os.environ.get(name) for name in wire.ENV_READ}
    _adopt({name: env.get(name) for name in wire.ENV_READ})
    try:
        team = teamfile.load(team_path)
        if not serverctl.served(team):
            return None
        listing = team.server().start_list_panes()
        text = status.report(team, as_json="j" in flags, screens="n" not in flags, listing=listing)
    except FabrikitoError as exc:
        return wire.encode_output(exc.exit_code, "", f"fabrikito status: {exc.message}\n")
    except Exception:  # the child runs it and shows the error as status shows it
        traceback.print_exc()
        return None
    finally:
        _adopt(mine)
    return wire.encode_output(0, text + "\n", "")


def _adopt(env: dict[str, str | None]) -> None:
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    time.tzset()


def _run_child(server: Server, conn: socket.socket, fds: list[int], request: wire.Request, caller: int) -> None:
    """In the forked child: become the asker's command, run it, say its exit status, end."""
    _package, cwd, umask, argv, env = request
    code = 1
    try:
        # First, and from the child: the asker must never read the exit line before this one
        # (a command run and its status taken for "not started" would be run again by the asker).
        conn.sendall(b"started %d\n" % os.getpid())
        for signo in HANDLED:
            signal.signal(signo, signal.default_int_handler if signo == signal.SIGINT else signal.SIG_DFL)
        server.listener.close()
        if server.lock_fd >= 0:
            os.close(server.lock_fd)  # the lock is the server's: a command outliving it does not hold it
        for other in server.children.values():
            other.close()
        for target, fd in zip(wire.STDIO, fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            if fd not in wire.STDIO:
                os.close(fd)
        os.chdir(cwd)
        os.umask(umask)
        os.environ.clear()
        os.environ.update(env)
        time.tzset()
        sys.argv = ["fabrikito", *argv]
        _fresh_stdio()
        from fabrikito import cli
        from fabrikito.delivery import identity

        identity.caller_pid = caller
        cli.served = True
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # as an uncaught exception ends a command run by itself: its traceback, 1
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            conn.sendall(b"exit %d\n" % code)
        except OSError:
            pass
        os._exit(0)


def _fresh_stdio() -> None:
    """Standard streams over the asker's descriptors, buffered as Python buffers them for them
    (line by line on a terminal); UTF-8, as every UTF-8 locale and Python's C-locale coercion give."""
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding="utf-8")  # noqa: SIM115
    sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding="utf-8", line_buffering=os.isatty(1))  # noqa: SIM115
    sys.stderr = io.TextIOWrapper(
        open(2, "wb", buffering=0, closefd=False),  # noqa: SIM115
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )


def _listening(path: str) -> bool:
    """Whether a server listens on the unix socket ``path`` (tmux leaves its socket behind when killed)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        return False
    except OSError:
        return True  # cannot tell (a path too long, a slow server): keep serving
    finally:
        probe.close()
    return True


def _listen(team_path: Path) -> tuple[socket.socket, int]:
    """Bind the socket (a stale one of a server that died is replaced; anything else is refused)."""
    where = socket_path(team_path)
    os.chdir(where.parent)  # the socket is bound by its short name: a deep team folder makes a long path
    try:
        st = os.lstat(where.name)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise FabrikitoError(f"{where} is there and is not a socket: remove it")
        os.unlink(where.name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(where.name)
    finally:
        os.umask(old)
    listener.listen(64)
    return listener, os.lstat(where.name).st_ino


def _tmux_socket(team_path: Path) -> str | None:
    from fabrikito.team import teamfile

    try:
        return teamfile.load(team_path).server().resolved_socket_path()
    except (OSError, FabrikitoError):
        return None


def _preload() -> None:
    """Import what the commands it runs import, once, before any is asked for."""
    import fabrikito.base.text
    import fabrikito.cli.commands
    import fabrikito.cli.fastargs
    import fabrikito.delivery.flush
    import fabrikito.delivery.identity
    import fabrikito.delivery.queue
    import fabrikito.delivery.say
    import fabrikito.launch.status
    import fabrikito.screen.releases  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {MODULE} TEAM_FILE", file=sys.stderr)
        return 2
    team_path = Path(args[0]).absolute()
    inode: int | None = None
    for signo in HANDLED:
        signal.signal(signo, _on_signal)
    try:
        fd = daemons.hold_lock(lock_path(team_path))
        if fd is None:
            return 0  # another server serves this team file
        os.ftruncate(fd, 0)
        _preload()
        listener, inode = _listen(team_path)
        server = Server(team_path, listener, inode, _tmux_socket(team_path), fd)
        os.pwrite(fd, f"{os.getpid()} {procs.info(os.getpid()).start_ticks}\n".encode(), 0)  # listening: ready
        server.connect()  # after: up does not wait for it (commands asked meanwhile wait)
        _loop(server)
    except _Stop:
        pass
    except FabrikitoError as exc:
        print(f"fabrikito command server: {exc.message}", file=sys.stderr)
        return 1
    finally:
        _remove_socket(team_path, inode)
        control = tmuxcontrol.shared()
        if control is not None:
            control.close()  # kills its session, then its client ends
    return 0


def _connect(team_path: Path) -> tmuxcontrol.Control | None:
    """The tmux control client its commands share, or ``None`` (they then run tmux themselves): whatever
    goes wrong connecting it, the server serves without it, the reason in its error file."""
    from fabrikito.team import teamfile

    try:
        return connect_control(teamfile.load(team_path))
    except Exception:  # a server without the client is slower, not broken
        traceback.print_exc()
        return None


def _loop(server: Server) -> None:
    server.listener.settimeout(REAP_EVERY)
    checked = time.monotonic()
    while not server.stale:
        try:
            conn, _ = server.listener.accept()
        except TimeoutError:
            conn = None
        if conn is not None:
            try:
                server.serve(conn)
            except OSError:
                conn.close()  # the asker went away or took too long: it runs the command itself
        server.reap()
        if server.control is not None:
            server.control.drain()  # tmux's notifications, read while no command holds the client
        if time.monotonic() - checked >= CHECK_EVERY:
            checked = time.monotonic()
            if not server.check():
                return


def _remove_socket(team_path: Path, inode: int | None) -> None:
    where = socket_path(team_path)
    try:
        if inode is not None and os.lstat(where).st_ino == inode:
            os.unlink(where)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
