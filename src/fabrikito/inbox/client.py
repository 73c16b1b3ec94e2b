"""Posting into a session's inbox: the token, the payload, the post, what the receiver does next, wait-idle.

The target comes from :mod:`fabrikito.inbox.sessions` (the registry); the
wire format from :mod:`fabrikito.inbox.protocol`.  See the exit codes in
:mod:`fabrikito.inbox.sessions`.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable, Mapping
from enum import StrEnum

from fabrikito import TYPE_CHECKING
from fabrikito.base.text import refusal_for
from fabrikito.base.values import frozen
from fabrikito.inbox import protocol
from fabrikito.inbox.sessions import (
    ENV_SOCKET,
    ENV_TOKEN,
    POST_TIMEOUT,
    ConnectFailedError,
    InvalidMessageError,
    MessageTooLargeError,
    SessionEntry,
    SessionExitedError,
    Target,
    WaitTimeoutError,
    WriteFailedError,
    is_ancestor,
    process_liveness,
    read_entry,
    read_json,
    resolve,
)

if TYPE_CHECKING:
    from typing import Any

# -- tokens -----------------------------------------------------------------------------


class TokenKind(StrEnum):
    CHILD = "child"
    PEER = "peer"
    NONE = "none"


@frozen
class Token:
    kind: TokenKind
    value: str | None
    source: str  # where it came from, or why there is none

    def __repr__(self) -> str:  # never print a token
        return f"Token(kind={self.kind.value!r}, source={self.source!r})"


def read_peer_token(path: str | os.PathLike[str], *, proc_start: str | None = None) -> str | None:
    """``peerToken`` from a key file; ``None`` when missing, unreadable, or for another process."""
    data = read_json(path)
    if data is None:
        return None
    token = data.get("peerToken")
    if not isinstance(token, str) or not token:
        return None
    recorded = data.get("procStart")
    if proc_start is not None and isinstance(recorded, str) and recorded != proc_start:
        return None
    return token


def choose_token(
    target: Target,
    *,
    env: Mapping[str, str] | None = None,
    ancestor: Callable[[int], bool | None] = is_ancestor,
) -> Token:
    """The child token when this process is the target's own child, else the peer token, else none.

    Child: ``CLAUDE_CODE_MESSAGING_SOCKET`` equals the target's socket path as
    given, ``CLAUDE_CODE_MESSAGING_TOKEN`` is set, and the target's pid (when
    the registry knows it) is an ancestor of this process or that cannot be
    checked.  Peer: the key file named from the pid and the socket path as
    recorded (no path resolution), and written by the same process
    (``procStart``).
    """
    env = os.environ if env is None else env
    entry = target.entry
    child_token = env.get(ENV_TOKEN) or ""
    if child_token and env.get(ENV_SOCKET) == target.socket_path:
        verdict = None if entry is None else ancestor(entry.pid)
        if verdict is not False:
            how = "this process descends from the session" if verdict else "the session's process is unknown here"
            return Token(TokenKind.CHILD, child_token, f"{ENV_TOKEN} ({ENV_SOCKET} matches; {how})")
    if entry is None:
        return Token(TokenKind.NONE, None, "no registry entry records this socket, so there is no key file to read")
    path = entry.key_path()
    if path is None:
        return Token(TokenKind.NONE, None, "the registry entry records no socket")
    token = read_peer_token(path, proc_start=entry.proc_start)
    if token is None:
        return Token(TokenKind.NONE, None, f"no usable peer token in {path}")
    return Token(TokenKind.PEER, token, f"peerToken from {path}")


# -- payload and post ---------------------------------------------------------------------


def check_text(text: str) -> int:
    """Refuse an empty or invalid message, or one over the size limit; return its serialized size."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidMessageError("the message is empty (or only whitespace): nothing was sent")
    try:
        protocol.check_text(text)
        size = protocol.check_size(text)
    except protocol.TooLargeError as exc:
        raise MessageTooLargeError(f"{exc}; nothing was sent") from None
    except protocol.InvalidTextError as exc:
        raise InvalidMessageError(f"{exc}; nothing was sent") from None
    reason = refusal_for(text.replace("\r\n", "\n"))  # CRLF line ends are text, not a control
    if reason is not None:
        raise InvalidMessageError(f"{reason.partition(': ')[0]}; nothing was sent: remove it and send again")
    return size


def build_payload(text: str, token: str | None) -> bytes:
    """The auth line (when there is a token) and the user line, as UTF-8 bytes."""
    check_text(text)
    return protocol.encode(text, token)


@frozen
class PostResult:
    socket_path: str
    bytes_written: int
    connect_seconds: float
    total_seconds: float


def post(socket_path: str, payload: bytes, timeout: float = POST_TIMEOUT, *, wait_close: bool = False) -> PostResult:
    """Connect to ``socket_path``, write ``payload``, shut down writing, close.

    The timeout covers connect and write together.  With ``wait_close`` the
    connection is kept until the receiver closes it (within what is left of the
    timeout): fabrikito's inbox tells who sent a message by its process, so the
    process stays until the inbox has read it.  Raises
    :class:`ConnectFailedError` when nothing was sent, :class:`WriteFailedError` when
    the connection broke or ran out of time during the write.
    """
    if not payload.endswith(b"\n"):
        raise ValueError("the payload must end with a newline")
    t0 = time.monotonic()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(socket_path)
        except OSError as exc:
            raise ConnectFailedError(_connect_failure(socket_path, exc)) from None
        t1 = time.monotonic()
        sock.settimeout(max(0.05, timeout - (t1 - t0)))
        try:
            sock.sendall(payload)
        except OSError as exc:
            what = "did not take it in time" if isinstance(exc, TimeoutError) else f"closed it ({exc})"
            err = WriteFailedError(
                f"connected to {socket_path}, but it {what} while the {len(payload):,}-byte message was written: "
                "the receiver has at most an incomplete line, which it drops; the message was not sent"
            )
            raise err from None
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # everything was written; the receiver already hung up
        if wait_close:
            sock.settimeout(max(0.05, timeout - (time.monotonic() - t0)))
            try:
                while sock.recv(4096):
                    pass
            except OSError:
                pass  # it was written whole; how long the receiver keeps the line open is its own affair
    finally:
        sock.close()
    return PostResult(socket_path, len(payload), t1 - t0, time.monotonic() - t0)


def _connect_failure(socket_path: str, exc: OSError) -> str:
    code = exc.errno
    if isinstance(exc, TimeoutError):
        why = "no answer in time"
    elif code == errno.ENOENT:
        why = "no such socket (the session has ended, or the address is stale)"
    elif code == errno.ECONNREFUSED:
        why = "connection refused (nobody listens: the session's process is gone and the socket is stale)"
    elif code in (errno.EACCES, errno.EPERM):
        why = "permission denied (another OS user's session, or a sandbox that denies Unix sockets)"
    elif code == errno.ENOTSOCK:
        why = "not a socket"
    else:
        why = exc.strerror or str(exc)
    return f"could not connect to uds:{socket_path}: {why}; nothing was sent"


# -- what the receiver does next --------------------------------------------------------

BYPASS_MODES = frozenset({"bypassPermissions"})


def receiver_fate(token: Token, receiver_mode: str | None) -> list[str]:
    """What can be said about the message after it was written, line by line."""
    lines = [
        "written to the inbox socket: in the session's inbox, not yet known to be read by its Claude "
        "(the socket answers nothing, so no delivery, hold or refusal comes back here)."
    ]
    refuse = (
        'If that session\'s crossSessionInbound is "refuse" it drops the message silently; '
        'if it is "hold" it holds it for approval.'
    )
    if token.kind is TokenKind.CHILD:
        lines.append(
            "Sent with the session's child token: as its own child this message is delivered under the default "
            "rules, whatever its permission mode. " + refuse
        )
        return lines
    if receiver_mode in BYPASS_MODES:
        lines.append(
            f"The receiver runs in {receiver_mode} and this sender is not its child, so it asserts no permission "
            'class: the receiver HOLDS the message in a dialog in its pane ("Held message from another '
            'session") until someone approves it, and drops it after dialogExpiry (5 minutes by default) — '
            'unless its crossSessionInbound is "accept".'
        )
    elif receiver_mode is not None:
        lines.append(
            f"The receiver runs in {receiver_mode} (a prompting mode): by default it delivers the message as a "
            "new prompt. " + refuse
        )
    else:
        lines.append(
            "The receiver's permission mode is not known here: a prompting-mode session (acceptEdits, default, "
            "plan) delivers it; a bypassPermissions session HOLDS it for approval in its pane (and drops it after "
            "dialogExpiry, 5 minutes by default). " + refuse
        )
    return lines


@frozen
class SendReport:
    target: Target
    token: Token
    result: PostResult
    fate: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        entry = self.target.entry
        return {
            "version": 1,
            "outcome": "written",
            "to": self.target.address,
            "name": self.target.name,
            "pid": entry.pid if entry is not None else None,
            "cwd": entry.cwd if entry is not None else None,
            "socket": self.target.socket_path,
            "token": self.token.kind.value,
            "bytes": self.result.bytes_written,
            "seconds": round(self.result.total_seconds, 6),
            "fate": list(self.fate),
        }


def send(
    to: str,
    text: str,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    receiver_mode: str | None = None,
    timeout: float = POST_TIMEOUT,
    target: Target | None = None,
) -> SendReport:
    """Check the text, find the target, pick the token, build the payload, post it.

    The text is checked (empty, invalid, too large) before the registry is
    read; the payload is built whole before connecting.
    """
    check_text(text)
    if target is None:
        target = resolve(to, cwd, env=env)
    token = choose_token(target, env=env)
    payload = build_payload(text, token.value)
    inbox = target.entry is not None and target.entry.fabrikito_inbox
    result = post(target.socket_path, payload, timeout, wait_close=inbox)
    mode = receiver_mode or (target.entry.permission_mode if target.entry is not None else None)
    if target.entry is not None and target.entry.fabrikito_inbox:
        return SendReport(target, token, result, INBOX_FATE)
    return SendReport(target, token, result, tuple(receiver_fate(token, mode)))


INBOX_FATE = (
    "written to fabrikito's inbox of a seat that is not Claude Code (the socket answers nothing); it labels the "
    "message by who sent it: the seat whose pane this ran in, else unverified-sender.",
    "This is fabrikito's inbox of a seat that is not Claude Code: it queues the message for the delivery worker, "
    "holds it for the owner (./fabrikito queue release), or "
    "refuses it (throttled, a repeat, the queue full), by the seat's permission class; ./fabrikito queue and the "
    "log say which.",
)


# -- waiting for idle ------------------------------------------------------------------------


#: After a send, how long ``wait-idle`` waits for the turn it starts before it takes ``idle`` as it is.
TURN_START_BOUND = 10.0


def wait_idle(
    entry: SessionEntry,
    *,
    timeout: float | None = None,
    since: float | None = None,
    turn_start_bound: float = TURN_START_BOUND,
    first_interval: float = 0.2,
    max_interval: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> SessionEntry:
    """Wait until ``entry``'s registry status is ``idle``; return the entry as last read.

    ``since`` (epoch seconds) is when a message was last written to the
    session: then ``idle`` counts only once the session was seen busy, or its
    status changed after ``since`` (``statusUpdatedAt``), or
    ``turn_start_bound`` seconds after ``since`` passed with no turn begun (the
    message may have been held, refused or dropped).  Without it, the registry
    can still say ``idle`` from before the message.

    Polls the file's ``stat`` (size, mtime) and parses it only when it changed,
    starting at ``first_interval`` seconds and growing by half each quiet
    round up to ``max_interval``; a change starts over at ``first_interval``.
    The process is checked each round.  Raises :class:`SessionExitedError` when the
    file goes or the process ends, :class:`WaitTimeoutError` after ``timeout``.
    """
    deadline = None if timeout is None else clock() + timeout
    interval = first_interval
    last_sig: tuple[int, int] | None = None
    current = entry
    seen_busy = False
    while True:
        try:
            st = os.stat(entry.path)
        except FileNotFoundError:
            raise SessionExitedError(
                f"session {entry.name or '?'} (pid {entry.pid}) exited: its registry file {entry.path} is gone"
            ) from None
        sig = (st.st_size, st.st_mtime_ns)
        if sig != last_sig:
            fresh = read_entry(entry.path)
            if fresh is not None and fresh.pid == entry.pid:
                current = fresh
            last_sig = sig
            interval = first_interval
        else:
            interval = min(max_interval, interval * 1.5)
        liveness = process_liveness(entry.pid, entry.proc_start, entry.pid_domain)
        if liveness.stale:
            raise SessionExitedError(
                f"session {entry.name or '?'} (pid {entry.pid}) exited: process {liveness.value} "
                f"(its registry file {entry.path} was left behind)"
            )
        seen_busy = seen_busy or current.status != "idle"
        if current.status == "idle" and (
            since is None or seen_busy or turn_started_after(current, since) or wall() >= since + turn_start_bound
        ):
            return current
        now = clock()
        if deadline is not None and now >= deadline:
            status = current.status or "?"
            if current.waiting_for:
                status += f" ({current.waiting_for})"
            if current.status == "idle":
                status = "idle, but has not started the turn for the message sent to it"
            raise WaitTimeoutError(
                f"session {entry.name or '?'} (pid {entry.pid}) is still {status} after {timeout:g} s"
            )
        pause = interval if deadline is None else max(0.0, min(interval, deadline - now))
        if since is not None and not seen_busy:
            pause = min(pause, first_interval)  # the turn about to start can be short: look often
        sleep(pause)


def turn_started_after(entry: SessionEntry, since: float) -> bool:
    """The registry records a status change after ``since`` (epoch seconds)."""
    return entry.status_updated_at is not None and entry.status_updated_at >= since * 1000
