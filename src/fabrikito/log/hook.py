"""The SendMessage hook: one line in messages.log for each native message a seat sends.

Claude Code runs it as a ``PostToolUse`` and a ``PostToolUseFailure`` hook on
``SendMessage``, with the hook input (JSON) on stdin, through the command
:func:`command_line` builds (``python -m fabrikito.log.hook`` works too, slower)::

    PYTHONPATH=<src> python -S -c '...fabrikito.log.hook...' --team /abs/path/team.toml --role ROLE

It prints nothing and always exits 0: a log it cannot write costs that line,
never the message or the tool result.  The rules are the spec's ("The message
log" in messaging.md): the sender is ``--role``; the recipient a role id when
``to`` names a roster seat's session (``sf-tl`` or ``sf-tl [3fa9c1]``) or is a
``uds:`` address whose process runs in a roster seat's pane; the outcome
``sent``, ``NOT-SENT``, ``NOTIFY-WHEN-IDLE`` or ``UNREADABLE``; a message to or
from ``sec``, or to a ``uds:`` address no roster seat holds, without its body.

It runs on every message a seat sends, so it starts fast: it reads JSON with
the C scanner behind :mod:`json` (importing :mod:`json` itself pulls in
:mod:`re`), reads the roster from a small cache beside the state directory
(``tomllib`` only when the team file changed), and imports the tmux runner only
for a ``uds:`` address.
"""

from __future__ import annotations

import os
import sys
import time

from fabrikito.log import logline

LOOKUP_SECONDS = 2.0
MAX_ANCESTORS = 100
CACHE_MAGIC = "fabrikito-hook-roster 1"
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class Roster:
    """What the hook needs of the team file: its name, tmux server and seats."""

    __slots__ = ("name", "roles", "sessions", "tmux_socket", "tmux_socket_path")

    def __init__(
        self,
        name: str,
        seats: list[tuple[str, str]],
        tmux_socket: str | None = None,
        tmux_socket_path: str | None = None,
    ) -> None:
        self.name = name
        self.sessions = {session: role for role, session in seats}
        self.roles = frozenset(role for role, _ in seats)
        self.tmux_socket = tmux_socket
        self.tmux_socket_path = tmux_socket_path


# -- how seats run it ---------------------------------------------------------------

# ``-S`` skips the site module (and its .pth files): the hook needs nothing from
# site-packages, and it saves a third of the interpreter's start.  ``-c`` skips
# runpy, which ``-m`` would import first.  PYTHONPATH names the directory the
# package is imported from, so the command works from a checkout or an install.
ENTRY = "import sys; from fabrikito.log.hook import main; sys.exit(main())"


def package_root() -> str:
    """The directory the ``fabrikito`` package is imported from."""
    import fabrikito

    return os.path.dirname(os.path.dirname(os.path.abspath(fabrikito.__file__)))


def command_argv(team_path: str, role: str, *, python: str | None = None) -> list[str]:
    """The hook's argv for one seat (it needs ``PYTHONPATH`` set to :func:`package_root`)."""
    interpreter = os.path.abspath(python or sys.executable)
    return [interpreter, "-S", "-c", ENTRY, "--team", team_path, "--role", role]


def command_line(team_path: str, role: str, *, python: str | None = None, root: str | None = None) -> str:
    """The shell command line Claude Code runs for the seat's SendMessage hook."""
    import shlex

    where = package_root() if root is None else root
    return f"PYTHONPATH={shlex.quote(where)} " + shlex.join(command_argv(team_path, role, python=python))


# -- entry point ------------------------------------------------------------------


def main(argv: list[str] | None = None, stdin: bytes | None = None) -> int:
    """Log one SendMessage call.  Never raises, never prints; returns 0."""
    try:
        _run(sys.argv[1:] if argv is None else argv, stdin)
    except BaseException:  # noqa: S110 -- the hook never raises and never prints (spec)
        pass
    return 0


def _run(argv: list[str], stdin: bytes | None) -> None:
    team, role = _parse_argv(argv)
    if team is None:
        return
    team_path = os.path.abspath(team)
    roster = load_roster(team_path)
    if roster is None:
        return
    raw = _read_stdin() if stdin is None else stdin
    sender = role if role else logline.UNKNOWN_PARTY
    try:
        line = line_for(raw, sender, roster)
    except Exception:  # a line is owed even when reading the input fails in a way not foreseen
        line = _unreadable(sender, None)
    if line is not None:
        log_path = os.path.join(os.path.dirname(team_path), ".state", roster.name, logline.LOG_NAME)
        logline.append_hook(log_path, line)


def _parse_argv(argv: list[str]) -> tuple[str | None, str | None]:
    team = role = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, eq, value = arg.partition("=")
        if key in ("--team", "--role"):
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            if key == "--team":
                team = value or None
            else:
                role = value or None
        i += 1
    return team, role


def _read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None:
        return b""
    return stream.buffer.read()


# -- the line -------------------------------------------------------------------


def line_for(raw: bytes, sender: str, roster: Roster, *, when: float | None = None) -> bytes | None:
    """The log line for one hook input, or ``None`` when it is not a SendMessage call."""
    payload = load_json(raw)
    if not isinstance(payload, dict):
        return _unreadable(sender, when)
    tool_name = payload.get("tool_name")
    if tool_name is not None and tool_name != "SendMessage":
        return None
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return _unreadable(sender, when)
    response = payload.get("tool_response")
    failed = payload.get("hook_event_name") == "PostToolUseFailure" or not (
        isinstance(response, dict) and response.get("success") is True
    )
    message = tool_input.get("message")
    placeholder = tool_input.get("notify_when_idle") is True and message in (None, "")
    if placeholder:
        text = logline.NO_MESSAGE_NOTIFY
        outcome = logline.NOT_SENT if failed else logline.NOTIFY_WHEN_IDLE
    else:
        text = _as_text(message)
        outcome = logline.NOT_SENT if failed else logline.SENT
    recipient, resolved = _recipient(tool_input.get("to"), roster)
    if not placeholder:
        if not resolved:
            text = logline.BODY_NOT_LOGGED_UNRESOLVED
        text = logline.body_for(sender, recipient, text)
    return logline.format_line(when, sender, recipient, outcome, text)


def _unreadable(sender: str, when: float | None) -> bytes:
    return logline.format_line(when, sender, logline.UNKNOWN_PARTY, logline.UNREADABLE, logline.UNREADABLE_MESSAGE)


def _as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return fix_surrogates(value)
    import json

    return fix_surrogates(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def fix_surrogates(text: str) -> str:
    """A lone UTF-16 surrogate becomes U+FFFD; a high and low half side by side stay one character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _recipient(to: object, roster: Roster) -> tuple[str, bool]:
    """The recipient as logged, and whether its message may be logged (an unresolved ``uds:`` may not)."""
    if not isinstance(to, str):
        return (logline.UNKNOWN_PARTY if to is None else _as_text(to)), True
    to = fix_surrogates(to)
    role = roster.sessions.get(to)
    if role is not None:
        return role, True
    name, bracket, ref = to.rpartition(" [")
    if bracket and ref.endswith("]") and len(ref) > 1 and set(ref[:-1]) <= HEX_DIGITS:
        role = roster.sessions.get(name)
        if role is not None:
            return role, True
    if to.startswith("uds:"):
        try:
            role = resolve_uds(to[4:], roster, deadline=time.monotonic() + LOOKUP_SECONDS)
        except Exception:
            role = None
        if role is None:
            return to, False
        return role, True
    return to, True


# -- JSON without importing json (and re) ----------------------------------------------


class _ScanContext:
    strict = False
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name.replace("Infinity", "inf"))


def load_json(raw: bytes) -> object:
    """The JSON value of ``raw`` (UTF-8, invalid bytes replaced), or ``None`` when it is not JSON."""
    try:
        text = raw.decode("utf-8", "replace").lstrip("\ufeff").strip(" \t\r\n")
        try:
            import _json
        except ImportError:
            import json

            return json.loads(text, strict=False)
        scan = _json.make_scanner(_ScanContext())  # type: ignore[arg-type]  # any object with these attributes
        value, end = scan(text, 0)
        if end != len(text):
            return None
        return value
    except BaseException:
        return None


# -- the roster, through a small cache ---------------------------------------------------


def load_roster(team_path: str) -> Roster | None:
    """The roster of the team file at ``team_path`` (absolute), or ``None`` when it cannot be read.

    The cache ``.state/.hook-roster.<team file name>`` holds the name, the
    tmux server and the seats, and the team file's inode, mtime and size; it
    is used only while those match, and rewritten (temporary file and rename)
    when they do not.
    """
    try:
        st = os.stat(team_path)
    except OSError:
        return None
    stamp = f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}:{team_path}"
    state = os.path.join(os.path.dirname(team_path), ".state")
    cache = os.path.join(state, ".hook-roster." + os.path.basename(team_path))
    roster = _read_cache(cache, stamp)
    if roster is not None:
        return roster
    roster = parse_team(team_path)
    if roster is not None:
        try:
            _write_cache(state, cache, stamp, roster)
        except Exception:  # noqa: S110 -- a cache that cannot be written is read from the team file next time
            pass
        return roster
    # The team file does not parse (a half-saved edit): the last roster that parsed, else its name alone
    # (recipients then written as given), so the message is still logged.
    return _read_cache(cache, None) or _name_only(team_path)


def _name_only(team_path: str) -> Roster | None:
    """A roster with no seats, named by the team file's top-level ``name = "..."`` line, if it has one."""
    try:
        with open(team_path, "rb") as handle:
            text = handle.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    for raw in text.splitlines():
        row = raw.strip()
        if row.startswith("["):
            return None  # past the top-level keys
        key, eq, value = row.partition("=")
        if eq and key.strip() == "name":
            name = value.strip().strip('"').strip("'")
            return Roster(name, []) if _plain_name(name) else None
    return None


def parse_team(team_path: str) -> Roster | None:
    """Read the roster straight from the team file with :mod:`tomllib`."""
    import tomllib

    try:
        with open(team_path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    name = data.get("name")
    if not isinstance(name, str) or not _plain_name(name):
        return None
    seats: list[tuple[str, str]] = []
    raw_seats = data.get("seat")
    for seat in raw_seats if isinstance(raw_seats, list) else ():
        if isinstance(seat, dict):
            role, session = seat.get("role"), seat.get("session")
            if isinstance(role, str) and isinstance(session, str) and _plain_name(role) and _plain_name(session):
                seats.append((role, session))
    socket_name = data.get("tmux_socket")
    socket_path = data.get("tmux_socket_path")
    return Roster(
        name,
        seats,
        socket_name if isinstance(socket_name, str) and socket_name else None,
        socket_path if isinstance(socket_path, str) and socket_path else None,
    )


def _plain_name(value: str) -> bool:
    return 0 < len(value) <= 64 and set(value) <= NAME_CHARS and value[0] not in "-_"


def _read_cache(cache: str, stamp: str | None) -> Roster | None:
    """The cached roster when its stamp is ``stamp`` (``None``: whatever team file it was read from)."""
    try:
        fd = os.open(cache, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = os.read(fd, 1 << 16)
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").split("\n")
    if len(lines) < 6 or lines[0] != CACHE_MAGIC or stamp not in (None, lines[1]) or lines[-1] != "":
        return None
    name, socket_name, socket_path = lines[2], lines[3], lines[4]
    seats = []
    for row in lines[5:-1]:
        role, tab, session = row.partition("\t")
        if not tab:
            return None
        seats.append((role, session))
    return Roster(name, seats, socket_name or None, socket_path or None)


def _write_cache(state: str, cache: str, stamp: str, roster: Roster) -> None:
    values = [roster.name, roster.tmux_socket or "", roster.tmux_socket_path or "", stamp]
    if any("\n" in v or "\t" in v for v in values):
        return
    rows = "".join(f"{role}\t{session}\n" for session, role in roster.sessions.items())
    text = f"{CACHE_MAGIC}\n{stamp}\n{values[0]}\n{values[1]}\n{values[2]}\n{rows}"
    try:
        os.mkdir(state, 0o700)
    except FileExistsError:
        pass
    tmp = f"{cache}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, cache)


# -- uds: address → the roster seat whose pane runs its process ----------------------------


def resolve_uds(socket_path: str, roster: Roster, *, deadline: float) -> str | None:
    """The role of the roster seat whose pane runs the process listening on ``socket_path``.

    ``None`` when no process listens there, it runs in no roster seat's pane,
    or the lookup did not finish by ``deadline`` (monotonic); a tmux command
    still running then is killed.
    """
    pid = socket_owner(socket_path, deadline=deadline)
    if pid is None or time.monotonic() >= deadline:
        return None
    chain = ancestors(pid)
    panes = _roster_panes(roster, deadline)
    for pane_pid, session in panes:
        if pane_pid in chain:
            return roster.sessions.get(session)
    return None


def socket_owner(socket_path: str, *, deadline: float) -> int | None:
    """The pid of a process holding the listening unix socket bound at ``socket_path``."""
    from fabrikito.base import hostos  # only for a uds: address

    return hostos.socket_owner(socket_path, _candidate_pids(socket_path), deadline=deadline)


def _candidate_pids(socket_path: str) -> list[int]:
    """Likely owners first: the pid in ``<pid>.sock`` and Claude Code's registry entry for the socket."""
    found = []
    stem = os.path.basename(socket_path).partition(".")[0]
    if stem.isdigit():
        found.append(int(stem))
    registry = os.path.join(os.path.expanduser("~"), ".claude", "sessions")
    try:
        names = os.listdir(registry)
    except OSError:
        return found
    for name in names:
        if not name.endswith(".json") or not name[:-5].isdigit() or int(name[:-5]) in found:
            continue
        try:
            with open(os.path.join(registry, name), "rb") as handle:
                entry = load_json(handle.read(1 << 16))
        except OSError:
            continue
        if isinstance(entry, dict) and entry.get("messagingSocketPath") == socket_path:
            pid = entry.get("pid")
            if isinstance(pid, int):
                found.append(pid)
    return found


def ancestors(pid: int) -> set[int]:
    """``pid`` and its ancestors, up to :data:`MAX_ANCESTORS`."""
    chain = {pid}
    current = pid
    for _ in range(MAX_ANCESTORS):
        parent = _parent(current)
        if parent is None or parent <= 0 or parent in chain:
            break
        chain.add(parent)
        current = parent
    return chain


def _parent(pid: int) -> int | None:
    from fabrikito.base import hostos  # only for a uds: address

    return hostos.parent(pid)


def _roster_panes(roster: Roster, deadline: float) -> list[tuple[int, str]]:
    """``(pane_pid, session)`` of each pane of the team's tmux server in a roster session."""
    from fabrikito.base.errors import TmuxError
    from fabrikito.base.tmux import Server

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return []
    server = Server(socket_name=roster.tmux_socket, socket_path=roster.tmux_socket_path, timeout=remaining)
    try:
        rows = server.list_panes(["pane_pid", "session_name"])
    except TmuxError:
        return []
    panes = []
    for row in rows:
        if row["session_name"] in roster.sessions and row["pane_pid"].isdigit():
            panes.append((int(row["pane_pid"]), row["session_name"]))
    return panes


if __name__ == "__main__":
    sys.exit(main())
