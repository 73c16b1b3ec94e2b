"""The inbox of a seat that is not Claude Code: Claude Code's inbox protocol, received, into the delivery queue.

``python -m fabrikito.inbox.server TEAM_FILE ROLE`` runs it; :func:`start_inbox`
starts it detached and :func:`stop_inbox` ends it.  One per seat: it holds
``.state/<team>/inbox/<role>.lock`` (``flock``) for as long as it runs and
keeps its pid, socket and registry files in ``.state/<team>/inbox/<role>.json``.

It listens on a Unix socket (``.state/<team>/inbox/<role>.sock``, 0600) and
registers the way Claude Code 2.1.316 does, in
``${CLAUDE_CONFIG_DIR:-$HOME/.claude}/sessions/``: ``<pid>.json`` (its pid,
``procStart``, ``pidDomain``, the seat's session as ``name``, the socket as
``messagingSocketPath``) and ``<pid>.<sha256 of the socket path>.key`` holding a
fresh ``peerToken``.  So ``fabrikito send --to <session>`` finds it like any
session, and so does a Claude Code seat's ListAgents and SendMessage (measured
on 2.1.316 and 2.1.332: ``tests/live/test_inbox_live.py``).

A connection speaks :mod:`fabrikito.inbox.protocol`:

* its first line must be the auth line with the peer token (Claude Code's
  peers send it; ``send`` reads it from the key file): anything else closes the
  connection with nothing taken — stricter than Claude Code on Linux, which
  lets a user line in without one;
* each line must be complete within :data:`LINE_DEADLINE` seconds of the
  connection or of the line before, else the connection is closed and the
  unfinished line dropped;
* a line longer than :data:`MAX_LINE_BYTES` closes the connection; a message
  over 1,000,000 characters serialized is refused (:mod:`fabrikito.inbox.gate`);
* who is at the other end is told at ``accept`` from the connecting process
  (:func:`fabrikito.inbox.peer.identify`: its peer credentials, its
  ancestors, a seat's pane, a live Claude Code session), never from the text;
* each user line is judged by :class:`fabrikito.inbox.gate.Gate` (repeats,
  throttle, class) and then **queued**, never typed here: accepted messages as
  ``pending`` for the delivery worker, held ones as ``held`` until
  ``fabrikito queue release``; the queue's cap of 50 refuses the 51st.

Every message read gets one line in the team's message log (QUEUED,
NOT-DELIVERED or DROPPED, the reason in the message field); connections closed
before a message was read are noted in ``.state/<team>/inbox/<role>.log``.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import secrets
import selectors
import signal
import socket
import sys
import time
import uuid
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import daemons, hostos, procs, statedir
from fabrikito.base.errors import FabrikitoError, StateFileError
from fabrikito.inbox import protocol
from fabrikito.inbox.gate import Gate, Inbound, Verdict, read_arrival, seat_class
from fabrikito.inbox.inboxfiles import (
    ERR_SUFFIX,
    INBOX_MARK,
    Places,
    clear_stale,
    places,
    read_info,
    remove_registry,
)
from fabrikito.inbox.peer import Peer, identify
from fabrikito.team.teamfile import Seat, Team

if TYPE_CHECKING:
    from fabrikito.delivery.seatpane import PaneRow
    from fabrikito.log import msglog

MODULE = "fabrikito.inbox.server"
LINE_DEADLINE = 15.0
MAX_LINE_BYTES = 3 * protocol.MAX_SERIALIZED_CHARS + 65536
"""No line holding a message within the size limit is longer (3 UTF-8 bytes per UTF-16 unit, and the envelope)."""
MAX_CONNECTIONS = 32
TEAM_CHECK = 5.0
LOG_PREVIEW = 300
PANES_FOR = 1.0
"""Seconds a listing of the team's panes is used for (a walk that meets a tmux server it does not know lists
them again)."""


class Conn:
    """One client connection: what it sent so far, until when its next line may take, and who it is."""

    __slots__ = ("authed", "buf", "deadline", "peer", "pid", "sock")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.deadline = now + LINE_DEADLINE
        self.authed = False
        self.pid = _peer_pid(sock)
        self.peer: Peer | None = None  # told at accept, while the process is there (inbox/peer.py)


def _peer_pid(sock: socket.socket) -> int | None:
    try:
        return hostos.peer_cred(sock).pid
    except OSError:
        return None


class Inbox:
    """The socket, the gate and the queue for one seat (the process's state; :func:`serve` runs it)."""

    def __init__(self, team: Team, seat: Seat, where: Places, token: str, gate: Gate) -> None:
        self.team = team
        self.seat = seat
        self.where = where
        self.token = token
        self.gate = gate
        self.conns: dict[int, Conn] = {}
        self.selector = selectors.DefaultSelector()
        self.listener: socket.socket | None = None
        self._panes: tuple[float, list[PaneRow] | None] = (-PANES_FOR, None)

    # -- the socket ----------------------------------------------------------------

    def bind(self) -> None:
        path = self.where.socket
        statedir.remove_quietly(Path(path))  # a socket a killed inbox left (the lock says none runs)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        listener.listen(64)
        listener.setblocking(False)
        self.listener = listener
        self.selector.register(listener, selectors.EVENT_READ, None)

    def close(self) -> None:
        for conn in list(self.conns.values()):
            self._close(conn, None)
        if self.listener is not None:
            self.selector.unregister(self.listener)
            self.listener.close()
            self.listener = None
            statedir.remove_quietly(Path(self.where.socket))
        self.selector.close()

    def step(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the sockets, handle what came, close what ran out of time."""
        now = time.monotonic()
        if self.conns:
            timeout = max(0.0, min(timeout, min(c.deadline for c in self.conns.values()) - now))
        for key, _ in self.selector.select(timeout):
            if key.data is None:
                self._accept()
            elif callable(key.data):
                key.data()
            else:
                self._read(key.data)
        now = time.monotonic()
        for conn in [c for c in self.conns.values() if c.deadline <= now]:
            what = "an unfinished line" if conn.buf else "nothing"
            self._close(conn, f"closed: no complete line within {LINE_DEADLINE:g} s ({what} dropped)")

    def _accept(self) -> None:
        if self.listener is None:
            return
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn = Conn(sock, time.monotonic())
        if len(self.conns) >= MAX_CONNECTIONS:
            sock.close()
            self.note(f"refused a connection (pid {conn.pid}): {MAX_CONNECTIONS} are open already")
            return
        conn.peer = identify(conn.pid, self.team, self.panes)
        sock.setblocking(False)
        self.conns[sock.fileno()] = conn
        self.selector.register(sock, selectors.EVENT_READ, conn)

    def _close(self, conn: Conn, why: str | None) -> None:
        if why is not None:
            self.note(f"{why} (pid {conn.pid})")
        self.conns.pop(conn.sock.fileno(), None)
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _read(self, conn: Conn) -> None:
        try:
            chunk = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(conn, f"closed: read failed ({exc})")
            return
        if not chunk:
            # A probe (connect, close) is how Claude Code checks an inbox: say nothing of it.
            self._close(conn, "closed with an unfinished line: nothing taken from it" if conn.buf else None)
            return
        conn.buf += chunk
        while conn.sock.fileno() in self.conns:
            end = conn.buf.find(b"\n")
            if end < 0:
                break
            line = bytes(conn.buf[: end + 1])
            del conn.buf[: end + 1]
            conn.deadline = time.monotonic() + LINE_DEADLINE
            try:
                self._line(conn, line)
            except Exception as exc:  # a state file failing in a new way: say so, keep serving the others
                self._close(conn, f"closed: taking a line failed ({exc!r})")
        if conn.sock.fileno() in self.conns and len(conn.buf) > MAX_LINE_BYTES:
            self._close(
                conn,
                f"refused: a line longer than {MAX_LINE_BYTES:,} bytes, over the limit of "
                f"{protocol.MAX_SERIALIZED_CHARS:,} characters serialized; nothing taken",
            )

    def _line(self, conn: Conn, raw: bytes) -> None:
        try:
            line = protocol.decode_line(raw)
        except protocol.ProtocolError as exc:
            self._close(conn, f"closed: {exc}")
            return
        if not conn.authed:
            if not isinstance(line, protocol.AuthLine):
                self._close(conn, "refused: the first line is not the auth line (this inbox needs its peer token)")
            elif not hmac.compare_digest(line.token.encode(), self.token.encode()):
                self._close(conn, "refused: wrong token")
            else:
                conn.authed = True
            return
        if not isinstance(line, protocol.UserLine):
            self._close(conn, "closed: a second auth line")
            return
        self.take(line, conn.peer or Peer(conn.pid))

    # -- one message ------------------------------------------------------------------

    def panes(self, fresh: bool = False) -> list[PaneRow] | None:
        """The team's tmux server's panes: a listing at most :data:`PANES_FOR` seconds old, or a new one."""
        from fabrikito.base.errors import TmuxError
        from fabrikito.delivery.seatpane import list_panes

        now = time.monotonic()
        if fresh or now - self._panes[0] >= PANES_FOR:
            server = self.team.server()
            try:
                rows = list_panes(server) if os.path.exists(server.resolved_socket_path()) else []
            except TmuxError:
                rows = None
            self._panes = (now, rows)
        return self._panes[1]

    def take(self, line: protocol.UserLine, peer: Peer) -> Verdict:
        """Judge one user line from ``peer``, queue it or not, and write its log line."""
        from fabrikito.delivery import queue
        from fabrikito.log import msglog

        arrival = read_arrival(line, self.team, peer)
        if arrival.sender != peer.role:
            self.note(f"a message from {peer.what}: sent as {arrival.sender}")
        decision = self.gate.judge(arrival, time.monotonic())
        role = self.seat.role
        if decision.verdict in (Verdict.ACCEPT, Verdict.HOLD):
            held = decision.verdict is Verdict.HOLD
            try:
                msg = queue.enqueue(
                    self.team,
                    role,
                    arrival.sender,
                    arrival.text,
                    expire=queue.DEFAULT_EXPIRE,
                    reason=f"from the inbox: {decision.reason}",
                    state=queue.State.HELD if held else queue.State.PENDING,
                )
            except (FabrikitoError, OSError) as exc:  # the queue full (QueueFull), a state file failing
                why = exc.message if isinstance(exc, FabrikitoError) else str(exc)
                self._log(arrival.sender, msglog.Outcome.NOT_DELIVERED, f"refused, not queued: {why}", arrival.text)
                return Verdict.REFUSE
            note = f"from the inbox, held: {decision.reason}; ./fabrikito queue release {msg.id}" if held else ""
            problem = queue.log(self.team, msg, msglog.Outcome.QUEUED, note or "from the inbox")
            if problem is not None:
                self.note(f"{msg.id} was queued, but its log line could not be written: {problem}")
            if not held:
                self._wake_worker()
            return decision.verdict
        outcome = msglog.Outcome.DROPPED if decision.verdict is Verdict.DROP else msglog.Outcome.NOT_DELIVERED
        self._log(arrival.sender, outcome, f"{decision.verdict.value}: {decision.reason}", arrival.text)
        return decision.verdict

    def _log(self, sender: str, outcome: msglog.Outcome, why: str, text: str) -> None:
        from fabrikito.delivery.queue import log_line
        from fabrikito.log import msglog

        shown = text if len(text) <= LOG_PREVIEW else f"{text[:LOG_PREVIEW]}… ({len(text):,} characters)"
        body = f"[inbox {why}] " + msglog.body_for(sender, self.seat.role, shown)
        problem = log_line(self.team, sender, self.seat.role, outcome, body)
        if problem is not None:
            self.note(f"the message log line could not be written: {problem}")

    def _wake_worker(self) -> None:
        from fabrikito.delivery import worker

        try:
            worker.ensure_running(self.team)
        except (OSError, FabrikitoError) as exc:
            self.note(f"the delivery worker could not be started ({exc}): the message waits in the queue")

    def note(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        try:
            statedir.append_line(self.where.notes, f"{stamp}\t{text}\n".encode("utf-8", "replace"))
        except (OSError, StateFileError):
            pass


# -- the registry entry -------------------------------------------------------------------


def register(inbox: Inbox, name: str) -> None:
    """Write ``<pid>.json`` and its key file the way Claude Code does, and the inbox's own info file."""
    from fabrikito.inbox.sessions import key_path, own_pid_domain

    pid = os.getpid()
    where = inbox.where
    directory = where.sessions
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    start = str(procs.info(pid).start_ticks)
    now = int(time.time() * 1000)
    domain = own_pid_domain()
    entry: dict[str, object] = {
        "pid": pid,
        "sessionId": str(uuid.uuid4()),
        "cwd": str(inbox.seat.cwd),
        "startedAt": now,
        "procStart": start,
        "kind": "interactive",
        "messagingSocketPath": where.socket,
        "name": name,
        "nameSource": "user",
        "nameSince": now,
        "status": "idle",
        "updatedAt": now,
        "statusUpdatedAt": now,
        INBOX_MARK: {"team": inbox.team.name, "role": inbox.seat.role, "teamFile": str(inbox.team.path)},
    }
    if domain is not None:
        entry["pidDomain"] = domain
    key = key_path(directory, pid, where.socket)
    statedir.write_atomic(key, json.dumps({"peerToken": inbox.token, "procStart": start, "pidDomain": domain}).encode())
    registry = directory / f"{pid}.json"
    statedir.write_atomic(registry, json.dumps(entry).encode())
    info = {
        "pid": pid,
        "start_ticks": int(start),
        "socket": where.socket,
        "registry": str(registry),
        "key": str(key),
        "sessionId": entry["sessionId"],
        "name": name,
        "since": time.time(),
    }
    statedir.write_atomic(where.info, json.dumps(info).encode())


# -- the process ---------------------------------------------------------------------------


def serve(inbox: Inbox, stopped: list[bool]) -> None:
    """Handle connections until a signal asks to stop, or the team is gone."""
    server = inbox.team.server()
    seen_team = False
    next_check = 0.0
    while not stopped:
        inbox.step(1.0)
        now = time.monotonic()
        if now < next_check:
            continue
        next_check = now + TEAM_CHECK
        if not inbox.team.state_dir.is_dir():
            inbox.note("stopped: the team's state directory is gone")
            return
        running = os.path.exists(server.resolved_socket_path())
        if seen_team and not running:
            inbox.note(f"stopped: the team's {server.describe()} is gone (the team was taken down)")
            return
        seen_team = seen_team or running


def main(argv: list[str] | None = None) -> int:
    from fabrikito.team import teamfile

    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="the inbox of one seat")
    parser.add_argument("team_file")
    parser.add_argument("role")
    parser.add_argument("--name", help="the name it registers (default: the seat's session)")
    parser.add_argument("--inbound", choices=[i.value for i in Inbound], default=Inbound.DEFAULT.value)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        team = teamfile.load(args.team_file)
        seat = team.seat(args.role)
        if seat is None:
            print(f"fabrikito inbox: no seat '{args.role}' in team {team.name}", file=sys.stderr)
            return 2
        where = places(team, seat.role)
        fd = daemons.hold_lock(where.lock)
    except FabrikitoError as exc:
        print(f"fabrikito inbox: {exc.message}", file=sys.stderr)
        return 1
    if fd is None:
        return 0  # another inbox runs for this seat
    stopped: list[bool] = []
    inbox = Inbox(team, seat, where, secrets.token_hex(16), Gate(seat_class(seat), Inbound(args.inbound)))
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)

    def on_signal(signo: int, frame: object) -> None:
        del signo, frame
        stopped.append(True)

    for signo in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signo, on_signal)
    signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    inbox.selector.register(wake_r, selectors.EVENT_READ, lambda: wake_r.recv(512))
    try:
        clear_stale(where, lock_is_ours=True)
        inbox.bind()
        register(inbox, args.name or seat.session)
        inbox.note(f"listening on {where.socket} as {args.name or seat.session} (pid {os.getpid()})")
        serve(inbox, stopped)
    except (FabrikitoError, OSError) as exc:
        print(f"fabrikito inbox: {exc}", file=sys.stderr)
        return 1
    finally:
        remove_registry(where)
        inbox.close()
        statedir.remove_quietly(where.info)
        os.close(fd)
    return 0


# -- starting and stopping (for up and down) -------------------------------------------------


def start_inbox(
    team: Team,
    seat: Seat,
    *,
    name: str | None = None,
    inbound: Inbound | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> bool:
    """Start ``seat``'s inbox detached and wait until it listens; ``False`` when one runs already.

    Raises :class:`FabrikitoError` with what the process wrote when it did not come up.
    """
    where = places(team, seat.role)
    if read_info(where).running:
        return False
    err_path = where.dir / f"{seat.role}{ERR_SUFFIX}"
    command = [sys.executable, "-m", MODULE, str(team.path), seat.role]
    if name is not None:
        command += ["--name", name]
    if inbound is not None:
        command += ["--inbound", inbound.value]
    child = daemons.start_detached(command, cwd=team.base_dir, err_path=err_path, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = read_info(where)
        if found.running and found.pid == child.pid and os.path.exists(found.socket or ""):
            return True
        if child.poll() is not None:
            if read_info(where).running:
                return False  # another inbox won the lock
            break
        time.sleep(0.05)
    tail = (statedir.read_plain(err_path) or b"")[-2000:].decode("utf-8", "replace").strip()
    if child.poll() is None:
        child.kill()
    raise FabrikitoError(
        f"the inbox of {seat.role} did not start within {timeout:g} s"
        + (f": {tail}" if tail else "")
        + f" (see {err_path})"
    )


def stop_inbox(team: Team, seat: Seat, *, timeout: float = 5.0) -> str:
    """End ``seat``'s inbox; its socket and registry files go with it.  What happened, for people."""
    where = places(team, seat.role)
    found = read_info(where)
    if not found.running or found.pid is None:
        clear_stale(where)
        return f"{seat.role}: the inbox was not running"
    if daemons.end(found.pid, lambda: read_info(where).running, timeout):
        return f"{seat.role}: stopped the inbox (pid {found.pid})"
    clear_stale(where)
    return f"{seat.role}: killed the inbox (pid {found.pid}): it did not stop within {timeout:g} s"


if __name__ == "__main__":
    sys.exit(main())
