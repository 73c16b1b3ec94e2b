"""Each seat's conversation: fixed when ``up`` starts it, resumed when it comes back.

A seat's *conversation record* is ``.state/<team>/conversations/<role>.json``
(0600, in a 0700 directory): the conversation's id, the agent and its release,
when it started, how often it was restarted, and whether the seat is meant to be
running (``up`` started it) or was stopped on purpose (``down``).  It also names
the seat it belongs to (team, role, folder, agent), so a record copied or edited
to point at another seat's conversation is refused, never resumed.

Claude Code is started with ``--session-id <uuid>`` (a fresh id fabrikito picks,
then checks against the ``sessionId`` of its session registry) and comes back with
``--resume <id>``.  Before resuming, Claude Code's own transcript of that id is
read: it must exist and must have been held in this seat's folder under this
seat's session name (measured: Claude Code 2.1.316 resumes an id from any folder,
so this check is fabrikito's).  Codex CLI and Gemini CLI seats start fresh and
say so (docs/decisions/0032-resume-other-agents.md).

Whatever cannot be resumed (no record, a damaged one, another seat's, a
different release, a transcript that is gone) starts fresh with a new id, and
:class:`Plan` says why, for ``up``'s output and an event.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from fabrikito.base import daemons, statedir
from fabrikito.base.errors import FabrikitoError
from fabrikito.base.values import frozen, replace
from fabrikito.team.teamfile import Seat, Team

RECORD_VERSION = 1
RECORDS_DIR = "conversations"
UP_LOCK = "up.lock"
RUNNING, STOPPED = "running", "stopped"
RESUME, FRESH = "resume", "fresh"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
TRANSCRIPT_HEAD = 1 << 18  # the transcript's first lines name its folder and session


class TeamStarting(FabrikitoError):
    """Another ``up`` (or ``restart``, or an automatic restart) is starting this team's seats."""


@frozen
class Conversation:
    team: str
    role: str
    folder: str
    agent: str
    release: str  # "" when unknown
    id: str  # "" when the agent cannot have it fixed in advance
    started: float
    restarts: int
    state: str  # RUNNING or STOPPED
    restarted: float = 0.0


@frozen
class Plan:
    """How ``up`` starts one seat: resuming conversation ``id``, or fresh with ``id`` (``""``: the agent's own)."""

    mode: str
    id: str
    note: str  # why it starts fresh when a resume was wanted ("" when there is nothing to say)
    restarts: int
    release: str
    started: float

    @property
    def resumed(self) -> bool:
        return self.mode == RESUME

    def claude_args(self) -> list[str]:
        if not self.id:
            return []
        return ["--resume", self.id] if self.resumed else ["--session-id", self.id]


def records_dir(team: Team) -> Path:
    return team.state_dir / RECORDS_DIR


def record_path(team: Team, role: str) -> Path:
    return records_dir(team) / f"{role}.json"


def _identity(team: Team, seat: Seat) -> tuple[str, str, str, str]:
    return (team.name, seat.role, str(seat.cwd), seat.agent)


def read_record(team: Team, role: str) -> tuple[Conversation | None, str]:
    """The seat's record, or ``None`` with why it cannot be used (``""``: there is none)."""
    path = record_path(team, role)
    try:
        raw = statedir.read_plain(path)
    except (OSError, FabrikitoError) as exc:
        return None, f"its conversation record {path} cannot be read ({exc})"
    if raw is None:
        return None, ""
    try:
        data = json.loads(raw)
        if data.get("version") != RECORD_VERSION:
            raise ValueError(f"version {data.get('version')!r}, not {RECORD_VERSION}")
        record = Conversation(
            team=_text(data, "team"),
            role=_text(data, "role"),
            folder=_text(data, "folder"),
            agent=_text(data, "agent"),
            release=_text(data, "release"),
            id=_text(data, "id"),
            started=float(data["started"]),
            restarts=int(data["restarts"]),
            state=_text(data, "state"),
            restarted=float(data.get("restarted", 0.0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"its conversation record {path} is damaged or half-written ({exc})"
    if record.state not in (RUNNING, STOPPED):
        return None, f"its conversation record {path} is damaged (state {record.state!r})"
    return record, ""


def _text(data: dict[str, object], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def orphans(team: Team) -> list[str]:
    """A line for each record whose seat is no longer in the team file (the record is left as it is)."""
    try:
        names = sorted(os.listdir(records_dir(team)))
    except OSError:
        return []
    roles = set(team.roles)
    return [
        f"{name[:-5]}: no such seat in the team file any more; its conversation record {records_dir(team) / name} "
        "is left as it is (remove it if the seat is gone for good)"
        for name in names
        if name.endswith(".json") and not name.startswith(".") and name[:-5] not in roles
    ]


def write_record(team: Team, record: Conversation) -> None:
    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(records_dir(team))
    fields = ("team", "role", "folder", "agent", "release", "id", "started", "restarts", "state", "restarted")
    data = {"version": RECORD_VERSION, **{name: getattr(record, name) for name in fields}}
    statedir.write_atomic(record_path(team, record.role), json.dumps(data).encode())


def mark(team: Team, role: str, state: str) -> None:
    """Set the record's state (``down``: stopped on purpose); a missing or damaged record is left alone."""
    record, _ = read_record(team, role)
    if record is not None and record.state != state:
        with contextlib.suppress(OSError, FabrikitoError):
            write_record(team, replace(record, state=state))


def started(team: Team, seat: Seat, plan: Plan, *, now: float | None = None) -> None:
    """Record the conversation a seat was just started with (``up``, after its pane is there)."""
    at = time.time() if now is None else now
    record = Conversation(
        team=team.name,
        role=seat.role,
        folder=str(seat.cwd),
        agent=seat.agent,
        release=plan.release,
        id=plan.id,
        started=plan.started if plan.resumed else at,
        restarts=plan.restarts,
        state=RUNNING,
        restarted=at if plan.resumed else 0.0,
    )
    with contextlib.suppress(OSError, FabrikitoError):
        write_record(team, record)


def confirm_id(team: Team, role: str, registry_id: object) -> str:
    """After the seat's box is up: the id its registry names against the one fixed in advance.
    Returns a note when they differ (and records the registry's), else ``""``."""
    record, _ = read_record(team, role)
    if record is None or not isinstance(registry_id, str) or not registry_id or registry_id == record.id:
        return ""
    with contextlib.suppress(OSError, FabrikitoError):
        write_record(team, replace(record, id=registry_id))
    return f"its session registry names conversation {registry_id}, not {record.id or 'none'}: recorded its own"


# -- what up does for one seat ----------------------------------------------------------


def plan(team: Team, seat: Seat, *, resume: bool | None, now: float | None = None) -> Plan:
    """``resume``: ``True`` (``up --resume``, ``restart``) resumes any record of the seat's own;
    ``None`` (plain ``up``) only one whose seat was running and is gone (a crash, a reboot)."""
    import uuid

    at = time.time() if now is None else now
    release = current_release(team, seat) or ""
    fresh = Plan(FRESH, str(uuid.uuid4()) if seat.agent == "claude" else "", "", 0, release, at)
    record, problem = read_record(team, seat.role)
    if problem:
        return replace(fresh, note=f"{problem}: started fresh (remove the file if it stays so)")
    if record is None or not (resume or (resume is None and record.state == RUNNING)):
        return fresh
    why = refusal(team, seat, record, release)
    if why:
        return replace(fresh, note=f"{why}: started fresh")
    return Plan(RESUME, record.id, "", record.restarts + 1, release, record.started)


def refusal(team: Team, seat: Seat, record: Conversation, release: str) -> str:
    """Why ``record`` cannot be resumed for ``seat`` (``""``: it can)."""
    mine = _identity(team, seat)
    theirs = (record.team, record.role, record.folder, record.agent)
    if theirs != mine:
        names = ("team", "role", "folder", "agent")
        diff = ", ".join(f"{n} {t!r} (this seat: {m!r})" for n, t, m in zip(names, theirs, mine, strict=True) if t != m)
        return f"its conversation record names another seat ({diff}): refused"
    if seat.agent != "claude":
        from fabrikito.team.agents import kind

        return f"{kind(seat.agent).display} conversations are not resumed by fabrikito (measured offline)"
    if not UUID_RE.match(record.id):
        return f"its conversation record holds no conversation id ({record.id!r})"
    if record.release and release and record.release != release:
        return f"its conversation was held by Claude Code {record.release}, and the seat now runs {release}"
    for other in team.seats:
        if other.role != seat.role:
            theirs_record, _ = read_record(team, other.role)
            if theirs_record is not None and theirs_record.id == record.id:
                return f"conversation {record.id} is recorded for seat {other.role} too: refused"
    return transcript_refusal(seat, record.id)


def transcript_refusal(seat: Seat, conversation: str) -> str:
    """Claude Code's own transcript of ``conversation``: it must be there, held in this seat's folder
    under this seat's session name; ``""`` when it is, else why not."""
    from fabrikito.base import procs

    environ = {k: v for k, v in os.environ.items() if k in ("HOME", "CLAUDE_CONFIG_DIR")}
    environ.update({k: v for k, v in seat.env.items() if k in ("HOME", "CLAUDE_CONFIG_DIR")})
    config = procs.claude_config_dir(environ)
    if config is None:
        return "no HOME to find Claude Code's conversations in"
    found = sorted(Path(config, "projects").glob(f"*/{conversation}.jsonl"))
    if not found:
        return f"Claude Code holds no conversation {conversation} in {config}/projects (gone, or never begun)"
    folder, name = _transcript_head(found[0])
    if folder is None:  # measured: killed before its first turn was written, only the title lines are there
        return f"conversation {conversation} holds no turn yet (the seat stopped before its first one was kept)"
    if folder != str(seat.cwd):
        return f"conversation {conversation} was held in {folder}, not {seat.cwd}: refused"
    if name is not None and name != seat.session:
        return f"conversation {conversation} belongs to session {name!r}, not {seat.session!r}: refused"
    return ""


def _transcript_head(path: Path) -> tuple[str | None, str | None]:
    """The folder (``cwd``) and session name (``agentName``) the transcript's first lines give."""
    try:
        with open(path, "rb") as f:
            head = f.read(TRANSCRIPT_HEAD)
    except OSError:
        return None, None
    folder = name = None
    for line in head.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if name is None and entry.get("type") == "agent-name" and isinstance(entry.get("agentName"), str):
            name = entry["agentName"]
        if folder is None and isinstance(entry.get("cwd"), str):
            folder = entry["cwd"]
        if folder is not None and name is not None:
            break
    return folder, name


def current_release(team: Team, seat: Seat) -> str | None:
    """The release of the agent the seat's command runs, from the npm package its program is in."""
    import shutil

    from fabrikito.team.agents import agent_in_package, command_for

    program = shutil.which(command_for(team, seat)[0])
    if program is None:
        return None
    found = agent_in_package(Path(os.path.realpath(program)))
    return found[1] if found is not None else None


def restart_notice(when: float) -> str:
    """The one line a resumed seat gets instead of its kickoff (labelled ``[from launcher]`` by say)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))
    return (
        f"You were restarted at {stamp} and your conversation was resumed. Work may have moved on while you "
        "were down: re-read your notes, your task and your messages before you act."
    )


# -- one start at a time -------------------------------------------------------------------


@contextlib.contextmanager
def starting(team: Team) -> Iterator[None]:
    """Held while ``up``, ``restart`` or an automatic restart starts the team's seats: a second one
    raises :class:`TeamStarting` at once instead of starting the same seats twice."""
    statedir.ensure_state_dir(team.base_dir, team.name)
    path = team.state_dir / UP_LOCK
    fd = daemons.hold_lock(path)
    if fd is None:
        raise TeamStarting(
            f"team {team.name} is starting: another `fabrikito up` (or restart) is starting its seats now. "
            "Wait for it to finish, then run `fabrikito status`",
            exit_code=1,
        )
    try:
        yield
    finally:
        os.close(fd)
