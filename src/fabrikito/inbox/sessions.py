"""The session registry: which Claude Code sessions live, and which one a name or address means.

Posting into a session's inbox from outside it (``message-claude.md``) takes
four steps; the first is here, the other three in :mod:`fabrikito.inbox.client`:

1. **Discovery.**  :func:`list_sessions` reads every
   ``${CLAUDE_CONFIG_DIR:-$HOME/.claude}/sessions/<pid>.json`` into a
   :class:`SessionEntry` and checks its process: the pid must be alive, not a
   zombie, and started at the ``procStart`` the file records (clock ticks
   since boot, :func:`fabrikito.base.hostos.stat`), so a reused pid is not trusted.
   :func:`find` picks by name (and cwd): several live matches raise
   :class:`AmbiguousError` listing them, only dead ones :class:`StaleError`, none
   :class:`NoSuchSessionError`.
2. **Token.**  :func:`choose_token`: the child token
   (``CLAUDE_CODE_MESSAGING_TOKEN``) only when ``CLAUDE_CODE_MESSAGING_SOCKET``
   is exactly the target's socket path and the target's process is an
   ancestor of this one; otherwise the peer token from
   ``<pid>.<sha256(socket path as recorded)>.key`` (never resolved first);
   otherwise none (the auth line is optional on macOS and Linux).
3. **Payload.**  :func:`build_payload` builds both lines before anything is
   connected; an empty message, a lone surrogate or a message over the size
   limit is refused here (rules in :mod:`fabrikito.inbox.protocol`).
4. **Post.**  :func:`post` connects, writes the payload, shuts down its
   writing side and closes, all within :data:`POST_TIMEOUT` seconds (the
   receiver drops a connection that has not delivered a complete line in 15).

"Written" is all a sender can know: the socket answers nothing.  The receiver
then delivers the message, holds it for approval in its pane, or refuses it
silently, by its ``crossSessionInbound`` setting or, without one, by
permission class; :func:`receiver_fate` says which, as far as it can be told.

Exit codes (the ``exit_code`` of each error; ``fabrikito send --help`` lists them):

==  ==========================================================================
0   written to the inbox socket (not yet known to be delivered)
1   any other failure (for ``send``: the message log line could not be written)
2   usage: no message, an empty or whitespace-only message, a lone surrogate
3   :class:`NoSuchSessionError`: no session of that name (and cwd) in the registry
4   :class:`AmbiguousError`: more than one live session matches; candidates listed
5   :class:`StaleError`: only registry files whose process is gone match
6   :class:`ConnectFailedError`: the socket refused the connection, is missing,
    not permitted, or did not answer in time; nothing was sent
7   :class:`MessageTooLargeError`: over the size limit; refused before connecting
8   :class:`WriteFailedError`: connected, but the payload could not be written whole
9   :class:`SessionExitedError`: ``wait-idle``: the session exited while waited on
10  :class:`WaitTimeoutError`: ``wait-idle``: the timeout passed first
==  ==========================================================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum

from fabrikito import TYPE_CHECKING
from fabrikito.base import hostos, jsonfile
from fabrikito.base.errors import FabrikitoError, UsageError
from fabrikito.base.procs import config_dir_name
from fabrikito.base.values import frozen

if TYPE_CHECKING:
    from typing import Any

POST_TIMEOUT = 5.0
"""Seconds for connect + write together: well inside the receiver's 15."""

RECEIVER_LINE_DEADLINE = 15.0
ENV_SOCKET = "CLAUDE_CODE_MESSAGING_SOCKET"
ENV_TOKEN = "CLAUDE_CODE_MESSAGING_TOKEN"  # noqa: S105 (the name of the variable, not a secret)
UDS_PREFIX = "uds:"

EXIT_WRITTEN = 0
EXIT_USAGE = 2
EXIT_NO_SUCH_SESSION = 3
EXIT_AMBIGUOUS = 4
EXIT_STALE = 5
EXIT_CONNECT_FAILED = 6
EXIT_TOO_LARGE = 7
EXIT_WRITE_FAILED = 8
EXIT_SESSION_EXITED = 9
EXIT_WAIT_TIMEOUT = 10
# The table of these codes for people is send.EXIT_CODES_HELP (--help of send, sessions, wait-idle).


# -- errors -----------------------------------------------------------------------


class InboxError(FabrikitoError):
    """A send or a lookup that failed; ``sent`` says whether any byte left."""

    sent = False


class InvalidMessageError(InboxError, UsageError):
    """Empty, whitespace-only, or not valid Unicode text."""

    exit_code = EXIT_USAGE


class NoSuchSessionError(InboxError):
    exit_code = EXIT_NO_SUCH_SESSION


class AmbiguousError(InboxError):
    exit_code = EXIT_AMBIGUOUS

    def __init__(self, message: str, candidates: Sequence[SessionEntry]) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


class StaleError(InboxError):
    exit_code = EXIT_STALE

    def __init__(self, message: str, candidates: Sequence[SessionEntry]) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


class ConnectFailedError(InboxError):
    exit_code = EXIT_CONNECT_FAILED


class MessageTooLargeError(InboxError):
    exit_code = EXIT_TOO_LARGE


class WriteFailedError(InboxError):
    """Connected, but the payload did not all go out: the receiver may have a part of it."""

    exit_code = EXIT_WRITE_FAILED


class SessionExitedError(InboxError):
    exit_code = EXIT_SESSION_EXITED


class WaitTimeoutError(InboxError):
    exit_code = EXIT_WAIT_TIMEOUT


# -- the registry -------------------------------------------------------------------


class Liveness(StrEnum):
    ALIVE = "alive"
    DEAD = "dead"  # no such process, or a zombie
    REUSED = "pid reused"  # a process with that pid, started at another time
    UNKNOWN = "cannot check"  # another pid namespace or boot, or no way to look

    @property
    def stale(self) -> bool:
        return self in (Liveness.DEAD, Liveness.REUSED)


@frozen
class SessionEntry:
    """One registry file ``<config-dir>/sessions/<pid>.json``, and what was found of its process."""

    path: str  # a string: send's path does not import pathlib
    pid: int
    name: str | None
    status: str | None
    waiting_for: str | None
    cwd: str | None
    socket_path: str | None
    tmux: str | None
    permission_mode: str | None  # only when the file records one (2.1.316 does not)
    session_id: str | None
    proc_start: str | None
    pid_domain: str | None
    kind: str | None
    version: str | None
    updated_at: int | None
    liveness: Liveness
    status_updated_at: int | None = None  # epoch ms of the last status change (``statusUpdatedAt``)
    fabrikito_inbox: bool = False  # written by fabrikito's inbox of a seat that is not Claude Code

    @property
    def stale(self) -> bool:
        return self.liveness.stale

    @property
    def sessions_dir(self) -> str:
        return os.path.dirname(self.path)

    def key_path(self) -> str | None:
        if self.socket_path is None:
            return None
        return key_path(self.sessions_dir, self.pid, self.socket_path)

    def describe(self) -> str:
        """``pid 123, cwd /x, status idle, socket /tmp/cc-socks/123.sock`` (and why it is stale)."""
        status = self.status or "?"
        if self.waiting_for:
            status += f" ({self.waiting_for})"
        parts = [f"pid {self.pid}", f"cwd {self.cwd or '?'}", f"status {status}"]
        parts.append(f"socket {self.socket_path}" if self.socket_path else "no inbox socket")
        if self.liveness is not Liveness.ALIVE:
            parts.append(f"process {self.liveness.value}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "status": self.status,
            "waitingFor": self.waiting_for,
            "cwd": self.cwd,
            "messagingSocketPath": self.socket_path,
            "tmux": self.tmux,
            "permissionMode": self.permission_mode,
            "sessionId": self.session_id,
            "liveness": self.liveness.value,
            "stale": self.stale,
            "registryFile": str(self.path),
        }


def sessions_dir(env: Mapping[str, str] | None = None) -> str:
    return os.path.join(config_dir_name(env), "sessions")


def key_path(directory: str | os.PathLike[str], pid: int, socket_path: str) -> str:
    """``<dir>/<pid>.<sha256 of socket_path exactly as recorded>.key`` (the path is not resolved)."""
    import hashlib  # only for a key file: status reads the registry without it

    digest = hashlib.sha256(socket_path.encode("utf-8", "surrogateescape")).hexdigest()
    return os.path.join(directory, f"{pid}.{digest}.key")


def _str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def read_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A JSON object from ``path``; ``None`` when missing, unreadable or not an object.

    Read twice on a parse error, in case the file was caught half written.
    """
    return jsonfile.read_object(path, again_after=0.02)


def parse_entry(
    path: str | os.PathLike[str],
    data: Mapping[str, Any],
    *,
    check: Callable[[int, str | None, str | None], Liveness] | None = None,
) -> SessionEntry | None:
    """A :class:`SessionEntry` from a registry object, or ``None`` when it has no integer pid."""
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    proc_start = data.get("procStart")
    proc_start_s = str(proc_start) if isinstance(proc_start, str | int) and not isinstance(proc_start, bool) else None
    pid_domain = _str(data, "pidDomain")
    updated = data.get("updatedAt")
    status_updated = data.get("statusUpdatedAt")
    mode = _str(data, "permissionMode") or _str(data, "permission_mode")
    liveness = (check or process_liveness)(pid, proc_start_s, pid_domain)
    return SessionEntry(
        path=os.fspath(path),
        pid=pid,
        name=_str(data, "name"),
        status=_str(data, "status"),
        waiting_for=_str(data, "waitingFor"),
        cwd=_str(data, "cwd"),
        socket_path=_str(data, "messagingSocketPath"),
        tmux=_str(data, "tmux"),
        permission_mode=mode,
        session_id=_str(data, "sessionId"),
        proc_start=proc_start_s,
        pid_domain=pid_domain,
        kind=_str(data, "kind"),
        version=_str(data, "version"),
        updated_at=updated if isinstance(updated, int) and not isinstance(updated, bool) else None,
        liveness=liveness,
        status_updated_at=status_updated
        if isinstance(status_updated, int) and not isinstance(status_updated, bool)
        else None,
        fabrikito_inbox=isinstance(data.get("fabrikitoInbox"), dict),
    )


def read_entry(path: str | os.PathLike[str]) -> SessionEntry | None:
    data = read_json(path)
    return None if data is None else parse_entry(path, data)


def list_sessions(
    env: Mapping[str, str] | None = None, *, directory: str | os.PathLike[str] | None = None
) -> list[SessionEntry]:
    """Every readable registry file, stale ones included (see :attr:`SessionEntry.stale`), by pid."""
    where = sessions_dir(env) if directory is None else directory
    try:
        names = sorted(os.listdir(where))
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []
    out = []
    for name in names:
        if not name.endswith(".json"):
            continue
        entry = read_entry(os.path.join(where, name))
        if entry is not None:
            out.append(entry)
    out.sort(key=lambda e: e.pid)
    return out


# -- processes ----------------------------------------------------------------------


def own_pid_domain() -> str | None:
    """``linux:<machine id>:pid:[<pid namespace>]``, as Claude Code writes ``pidDomain``; ``None`` off Linux."""
    return hostos.pid_domain()


def process_liveness(pid: int, proc_start: str | None, pid_domain: str | None = None) -> Liveness:
    """Is the session's process still the one that wrote the file?"""
    if pid_domain is not None and hostos.pid_domain_matches(pid_domain) is False:
        return Liveness.UNKNOWN
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return Liveness.DEAD
    except PermissionError:
        pass
    except OSError:
        return Liveness.UNKNOWN
    stat = hostos.stat(pid)
    if stat is None:  # it ended just now, or it cannot be read
        return Liveness.UNKNOWN if hostos.alive(pid) else Liveness.DEAD
    if stat.state in ("Z", "X"):
        return Liveness.DEAD
    if proc_start is not None and stat.start is not None and stat.start != proc_start:
        return Liveness.REUSED
    return Liveness.ALIVE


def is_ancestor(pid: int, *, start: int | None = None) -> bool | None:
    """Whether ``pid`` is an ancestor of ``start`` (default: this process); ``None`` when it cannot be told."""
    current = os.getpid() if start is None else start
    for _ in range(4096):
        parent = hostos.parent(current)
        if parent is None:
            return None
        if parent == pid:
            return True
        if parent <= 1:
            return False
        current = parent
    return False


# -- finding a target -----------------------------------------------------------------


def _same_dir(recorded: str | None, wanted: str) -> bool:
    if recorded is None:
        return False
    if recorded == wanted or recorded.rstrip("/") == wanted.rstrip("/"):
        return True
    return os.path.realpath(recorded) == os.path.realpath(wanted)


def _listing(entries: Iterable[SessionEntry]) -> str:
    return "\n".join(f"  {e.name or '?'}: {e.describe()} ({e.path})" for e in entries)


def find(
    name: str,
    cwd: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    entries: Sequence[SessionEntry] | None = None,
) -> SessionEntry:
    """The one live session named ``name`` (in ``cwd`` when given) with an inbox socket.

    Raises :class:`AmbiguousError` when several live ones match, :class:`StaleError`
    when only stale ones do, :class:`NoSuchSessionError` when none does.  A
    session whose process cannot be checked (another pid namespace) counts as
    live: the connection decides.
    """
    pool = list_sessions(env) if entries is None else list(entries)
    named = [e for e in pool if e.name == name]
    matches = [e for e in named if cwd is None or _same_dir(e.cwd, cwd)]
    where = f"named {name!r}" + (f" in {cwd}" if cwd is not None else "")
    live = [e for e in matches if not e.stale]
    reachable = [e for e in live if e.socket_path]
    if len(reachable) == 1:
        return reachable[0]
    if len(reachable) > 1:
        raise AmbiguousError(
            f"{len(reachable)} live sessions are {where}; not sending to an arbitrary one:\n"
            f"{_listing(reachable)}\n"
            "Pass --cwd DIR to pick one (or uds:<socket path>), or rename one of them (/rename).",
            reachable,
        )
    if live:
        raise NoSuchSessionError(
            f"the session {where} has no inbox socket (started with --bare, or messaging is off there):\n"
            f"{_listing(live)}"
        )
    stale = [e for e in matches if e.stale]
    if stale:
        raise StaleError(
            f"the registry lists a session {where}, but its process is gone (a stale file, left by a "
            f"kill -9 or a crash); not sending:\n{_listing(stale)}\n"
            "Start the session again, or remove the stale file if it is in the way.",
            stale,
        )
    directory = sessions_dir(env) if entries is None else None
    hint = ""
    if named and cwd is not None:
        hint = f"\nSessions named {name!r} in other directories:\n{_listing(named)}"
    else:
        others = sorted({e.name for e in pool if e.name and not e.stale})
        if others:
            hint = f"\nLive sessions: {', '.join(others)}."
    seen = f" ({directory})" if directory is not None else ""
    raise NoSuchSessionError(
        f"no session {where} in the registry{seen}. If Claude Code runs with its own CLAUDE_CONFIG_DIR, "
        f"set it here too.{hint}"
    )


def entry_for_socket(socket_path: str, entries: Iterable[SessionEntry]) -> SessionEntry | None:
    """The live registry entry whose recorded socket is ``socket_path`` (exact text), if any."""
    found = [e for e in entries if e.socket_path == socket_path and not e.stale]
    return found[0] if len(found) == 1 else None


@frozen
class Target:
    """Where a message goes: the address as given, the socket, and the registry entry when known."""

    address: str  # what --to said
    socket_path: str
    entry: SessionEntry | None

    @property
    def name(self) -> str | None:
        return self.entry.name if self.entry is not None else None

    def describe(self) -> str:
        if self.entry is None:
            return f"uds:{self.socket_path}"
        return f"{self.entry.name or '?'} (pid {self.entry.pid}, cwd {self.entry.cwd or '?'}, uds:{self.socket_path})"


def resolve(
    to: str,
    cwd: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    entries: Sequence[SessionEntry] | None = None,
) -> Target:
    """A :class:`Target` for a session name or a ``uds:/path`` address."""
    pool = list_sessions(env) if entries is None else list(entries)
    if to.startswith(UDS_PREFIX):
        path = to[len(UDS_PREFIX) :]
        if not path.startswith("/"):
            raise InvalidMessageError(
                f"{to!r}: a uds: address needs an absolute socket path (uds:/tmp/cc-socks/123.sock)"
            )
        return Target(address=to, socket_path=path, entry=entry_for_socket(path, pool))
    if not to.strip():
        raise InvalidMessageError("no target: pass --to NAME, a roster role, or uds:/path")
    entry = find(to, cwd, env=env, entries=pool)
    return Target(address=to, socket_path=entry.socket_path or "", entry=entry)
