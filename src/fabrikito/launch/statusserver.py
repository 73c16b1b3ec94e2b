"""The team's status server: ``status`` answered by a process that has already imported it.

A cold ``fabrikito status`` spends most of its time starting Python and importing
``re``, ``enum``, ``pathlib``, ``json`` and the recognisers, not reading the
seats (docs/benchmarks.md).  ``up`` starts this server for a team whose seats
are all on this machine; ``status`` asks it over a unix socket
(:mod:`fabrikito.base.statuswire`) and prints what it answers.  For each question
it runs ``status``'s own code, :func:`fabrikito.launch.status.report`, on the
asker's team file path, options and the environment ``status`` reads (its time
zone, ``PATH``, ``TMUX_TMPDIR``...: :data:`~fabrikito.base.statuswire.ENV_READ`): the same two tmux calls, the
same files read at that moment, nothing kept from one question to the next.
The answer is therefore what the asker would have printed itself.

It answers only its own user (``SO_PEERCRED``), only for a team file in its own
folder with its own file name, and only an asker running the same copy of
fabrikito; it declines (the asker then does the work itself) when the package's
files changed since it started (an upgrade or an edit: it then exits), when the
team file has seats on other hosts (``ssh`` would run with ``up``'s environment),
or when the question fails in an unexpected way.  One question at a time.

``python -m fabrikito.launch.statusserver TEAM_FILE`` runs it.  It holds
``.state/.status.<file name>.lock`` while it runs (that file names its pid and
start time once it listens), listens on ``.state/.status.<file name>.sock`` (0600, in the
0700 ``.state/``), and ends on SIGTERM (``down``), SIGINT or SIGHUP, or by itself
once the team's tmux server has ended, the team file or its socket is gone, or its package
changed (looked at every :data:`CHECK_EVERY` seconds).
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import struct
import sys
import time
import traceback
from pathlib import Path

from fabrikito.base import daemons, procs, statedir, statuswire
from fabrikito.base.errors import FabrikitoError
from fabrikito.team import teamfile
from fabrikito.team.teamfile import Team

MODULE = "fabrikito.launch.statusserver"
CHECK_EVERY = 10.0
REQUEST_TIMEOUT = 5.0
START_WAIT = 5.0
STOP_WAIT = 5.0
ERR_NAME = "status-server.err"
PACKAGE = Path(__file__).resolve().parents[1]


def lock_path(team_path: Path) -> Path:
    return team_path.parent / statedir.STATE_ROOT / f".status.{team_path.name}.lock"


def socket_path(team_path: Path) -> Path:
    return team_path.parent / statedir.STATE_ROOT / statuswire.socket_name(str(team_path))


def served(team: Team) -> bool:
    """Whether the team's status can be answered by a server (all its seats on this machine)."""
    return all(seat.host is None for seat in team.seats)


def running_pid(team_path: Path) -> int | None:
    """The pid of the server holding the team file's lock, when one does and it is that server."""
    lock = lock_path(team_path)
    if not daemons.lock_held(lock):
        return None
    try:
        fields = (statedir.read_plain(lock) or b"").split()
        pid, ticks = int(fields[0]), int(fields[1])
        if MODULE in procs.cmdline(pid) and procs.info(pid).start_ticks == ticks:
            return pid
    except (OSError, FabrikitoError, ValueError, IndexError, procs.ProcessGone, procs.ProcessUnreadable):
        pass
    return None


def ensure_running(team: Team, *, env: dict[str, str] | None = None) -> bool:
    """Start the team's status server unless one runs or the team is not served; ``True`` when
    one was started.  Returns once it holds its lock, so a ``down`` right after it stops it."""
    if not served(team) or daemons.lock_held(lock_path(team.path)):
        return False
    statedir.ensure_state_dir(team.base_dir, team.name)
    child = daemons.start_detached(
        [sys.executable, "-m", MODULE, str(team.path)],
        cwd=team.base_dir,
        err_path=team.state_dir / ERR_NAME,
        env=env,
    )
    if not daemons.wait_started(child, lambda: running_pid(team.path) == child.pid, START_WAIT):
        raise FabrikitoError(f"it did not start: see {team.state_dir / ERR_NAME}")
    return True


def stop(team: Team) -> str | None:
    """End the team's status server; what happened, for people (``None``: none was running)."""
    pid = running_pid(team.path)
    if pid is None:
        return None
    if daemons.end(pid, lambda: daemons.lock_held(lock_path(team.path)), STOP_WAIT):
        return f"stopped the status server (pid {pid})"
    return f"killed the status server (pid {pid}): it did not stop within {STOP_WAIT:g} s"


class _Stop(Exception):
    """A signal asked the server to end."""


def _on_signal(signo: int, frame: object) -> None:
    del signo, frame
    raise _Stop


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
    """One team file's server: its listening socket and what it checks."""

    def __init__(self, team_path: Path, listener: socket.socket, inode: int) -> None:
        self.team_path = team_path
        self.listener = listener
        self.inode = inode
        self.stamp = package_stamp()
        self.tmux_socket: str | None = None
        self.stale = False

    def still_wanted(self) -> bool:
        """Whether to keep running: its socket is its own, the team file is there, the tmux server is."""
        try:
            if os.lstat(socket_path(self.team_path)).st_ino != self.inode:
                return False
        except OSError:
            return False
        if not self.team_path.exists() or package_stamp() != self.stamp:
            return False
        return self.tmux_socket is None or _listening(self.tmux_socket)

    def serve(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_TIMEOUT)
        _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid != os.getuid():
            return
        raw = b""
        while len(raw) <= statuswire.MAX_REQUEST:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            raw += chunk
        conn.sendall(self.answer(raw))

    def answer(self, raw: bytes) -> bytes:
        """The reply to one request (declined when it is not this server's to answer)."""
        request = statuswire.decode_request(raw)
        if request is None:
            return statuswire.DECLINED
        package, team_path, flags, env = request
        if package_stamp() != self.stamp:
            self.stale = True
            return statuswire.DECLINED
        if package != str(PACKAGE) or not self._same_file(team_path):
            return statuswire.DECLINED
        _adopt(env)
        try:
            team = teamfile.load(team_path)
            if not served(team):
                return statuswire.DECLINED
            from fabrikito.launch import status

            text = status.report(
                team, as_json="j" in flags, screens="n" not in flags, listing=team.server().start_list_panes()
            )
            self.tmux_socket = team.server().resolved_socket_path()
        except FabrikitoError as exc:
            return statuswire.encode_reply(exc.exit_code, "", f"fabrikito status: {exc.message}\n")
        except Exception:  # the asker runs status itself and shows the error as it would anyway
            traceback.print_exc()
            return statuswire.DECLINED
        return statuswire.encode_reply(0, text + "\n", "")

    def _same_file(self, team_path: str) -> bool:
        try:
            return os.path.basename(team_path) == self.team_path.name and os.path.samefile(
                os.path.dirname(team_path), self.team_path.parent
            )
        except OSError:
            return False


def _listening(path: str) -> bool:
    """Whether a server listens on the unix socket ``path`` (tmux leaves its socket behind when killed)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        return False
    except OSError:
        return True  # cannot tell (a path too long, a slow server): keep answering
    finally:
        probe.close()
    return True


def _adopt(env: dict[str, str | None]) -> None:
    """Set the variables ``status`` reads as the asker has them."""
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    time.tzset()


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
    listener.listen(16)
    return listener, os.lstat(where.name).st_ino


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fabrikito.launch.statusserver TEAM_FILE", file=sys.stderr)
        return 2
    team_path = Path(args[0]).absolute()
    inode: int | None = None
    for signo in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signo, _on_signal)
    try:
        fd = daemons.hold_lock(lock_path(team_path))
        if fd is None:
            return 0  # another server answers for this team file
        os.ftruncate(fd, 0)
        listener, inode = _listen(team_path)
        os.pwrite(fd, f"{os.getpid()} {procs.info(os.getpid()).start_ticks}\n".encode(), 0)  # listening: ready
        server = Server(team_path, listener, inode)
        listener.settimeout(CHECK_EVERY)
        while not server.stale:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if not server.still_wanted():
                    break
                continue
            with conn:
                try:
                    server.serve(conn)
                except OSError:
                    pass  # the asker went away or took too long: it runs status itself
        _remove_socket(team_path, inode)
    except _Stop:
        _remove_socket(team_path, inode)
    except FabrikitoError as exc:
        print(f"fabrikito status server: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _remove_socket(team_path: Path, inode: int | None) -> None:
    where = socket_path(team_path)
    try:
        if inode is not None and os.lstat(where).st_ino == inode:
            os.unlink(where)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
