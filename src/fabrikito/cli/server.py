"""The team's command server: ``say``, ``flush`` and ``status`` run by a process that has them imported.

(Started and ended from :mod:`fabrikito.cli.serverctl`; each command runs in a
forked child, :mod:`fabrikito.cli.served`.)

A cold ``say`` or ``status`` spends a third to three quarters of its time
starting Python and importing ``re``, ``enum``, ``pathlib``, ``json`` and the
recognisers, not doing its work (docs/benchmarks.md).  ``up`` starts this
server for a team whose seats are all on this machine; those commands hand
themselves to it (:mod:`fabrikito.cli.wire`), and for each it forks a child that
becomes the asker's command: its standard streams, arguments, environment,
folder and umask, the asker's process as the one that speaks.  Nothing is shared
between two commands but what was imported and the tmux control-mode client
(:mod:`fabrikito.base.tmuxcontrol`), which each child is handed in its own
:class:`~fabrikito.cli.invocation.Invocation`.  The server itself never takes
on an asker's environment, folder or streams, and runs no command itself.

No asker can hold up another.  Connections are read side by side (one
selector, nothing blocks): each must bring its whole request within
:data:`REQUEST_WAIT` seconds of connecting, at most :data:`MAX_ASKING` are read at
once (a new one past that drops the oldest), at most :data:`MAX_RUNNING` commands
run at once (past that it declines), and a request over
:data:`~fabrikito.cli.wire.MAX_REQUEST` is declined whole, unread.  It runs
commands for its own user only (the peer's credentials, :func:`fabrikito.base.hostos.peer_cred`), from the same copy of
fabrikito only, and only ``say``, ``flush`` and ``status``; it declines
anything else (the command then runs in the asking process), and any request
once the package's files changed since it started (an upgrade or an edit: it
then exits).

``python -m fabrikito.cli.server TEAM_FILE`` runs it.  It holds
``.state/.fabrikito.<file name>.lock`` while it runs (that file names its pid and
start time once it listens), listens on ``.state/.fabrikito.<file name>.sock``
(0600, in the 0700 ``.state/``), and ends on SIGTERM (``down``), SIGINT or
SIGHUP, or by itself once the team's tmux server has ended, the team file or
its socket is gone, or its package changed (looked at every
:data:`CHECK_EVERY` seconds).  Commands it started finish on their own.
"""

from __future__ import annotations

import gc
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import daemons, hostos, procs, tmuxcontrol
from fabrikito.base.errors import FabrikitoError, TmuxError
from fabrikito.cli import serversocket, wire
from fabrikito.cli.packagestamp import PACKAGE, PackageStamp
from fabrikito.cli.serverctl import MODULE, connect_control, lock_path, socket_path

if TYPE_CHECKING:
    from fabrikito.team.teamfile import Team

CHECK_EVERY = 10.0
TICK = 0.5  # the longest it sleeps: a child ended is reaped at once (SIGCHLD), the checks come this often
REQUEST_WAIT = 2.0  # seconds from connecting to the whole request
MAX_ASKING = 32  # connections whose request is being read
MAX_RUNNING = 64  # commands running


class _Stop(BaseException):
    """A signal asked the server to end (not an ``Exception``: what catches those, connecting the tmux
    client, lets it through)."""


def _on_signal(signo: int, frame: object) -> None:
    del signo, frame
    raise _Stop


HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Asking:
    """A connection whose request is being read: the asker's pid, what came so far, its deadline."""

    __slots__ = ("conn", "data", "deadline", "fds", "length", "pid")

    def __init__(self, conn: socket.socket, pid: int, deadline: float) -> None:
        self.conn = conn
        self.pid = pid
        self.deadline = deadline
        self.data = b""
        self.length: int | None = None  # the body's, once the first line is read
        self.fds: list[int] = []  # any that came with it (a request brings none: it is declined)

    def drop(self) -> None:
        """Close the connection and every descriptor it brought."""
        for fd in self.fds:
            _close(fd)
        self.fds = []
        self.conn.close()


class CommandServer:
    """One team file's server: its listening socket, the requests being read, the commands running."""

    def __init__(
        self,
        team_path: Path,
        listener: socket.socket,
        inode: int,
        tmux_socket: str | None,
        lock_fd: int = -1,
        *,
        team: Team | None = None,
    ) -> None:
        self.team_path = team_path
        self.team = team  # the team file as it read when the server started (None: not read yet, or it did not load)
        self.lock_fd = lock_fd
        self.listener = listener
        self.inode = inode
        self.tmux_socket = tmux_socket
        self.stamp = PackageStamp()
        self.stale = False
        self.asking: dict[socket.socket, Asking] = {}  # in the order they connected
        self.children: dict[int, socket.socket] = {}  # each command running, with its asker's connection
        self.control: tmuxcontrol.Control | None = None  # the tmux control-mode client its commands share
        self.selector = selectors.DefaultSelector()
        self.wake = -1  # the read end of the signals' wake-up pipe, when it has one (main)
        listener.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ)

    def still_wanted(self) -> bool:
        """Whether to keep running: its socket is its own, the team file is there, the tmux server runs."""
        try:
            if os.lstat(socket_path(self.team_path)).st_ino != self.inode:
                return False
        except OSError:
            return False
        if not self.team_path.exists() or self.stamp.changed():
            return False
        if self.control is not None and self.control.broken is None:
            return self._sessions_besides_its_own()
        return self.tmux_socket is None or serversocket.listening(self.tmux_socket)

    def check(self) -> bool:
        """Every :data:`CHECK_EVERY` seconds: whether to keep running; and, without a tmux control client
        (none was attached when it started, or it went away), connect one if tmux lists no attached
        client now (:func:`~fabrikito.cli.serverctl.connect_control`); and read the team again
        (:meth:`refresh`)."""
        if not self.still_wanted():
            return False
        self.upkeep()
        if self.control is None or self.control.broken is not None:
            if self.control is not None:
                self.control.close()  # its pipes (its client has ended)
            self.connect()
        self.refresh()
        return True

    def loaded(self) -> Team | None:
        """The team file as it read when the server started (read now when it was not; ``None``: it does
        not load).  Read once for what the server starts with: its tmux socket, its control client, its
        first reading (:meth:`warm`)."""
        if self.team is None:
            self.team = _load(self.team_path)
        return self.team

    def upkeep(self) -> None:
        """Rotate the team's logs when due (:mod:`fabrikito.log.upkeep`), as the team file says now (an
        edited ``log_max_size`` counts from the next check; read again unchanged, it costs a ``stat``:
        :func:`fabrikito.team.teamfile.load`); a team file that no longer loads is the next check's
        business."""
        from fabrikito.base.errors import FabrikitoError
        from fabrikito.log import upkeep
        from fabrikito.team import teamfile

        try:
            notes = upkeep.upkeep(teamfile.load(self.team_path))
        except FabrikitoError:
            return
        for note in notes:
            if ":" in note:
                print(f"fabrikito command server: {note}", file=sys.stderr, flush=True)

    def connect(self) -> None:
        """Connect the tmux control client its commands share, with the stop signals held until it is
        connected: a client its owner leaves half connected can keep tmux 3.3a from ever exiting
        (measured: 2 of 5), while one it closes cannot (0 of 10); a stop then closes it."""
        held = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        try:
            self.control = _connect(self.loaded())
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def warm(self) -> None:
        """Read the team once as ``status`` does (read-only, its output dropped), so what a first reading
        fills (the recognisers made, the team file parsed, the screens recognised) is there in every
        child: a forked ``status`` of one seat took 6.0 ms cold, 3.9 ms warm (docs/decisions/0034).
        A failure here only leaves the children cold."""
        self.read_team(self.loaded())
        gc.collect()
        gc.freeze()

    def refresh(self) -> None:
        """At each check, read the team again as the file says now, so the children forked until the next
        check start with the readings of the screens as they are (a screen that changed since the last
        reading is recognised again in every child: about 0.2 ms a seat; docs/decisions/0042)."""
        from fabrikito.base.errors import FabrikitoError
        from fabrikito.team import teamfile

        try:
            team = teamfile.load(self.team_path)
        except FabrikitoError:
            return
        self.read_team(team)

    def read_team(self, team: Team | None) -> None:
        from fabrikito.base.tmuxcontrol import Controlled
        from fabrikito.launch import status

        if team is None or team.across_hosts:
            return
        try:
            tmux = team.server()
            control = self.control
            if control is not None and control.broken is None and control.flags == tmux.server_flags:
                tmux = Controlled.over(tmux, control)
            status.collect(team, server=tmux)
        except Exception:  # a cold child is slower, not wrong
            traceback.print_exc()

    def _sessions_besides_its_own(self) -> bool:
        """Whether the team's tmux server has a session but the control client's (which keeps the tmux
        server running: when the seats are gone the server ends, and its client's session with it)."""
        from fabrikito.base.tmux import Server as Tmux
        from fabrikito.base.tmux import records

        if self.tmux_socket is None:
            return True
        try:
            names = records(Tmux(socket_path=self.tmux_socket).run("list-sessions", "-F", "#{session_name}"))
        except TmuxError:
            return False
        return any(name != tmuxcontrol.CONTROL_SESSION for name in names)

    # -- the connections -------------------------------------------------------------

    def serve_once(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for something to do, and do it: take new connections, read
        what came, drop what is late, reap what ended."""
        soonest = min((a.deadline for a in self.asking.values()), default=time.monotonic() + timeout)
        wait = max(0.0, min(timeout, soonest - time.monotonic()))
        for key, _ in self.selector.select(wait):
            if key.fileobj is self.listener:
                self.accept()
            elif key.fileobj == self.wake:
                _drain(self.wake)
            elif key.data is not None:
                self.read(key.data)
        now = time.monotonic()
        for late in [a for a in self.asking.values() if a.deadline <= now]:
            self._forget(late)
            late.drop()  # the asker runs the command itself
        self.reap()

    def accept(self) -> None:
        """Take every connection waiting; past :data:`MAX_ASKING` being read, the oldest is dropped."""
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: those waiting are taken once some are closed
                return
            try:
                cred = hostos.peer_cred(conn)
            except OSError:
                conn.close()
                continue
            pid = cred.pid
            if cred.uid != os.getuid() or pid is None:
                conn.close()
                continue
            conn.setblocking(False)
            if len(self.asking) >= MAX_ASKING:
                oldest = next(iter(self.asking.values()))
                self._forget(oldest)
                oldest.drop()
            asking = Asking(conn, pid, time.monotonic() + REQUEST_WAIT)
            self.asking[conn] = asking
            self.selector.register(conn, selectors.EVENT_READ, asking)

    def read(self, asking: Asking) -> None:
        """Read what came on a connection; decline it or start its command once the request is whole."""
        try:
            data, ancillary, flags, _ = asking.conn.recvmsg(1 << 16, *wire.FD_ROOM)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._forget(asking)
            asking.drop()
            return
        asking.fds += wire.received_fds(ancillary)  # none belong with a request (they come with "go"): closed
        if asking.fds or flags & socket.MSG_CTRUNC:
            self.decline(asking, "descriptors with the request")
            return
        if not data:  # the asker went away before its request was whole
            self._forget(asking)
            asking.drop()
            return
        asking.data += data
        if asking.length is None:
            head, newline, rest = asking.data.partition(b"\n")
            lead = wire.PROTOCOL + b" "
            if asking.data[: len(lead)] != lead[: len(asking.data)]:
                self.decline(asking, "not a request")  # another protocol: said at once, not at the deadline
                return
            if not newline:
                if len(asking.data) > wire.MAX_HEAD:
                    self.decline(asking, "not a request")
                return
            asking.length = wire.request_length(head)
            if asking.length is None:
                self.decline(asking, "not a request")
                return
            if asking.length > wire.MAX_REQUEST:
                self.decline(asking, "too large")  # declined whole, never read in part
                return
            asking.data = rest
        if len(asking.data) > asking.length:
            self.decline(asking, "longer than it says")
        elif len(asking.data) == asking.length:
            self.start(asking)

    def decline(self, asking: Asking, why: str) -> None:
        """Tell the asker to run the command itself (best effort: it runs it anyway once the connection goes)."""
        self._forget(asking)
        try:
            asking.conn.send(b"declined %s\n" % why.encode())
        except OSError:
            pass
        asking.drop()

    def refusal(self, asking: Asking, request: wire.Request | None) -> str | None:
        """Why the request is not run here (``None``: it is)."""
        if request is None:
            return "unreadable"
        if self.stamp.changed():
            self.stale = True
            return "changed since it started"
        if request.package != str(PACKAGE):
            return "another copy of fabrikito"
        if not request.argv or request.argv[0] not in wire.SERVED:
            return "not a command it runs"
        if not os.path.isdir(request.cwd):
            return "no such folder"
        if len(self.children) >= MAX_RUNNING:
            return "busy"
        return None

    def start(self, asking: Asking) -> None:
        """Fork the child that runs the request (it says ``started`` itself), or decline it."""
        request = wire.decode_request(asking.data)
        why = self.refusal(asking, request)
        if why is not None or request is None:
            self.decline(asking, why or "unreadable")
            return
        self._forget(asking)
        # The child must not run the server's handlers: every signal waits until it has set its own.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {*HANDLED, signal.SIGCHLD})
        try:
            child = os.fork()
            if child == 0:
                from fabrikito.cli import served

                def leave() -> None:
                    self.leave_for(asking)

                served.run_child(asking.conn, asking.pid, request, control=self.control, leave=leave)
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            self.decline(asking, "cannot fork")
            return
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        self.children[child] = asking.conn  # the child says "started" itself, before its exit line

    def _forget(self, asking: Asking) -> None:
        if self.asking.pop(asking.conn, None) is not None:
            try:
                self.selector.unregister(asking.conn)
            except (KeyError, ValueError):
                pass

    def reap(self) -> None:
        """Collect the commands that ended (and any tmux call left unread); tell the asker of a command
        ended by a signal."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.control is not None and pid == self.control.proc.pid:
                self.control.broken = "it ended"  # commands run tmux themselves until check connects again
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            if os.WIFSIGNALED(status):
                try:
                    conn.send(b"signal %d\n" % os.WTERMSIG(status))
                except OSError:
                    pass
            conn.close()

    def leave_for(self, asking: Asking) -> None:
        """In a forked child that runs ``asking``'s command: close everything else of the server's (its
        wake-up pipe, selector, listener and lock; the other connections and their descriptors)."""
        if self.wake >= 0:
            os.close(self.wake)
        self.selector.close()  # the epoll descriptor only: the server's registrations are left alone
        self.listener.close()
        if self.lock_fd >= 0:
            os.close(self.lock_fd)  # the lock is the server's: a command outliving it does not hold it
        for other in self.asking.values():
            if other is not asking:
                for fd in other.fds:
                    _close(fd)
                other.conn.close()
        for running in self.children.values():
            running.close()

    def close(self) -> None:
        """The connections being read, the selector and the listener (not the commands running)."""
        for asking in list(self.asking.values()):
            self._forget(asking)
            asking.drop()
        self.selector.close()
        self.listener.close()


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def _load(team_path: Path) -> Team | None:
    """The team file, or ``None`` when it does not load (the server serves anyway: each command it runs
    reads the file itself and says what is wrong with it)."""
    from fabrikito.team import teamfile

    try:
        return teamfile.load(team_path)
    except (OSError, FabrikitoError):
        return None


def _tmux_socket(team: Team | None) -> str | None:
    try:
        return None if team is None else team.server().resolved_socket_path()
    except (OSError, FabrikitoError):
        return None


def _preload() -> None:
    """Import what the commands it runs import, once, before any is asked for: each module one of its
    children imports is imported again by the next (``status`` imported six, the recogniser of the
    release its seats run among them, measured by tests/unit/test_server_preload.py)."""
    import fabrikito.base.rotate
    import fabrikito.base.text
    import fabrikito.cli.commands
    import fabrikito.cli.fastargs
    import fabrikito.cli.invocation
    import fabrikito.cli.served
    import fabrikito.delivery.flush
    import fabrikito.delivery.identity
    import fabrikito.delivery.queue
    import fabrikito.delivery.say
    import fabrikito.launch.resume
    import fabrikito.launch.status
    import fabrikito.launch.watcherproc
    import fabrikito.log.seek
    import fabrikito.screen.ansi
    import fabrikito.screen.releases
    import fabrikito.screen.startup  # noqa: F401
    from fabrikito.screen import releases

    for dialect in releases.DIALECTS:
        releases.make(dialect, "0")  # imports each packaged recogniser's module


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {MODULE} TEAM_FILE", file=sys.stderr)
        return 2
    team_path = Path(args[0]).absolute()
    inode: int | None = None
    server: CommandServer | None = None
    for signo in HANDLED:
        signal.signal(signo, _on_signal)
    try:
        fd = daemons.hold_lock(lock_path(team_path))
        if fd is None:
            return 0  # another server serves this team file
        os.ftruncate(fd, 0)
        _preload()
        team = _load(team_path)  # once, for all it starts with (its tmux socket, its client, its first reading)
        gc.collect()
        gc.freeze()  # what is imported stays untouched by a child's collections: fewer pages copied per fork
        listener, inode = serversocket.listen(team_path)
        server = CommandServer(team_path, listener, inode, _tmux_socket(team), fd, team=team)
        server.wake = _wake_on_signals(server)
        os.pwrite(fd, f"{os.getpid()} {procs.info(os.getpid()).start_ticks}\n".encode(), 0)  # listening: ready
        server.connect()  # after: up does not wait for it (commands asked meanwhile wait)
        server.warm()
        _loop(server)
    except _Stop:
        pass
    except FabrikitoError as exc:
        print(f"fabrikito command server: {exc.message}", file=sys.stderr)
        return 1
    finally:
        _remove_socket(team_path, inode)
        if server is not None and server.control is not None:
            server.control.close()  # kills its session, then its client ends
    return 0


def _wake_on_signals(server: CommandServer) -> int:
    """A pipe the signals write to (a child ended: reaped at once, its asker told), watched by the loop."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signo, frame: None)
    server.selector.register(wake_r, selectors.EVENT_READ)
    return wake_r


def _connect(team: Team | None) -> tmuxcontrol.Control | None:
    """The tmux control client its commands share, or ``None`` (they then run tmux themselves; ``team``
    ``None``: the team file did not load): whatever goes wrong connecting it, the server serves without
    it, the reason in its error file."""
    if team is None:
        return None
    try:
        return connect_control(team)
    except Exception:  # a server without the client is slower, not broken
        traceback.print_exc()
        return None


def _loop(server: CommandServer) -> None:
    checked = time.monotonic()
    while not server.stale:
        server.serve_once(min(TICK, max(0.0, checked + CHECK_EVERY - time.monotonic())))
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
