"""The team file: a TOML description of a team and its roster.

Example (see ``examples/team.toml``)::

    name = "acme"                 # names .state/acme/
    tmux_socket = "acme"          # tmux -L acme; omit for the default server
    agent = "claude"              # the agent command (a string or a list)
    kickoff = "Read your role and start."
    shared_prompt = "roles/common.md"

    [[seat]]
    role = "em"
    session = "acme-em"
    cwd = "."
    permission_mode = "acceptEdits"
    args = []
    kickoff = "..."               # optional; the team's kickoff otherwise
    env = { CLAUDE_CODE_NO_FLICKER = "1" }

    [[seat]]
    role = "dev"
    session = "acme-dev"
    agent = "codex"               # claude (the default), codex or gemini
    command = ["/opt/codex/bin/codex"]   # optional: the program to run

Every problem is reported at once, each naming the file, the seat, what is
wrong and what to do; unknown keys are errors.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import teampath
from fabrikito.base.errors import TeamFileError
from fabrikito.base.values import field, frozen
from fabrikito.team import logkeys, watchconf
from fabrikito.team.reserved import reserved_arg, reserved_role
from fabrikito.team.watchconf import WatchConfig

if TYPE_CHECKING:
    from typing import Any

    from fabrikito.base.tmux import Server


DEFAULT_TEAM_FILE = "team.toml"
DEFAULT_AGENT = ("claude",)
DEFAULT_SHARED_PROMPT = "roles/common.md"

ROLE_RE = re.compile(r"[a-z0-9_]+\Z")
SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
TEAM_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
SOCKET_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

PERMISSION_MODES = ("acceptEdits", "bypassPermissions", "default", "dontAsk", "plan", "auto")
ALLOW_BYPASS_FLAG = "--allow-dangerously-skip-permissions"
SKIP_PERMISSIONS_FLAG = "--dangerously-skip-permissions"
#: ``restart``: ``"on-exit"`` restarts a seat whose agent exited (resumed, with a back-off); ``"no"`` does not.
RESTART_POLICIES = ("no", "on-exit")

TEAM_KEYS = frozenset(
    {
        "name",
        "tmux_socket",
        "tmux_socket_path",
        "agent",
        "kickoff",
        "shared_prompt",
        "seat",
        "origin",
        "log_max_size",
        "log_keep",
        "notify",
        "watch",
        "restart",
    }
)
SEAT_KEYS = frozenset(
    {"role", "session", "cwd", "permission_mode", "args", "kickoff", "env", "agent", "command", "host", "restart"}
)
#: The name the routing between machines gives the team's own machine (team/routekeys.py).
ORIGIN_MACHINE = "origin"
#: Machine names the routing keeps for itself: never a seat's host.
RESERVED_HOSTS = frozenset({ORIGIN_MACHINE})
#: An ssh destination (``build-2``, ``user@host``, ``ssh://user@host:port``): no space, no leading '-'.
HOST_RE = re.compile(r"[A-Za-z0-9_.@:/\[\]%+=~-]{1,255}\Z")


class PermissionClass(StrEnum):
    """The two classes Claude Code compares when it decides to hold a message."""

    BYPASS = "bypass"
    PROMPTING = "prompting"
    UNKNOWN = "cannot see"
    NONE = "none"  # not Claude Code: no SendMessage, nothing held


@frozen
class Seat:
    role: str
    session: str
    cwd: Path
    permission_mode: str | None
    args: tuple[str, ...] = ()
    kickoff: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    agent: str = "claude"  # the agent kind (fabrikito.team.agents.KINDS)
    command: tuple[str, ...] | None = None  # the program to run; None: the kind's (or the team's agent)
    host: str | None = None  # an ssh destination; None: the machine the team file is on
    restart: str | None = None  # RESTART_POLICIES; None: the team's

    @property
    def effective_mode(self) -> str | None:
        """The permission mode the seat starts in, from the key or from ``args``."""
        if self.permission_mode is not None:
            return self.permission_mode
        if SKIP_PERMISSIONS_FLAG in self.args:
            return "bypassPermissions"
        return _mode_in_args(self.args)

    @property
    def bypass_available(self) -> bool:
        """Whether the seat can be in bypass: its mode is bypassPermissions, or it has no
        ``permission_mode`` key and its args allow bypass.  A ``permission_mode`` other than
        bypassPermissions switches bypass off in the generated settings, whatever args say."""
        if self.permission_mode is not None:
            return self.permission_mode == "bypassPermissions"
        return (
            self.effective_mode == "bypassPermissions"
            or ALLOW_BYPASS_FLAG in self.args
            or SKIP_PERMISSIONS_FLAG in self.args
        )

    @property
    def permission_class(self) -> PermissionClass:
        if self.agent != "claude":
            return PermissionClass.NONE
        mode = self.effective_mode
        if mode is None:
            return PermissionClass.UNKNOWN
        if mode == "bypassPermissions":
            return PermissionClass.BYPASS
        if mode == "plan" and self.bypass_available:
            return PermissionClass.BYPASS
        return PermissionClass.PROMPTING


@frozen
class Team:
    path: Path
    name: str
    seats: tuple[Seat, ...]
    tmux_socket: str | None = None
    tmux_socket_path: str | None = None
    agent: tuple[str, ...] = DEFAULT_AGENT
    kickoff: str | None = None
    shared_prompt: Path | None = None
    origin: str | None = None  # how seats on other hosts reach this machine (an ssh destination)
    log_max_size: int = logkeys.DEFAULT_LOG_MAX_SIZE  # bytes past which messages.log is rotated
    log_keep: int = logkeys.DEFAULT_LOG_KEEP  # rotated generations kept (messages.log.1 ... .N)
    watch: WatchConfig = field(default_factory=WatchConfig)  # notify and the watcher's thresholds
    restart: str = "no"  # RESTART_POLICIES: the seats' own unless they set it

    @property
    def across_hosts(self) -> bool:
        """Whether the team has seats on other hosts: the one test of local or across hosts (``up``, ``down``,
        ``status``, ``log`` and the routes take the across-hosts path when it holds)."""
        return any(seat.host is not None for seat in self.seats)

    @property
    def base_dir(self) -> Path:
        """The directory the team file is in: ``.state/`` lives there."""
        return self.path.parent

    @property
    def state_dir(self) -> Path:
        return self.base_dir / ".state" / self.name

    @property
    def log_path(self) -> Path:
        return self.state_dir / "messages.log"

    def server(self) -> Server:
        """The team's tmux server (the default one when the file names none)."""
        from fabrikito.base.tmux import Server

        return Server(socket_name=self.tmux_socket, socket_path=self.tmux_socket_path)

    def json_header(self, version: int) -> dict[str, Any]:
        """The fields every ``--json`` envelope about this team starts with."""
        return {
            "version": version,
            "team": self.name,
            "team_file": str(self.path),
            "tmux_server": {"socket_name": self.tmux_socket, "socket_path": self.tmux_socket_path},
        }

    def seat(self, role: str) -> Seat | None:
        for seat in self.seats:
            if seat.role == role:
                return seat
        return None

    def seat_by_session(self, session: str) -> Seat | None:
        for seat in self.seats:
            if seat.session == session:
                return seat
        return None

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(seat.role for seat in self.seats)

    def kickoff_for(self, seat: Seat) -> str | None:
        return seat.kickoff if seat.kickoff is not None else self.kickoff

    def restart_for(self, seat: Seat) -> str:
        return seat.restart if seat.restart is not None else self.restart


def _mode_in_args(args: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--permission-mode" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--permission-mode="):
            return arg.partition("=")[2]
    return None


def mode_options(args: tuple[str, ...]) -> list[str]:
    """Every option in ``args`` that sets the permission mode, as written (``--permission-mode plan``)."""
    found = []
    for i, arg in enumerate(args):
        if arg == "--permission-mode":
            found.append(" ".join(args[i : i + 2]))
        elif arg.startswith("--permission-mode=") or arg == SKIP_PERMISSIONS_FLAG:
            found.append(arg)
    return found


def resolve_team_path(path: str | None) -> Path:
    """``--team`` when given, else ``$FABRIKITO_TEAM`` (set in every seat by ``up``), else ./team.toml."""
    return Path(teampath.resolve(path))


def load(path: str | Path | None = None) -> Team:
    """Read and validate a team file; raise :class:`TeamFileError` listing every problem."""
    team_path = resolve_team_path(None if path is None else str(path))
    try:
        with open(team_path, "rb") as handle:
            st = os.fstat(handle.fileno())  # before reading: a change after it gives another stamp
            raw = handle.read()
    except FileNotFoundError:
        raise TeamFileError(
            f"{team_path}: no team file there. Pass --team FILE, or run `fabrikito init` to write a "
            "starting team here and edit it."
        ) from None
    except OSError as exc:
        raise TeamFileError(
            f"{team_path}: cannot read the team file ({exc.strerror}): check its permissions."
        ) from None
    stamp = f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}:{team_path}"
    cache = team_path.parent / ".state" / f".team-toml.{team_path.name}.json"
    from fabrikito.team import loadmemo

    known = loadmemo.recall(stamp, cache)
    if isinstance(known, Team):
        return known
    from fabrikito.team import parsecache

    data = parsecache.read(cache, stamp)
    if data is None:
        import tomllib

        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise TeamFileError(f"{team_path}: the team file is not UTF-8 text: save it as UTF-8.") from None
        except tomllib.TOMLDecodeError as exc:
            raise TeamFileError(f"{team_path}: not valid TOML ({exc}): fix the syntax.") from None
        except RecursionError:
            raise TeamFileError(
                f"{team_path}: arrays or tables nested too deeply to read: a team file needs no deep nesting, fix it."
            ) from None
        parsecache.write(cache, stamp, data)
    team = parse(data, team_path)
    loadmemo.keep(stamp, cache, data, team)
    return team


def parse(data: Mapping[str, Any], team_path: Path) -> Team:
    from fabrikito.base.lookalike import skeleton

    problems: list[str] = []

    def bad(where: str, message: str) -> None:
        problems.append(f"{team_path}: {where}: {message}")

    for key in sorted(set(data) - TEAM_KEYS):
        bad("team", f"unknown key '{key}': remove it (known keys: {', '.join(sorted(TEAM_KEYS))})")

    name = data.get("name")
    if not isinstance(name, str) or not TEAM_NAME_RE.match(name):
        bad("team", f"'name' must be set to letters, digits, '_' or '-' (it names .state/<name>/), not {name!r}")
        name = "invalid"

    tmux_socket = _optional_str(data, "tmux_socket", "team", bad)
    if tmux_socket is not None and not SOCKET_NAME_RE.match(tmux_socket):
        bad("team", f"'tmux_socket' {tmux_socket!r} is not a plain socket name: use letters, digits, '.', '_', '-'")
    tmux_socket_path = _optional_str(data, "tmux_socket_path", "team", bad)
    if tmux_socket is not None and tmux_socket_path is not None:
        bad("team", "set 'tmux_socket' or 'tmux_socket_path', not both")
    if tmux_socket_path is not None and not tmux_socket_path.startswith("/"):
        bad("team", f"'tmux_socket_path' must be absolute, not {tmux_socket_path!r}")

    agent = _agent(data.get("agent"), bad, team_path.parent)
    kickoff = _kickoff(data, "team", bad)
    shared_raw = _optional_str(data, "shared_prompt", "team", bad)
    shared_prompt = team_path.parent / (shared_raw if shared_raw is not None else DEFAULT_SHARED_PROMPT)
    origin = _host(data, "team", bad, key="origin")
    log_max_size, log_keep = logkeys.parse(data, bad)
    watch = watchconf.parse(data.get("notify"), data.get("watch"), bad)
    restart = _restart(data, "team", bad) or "no"

    raw_seats = data.get("seat")
    seats: list[Seat] = []
    if not isinstance(raw_seats, list) or not raw_seats:
        bad("team", "no seats: add at least one [[seat]] table with role and session")
        raw_seats = []
    roles_seen: dict[str, tuple[int, str]] = {}  # by skeleton: two role ids that read alike are one label
    sessions_seen: dict[str, int] = {}
    for index, raw in enumerate(raw_seats, start=1):
        if not isinstance(raw, dict):
            bad(f"seat #{index}", "must be a [[seat]] table")
            continue
        seat = _seat(raw, index, team_path.parent, bad)
        if seat is None:
            continue
        first = roles_seen.get(skeleton(seat.role))
        if first is not None:
            again = "used again" if first[1] == seat.role else f"reads the same as {first[1]!r}"
            bad(
                f"seat '{seat.role}'",
                f"role id {again} (seat #{first[0]}): give each seat a role id of its own, one that its "
                "[from …] label cannot be taken for another's",
            )
        else:
            roles_seen[skeleton(seat.role)] = (index, seat.role)
        if seat.session in sessions_seen:
            bad(
                f"seat '{seat.role}'",
                f"session '{seat.session}' is used by seat #{sessions_seen[seat.session]} "
                "too: give each seat its own session name",
            )
        else:
            sessions_seen[seat.session] = index
        seats.append(seat)

    if problems:
        raise TeamFileError("invalid team file:\n  " + "\n  ".join(problems))
    return Team(
        path=team_path,
        name=str(name),
        seats=tuple(seats),
        tmux_socket=tmux_socket,
        tmux_socket_path=tmux_socket_path,
        agent=agent,
        kickoff=kickoff,
        shared_prompt=shared_prompt,
        origin=origin,
        log_max_size=log_max_size,
        log_keep=log_keep,
        watch=watch,
        restart=restart,
    )


def _seat(raw: Mapping[str, Any], index: int, base: Path, bad: Any) -> Seat | None:
    role = raw.get("role")
    where = f"seat #{index}" if not isinstance(role, str) else f"seat '{role}'"
    for key in sorted(set(raw) - SEAT_KEYS):
        bad(where, f"unknown key '{key}': remove it (known keys: {', '.join(sorted(SEAT_KEYS))})")
    ok = True
    if not isinstance(role, str) or not role:
        bad(where, "'role' is missing: set a role id of lowercase letters, digits and '_'")
        return None
    if not ROLE_RE.match(role):
        bad(
            where,
            f"role id {role!r} may hold only lowercase letters, digits and '_' (no '-'): rename it, "
            f"for example to {re.sub(r'[^a-z0-9_]', '_', role.lower())!r}",
        )
        ok = False
    elif (reserved := reserved_role(role)) is not None:
        reads = "" if reserved == role else f" reads as {reserved!r}, which"
        bad(
            where, f"role id {role!r}{reads} is reserved for fabrikito's own labels ([from {reserved}]): choose another"
        )
        ok = False
    session = raw.get("session")
    if not isinstance(session, str) or not SESSION_RE.match(session):
        bad(where, f"'session' must be a session name of letters, digits, '_' or '-' (at most 64), not {session!r}")
        ok = False
    cwd_raw = raw.get("cwd", ".")
    if not isinstance(cwd_raw, str) or not cwd_raw:
        bad(where, "'cwd' must be a directory path")
        ok = False
        cwd_raw = "."
    kind, command, kind_ok = _kind_and_command(raw, where, bad, base)
    ok = ok and kind_ok
    mode = raw.get("permission_mode")
    if mode is not None and kind != "claude":
        bad(
            where,
            f"permission_mode is a Claude Code setting and this seat runs {kind}: remove it (set the agent's "
            "approvals in its own configuration, or with its flags in args)",
        )
        ok = False
    elif mode is not None and mode not in PERMISSION_MODES:
        bad(
            where,
            f"permission_mode {mode!r} is not one of {', '.join(PERMISSION_MODES)}: fix it, "
            "or remove it to let the seat inherit its mode from its settings files",
        )
        ok = False
    args = raw.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        bad(where, "'args' must be a list of strings")
        ok = False
        args = []
    if mode is not None and (_mode_in_args(tuple(args)) is not None or SKIP_PERMISSIONS_FLAG in args):
        bad(where, "the permission mode is set twice (permission_mode and in args): keep one")
        ok = False
    modes = mode_options(tuple(args)) if kind == "claude" else []
    if len(modes) > 1:
        bad(
            where,
            f"args set the permission mode {len(modes)} times ({'; '.join(modes)}): keep one, so that the class "
            "check shows (and an inbox holds by) is the mode the seat runs in",
        )
        ok = False
    for arg in args if kind == "claude" else ():
        reserved = reserved_arg(arg)
        if reserved is not None:
            sets = (
                "chooses the seat's conversation itself (up --resume)"
                if reserved not in ("--name", "--settings", "-n")
                else f"sets {reserved} from the team file"
            )
            bad(where, f"args may not hold {arg!r} ({reserved}): fabrikito {sets}")
            ok = False
    kickoff = _kickoff(raw, where, bad)
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and ENV_NAME_RE.match(k) and isinstance(v, str) for k, v in env.items()
    ):
        bad(where, "'env' must be a table of NAME = \"value\" strings")
        ok = False
        env = {}
    elif {"TEAM_ROLE", "FABRIKITO_TEAM", "FABRIKITO"} & set(env):
        bad(where, "'env' may not set TEAM_ROLE, FABRIKITO_TEAM or FABRIKITO: fabrikito sets them")
        ok = False
    host = _host(raw, where, bad)
    restart = _restart(raw, where, bad)
    if not ok or not isinstance(session, str):
        return None
    cwd = Path(cwd_raw).expanduser()
    if not cwd.is_absolute():
        cwd = base / cwd
    return Seat(
        role=role,
        session=session,
        cwd=cwd,
        permission_mode=mode if isinstance(mode, str) else None,
        args=tuple(args),
        kickoff=kickoff,
        env=dict(env),
        agent=kind,
        command=command,
        host=host,
        restart=restart,
    )


def _kind_and_command(
    raw: Mapping[str, Any], where: str, bad: Any, base: Path
) -> tuple[str, tuple[str, ...] | None, bool]:
    """The seat's ``agent`` (its kind) and ``command`` (its program), checked."""
    from fabrikito.team.agents import DEFAULT_KIND, KINDS

    ok = True
    kind = raw.get("agent", DEFAULT_KIND)
    if not isinstance(kind, str) or kind not in KINDS:
        hint = ""
        if isinstance(kind, (str, list)) and kind and (not isinstance(kind, str) or "/" in kind or " " in kind):
            hint = f"; to name the program it runs, set command = {kind!r}"
        bad(where, f"agent {kind!r} is not an agent kind: set it to one of {', '.join(KINDS)}{hint}")
        kind, ok = DEFAULT_KIND, False
    command = raw.get("command")
    if command is None:
        return kind, None, ok
    if isinstance(command, str) and command.strip() and command == command.strip():
        if len(command.split()) == 1 or os.path.exists(teampath.program_path(command, base)):
            return kind, (teampath.program_path(command, base),), ok
        bad(
            where,
            f"'command' {command!r} reads like a shell line, and it is run as one program: write it as a "
            f"list, {command.split()!r}",
        )
        return kind, None, False
    if isinstance(command, list) and command and all(isinstance(c, str) and c for c in command) and command[0].strip():
        return kind, (teampath.program_path(command[0], base), *command[1:]), ok
    bad(
        where,
        "'command' must be the program to run: a path or a name on PATH (a string, not a shell line), or a "
        'list of the program and its first arguments, such as ["npx", "@openai/codex"]',
    )
    return kind, None, False


def _optional_str(data: Mapping[str, Any], key: str, where: str, bad: Any) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        bad(where, f"'{key}' must be a non-empty string")
        return None
    return value


def _host(data: Mapping[str, Any], where: str, bad: Any, *, key: str = "host") -> str | None:
    value = _optional_str(data, key, where, bad)
    if value is not None and (not HOST_RE.match(value) or value.startswith("-")):
        bad(where, f"'{key}' {value!r} is not an ssh destination: write it as ssh takes it (build-2, user@host)")
        return None
    if key == "host" and value is not None and value.lower() in RESERVED_HOSTS:
        bad(
            where,
            f"host {value!r} is the name the routing between machines gives the team's own machine: a seat on "
            "this machine has no host key; for another machine, use another name for it (an ~/.ssh/config alias)",
        )
        return None
    return value


def _restart(data: Mapping[str, Any], where: str, bad: Any) -> str | None:
    value = data.get("restart")
    if value is None or value in RESTART_POLICIES:
        return value if isinstance(value, str) else None
    bad(where, f"'restart' must be one of {', '.join(repr(p) for p in RESTART_POLICIES)}, not {value!r}")
    return None


def _kickoff(data: Mapping[str, Any], where: str, bad: Any) -> str | None:
    kickoff = _optional_str(data, "kickoff", where, bad)
    if kickoff is None:
        return None
    if not kickoff.strip():
        bad(where, "'kickoff' is blank: remove it or write the first message")
        return None
    from fabrikito.base import lookalike

    try:
        found = lookalike.label_in(kickoff)
    except lookalike.DataMissing as exc:
        bad(where, f"the kickoff cannot be checked for a label of its own: {exc}")
        return None
    if found is not None:
        bad(
            where,
            f"the kickoff holds a label {found!r} (read as a reader sees it: look-alike letters and brackets, and "
            "invisible characters, make no difference): remove it; fabrikito labels every kickoff [from launcher] "
            "itself, and a label of its own would let it pass for another sender",
        )
        return None
    return kickoff


def _agent(value: Any, bad: Any, base: Path) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_AGENT
    if isinstance(value, str) and value.strip():
        return (teampath.program_path(value, base),)
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return (teampath.program_path(value[0], base), *value[1:])
    bad("team", "'agent' must be a command: a string, or a list of strings")
    return DEFAULT_AGENT
