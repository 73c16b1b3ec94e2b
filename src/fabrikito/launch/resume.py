"""Each seat's conversation: fixed when ``up`` starts it, resumed when it comes back.

A seat's *conversation record* is ``.state/<team>/conversations/<role>.json``
(0600, in a 0700 directory): the conversation's id, the agent and its release,
when it started, how often it was restarted, and whether the seat is meant to be
running (``up`` started it) or was stopped on purpose (``down``).  It also names
the seat it belongs to (team, role, folder, agent), so a record copied or edited
to point at another seat's conversation is refused, never resumed.

How an agent's conversation is fixed at start and resumed is data of its kind
(``team/agents.py``: ``Conversations``): Claude Code and Gemini CLI are started with
``--session-id <uuid>`` (a fresh id fabrikito picks; Claude Code's is checked against
the ``sessionId`` of its session registry) and come back with ``--resume <id>``;
Codex CLI picks its own id, which is read from its session files once the first turn
is sent (after the kickoff, or at the latest when the seat is to be resumed), and comes
back with ``codex … resume <id>``.  Before resuming, the agent's own record of that id
is read (``launch/transcripts.py``): it must exist and must have been held in this
seat's folder (measured: Claude Code 2.1.316 resumes an id from any folder, so this
check is fabrikito's).

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

from fabrikito.base import daemons, jsonfile, statedir
from fabrikito.base.errors import FabrikitoError
from fabrikito.base.values import frozen, replace
from fabrikito.team.teamfile import Seat, Team

RECORD_VERSION = 1
RECORDS_DIR = "conversations"
UP_LOCK = "up.lock"
RUNNING, STOPPED = "running", "stopped"
RESUME, FRESH = "resume", "fresh"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
CODEX_ID_WAIT = 5.0  # seconds up waits, after the kickoff, for Codex CLI to write its session file


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

    def agent_args(self, agent: str) -> list[str]:
        """The agent's own options for this plan (``[]`` when it has none, or no id is known yet)."""
        from fabrikito.team.agents import kind

        given = kind(agent).conversations
        if not self.id or given is None:
            return []
        return [arg.replace("{id}", self.id) for arg in (given.resume if self.resumed else given.fixed)]


def records_dir(team: Team) -> Path:
    return team.state_dir / RECORDS_DIR


def record_path(team: Team, role: str) -> Path:
    return records_dir(team) / _record_name(role)


def _record_name(role: str) -> str:
    return f"{role}.json"


def _identity(team: Team, seat: Seat) -> tuple[str, str, str, str]:
    return (team.name, seat.role, str(seat.cwd), seat.agent)


def read_record(team: Team, role: str) -> tuple[Conversation | None, str]:
    """The seat's record, or ``None`` with why it cannot be used (``""``: there is none)."""
    return _read_at(str(record_path(team, role)))


def read_records(team: Team) -> dict[str, Conversation]:
    """Every seat's usable record, by role (``status`` of 50 seats: the folder's path made once)."""
    folder = str(records_dir(team))
    found = {}
    for role in team.roles:
        record, _ = _read_at(os.path.join(folder, _record_name(role)))
        if record is not None:
            found[role] = record
    return found


def _read_at(path: str) -> tuple[Conversation | None, str]:
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
            team=jsonfile.string(data, "team"),
            role=jsonfile.string(data, "role"),
            folder=jsonfile.string(data, "folder"),
            agent=jsonfile.string(data, "agent"),
            release=jsonfile.string(data, "release"),
            id=jsonfile.string(data, "id"),
            started=float(data["started"]),
            restarts=int(data["restarts"]),
            state=jsonfile.string(data, "state"),
            restarted=float(data.get("restarted", 0.0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"its conversation record {path} is damaged or half-written ({exc})"
    if record.state not in (RUNNING, STOPPED):
        return None, f"its conversation record {path} is damaged (state {record.state!r})"
    return record, ""


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

    from fabrikito.team.agents import kind

    at = time.time() if now is None else now
    release = current_release(team, seat) or ""
    given = kind(seat.agent).conversations
    fresh = Plan(FRESH, str(uuid.uuid4()) if given is not None and given.fixed else "", "", 0, release, at)
    record, problem = read_record(team, seat.role)
    if problem:
        return replace(fresh, note=f"{problem}: started fresh (remove the file if it stays so)")
    if record is None or not (resume or (resume is None and record.state == RUNNING)):
        return fresh
    if not record.id and given is not None and not given.fixed and _identity(team, seat) == _record_identity(record):
        found, why = learn_id(team, seat, record)
        if not found:
            return replace(fresh, note=f"{why}: started fresh")
        record = replace(record, id=found)
    why = refusal(team, seat, record, release)
    if why:
        return replace(fresh, note=f"{why}: started fresh")
    return Plan(RESUME, record.id, "", record.restarts + 1, release, record.started)


def refusal(team: Team, seat: Seat, record: Conversation, release: str) -> str:
    """Why ``record`` cannot be resumed for ``seat`` (``""``: it can)."""
    from fabrikito.launch import transcripts
    from fabrikito.team.agents import kind

    mine, theirs = _identity(team, seat), _record_identity(record)
    if theirs != mine:
        names = ("team", "role", "folder", "agent")
        diff = ", ".join(f"{n} {t!r} (this seat: {m!r})" for n, t, m in zip(names, theirs, mine, strict=True) if t != m)
        return f"its conversation record names another seat ({diff}): refused"
    agent = kind(seat.agent)
    if agent.conversations is None:
        return f"{agent.display} conversations are not resumed by fabrikito"
    if not UUID_RE.match(record.id):
        return f"its conversation record holds no conversation id ({record.id!r})"
    if record.release and release and record.release != release:
        return f"its conversation was held by {agent.display} {record.release}, and the seat now runs {release}"
    for other in team.seats:
        if other.role != seat.role:
            theirs_record, _ = read_record(team, other.role)
            if theirs_record is not None and theirs_record.id == record.id:
                return f"conversation {record.id} is recorded for seat {other.role} too: refused"
    return transcripts.refusal(seat, record.id)


def _record_identity(record: Conversation) -> tuple[str, str, str, str]:
    return (record.team, record.role, record.folder, record.agent)


def learn_id(team: Team, seat: Seat, record: Conversation | None = None) -> tuple[str, str]:
    """A Codex CLI seat's conversation id, read from its session files (the agent picks it) and recorded:
    ``(id, "")``, or ``("", why not)``.  ``record``: the seat's, when already read."""
    from fabrikito.launch import transcripts

    if record is None:
        record, _ = read_record(team, seat.role)
    if record is None:
        return "", "no conversation record"
    if record.id:
        return record.id, ""
    taken = [r.id for r in (read_record(team, o.role)[0] for o in team.seats if o.role != seat.role) if r and r.id]
    found, why = transcripts.codex_conversation(seat, record.started, taken)
    if found:
        with contextlib.suppress(OSError, FabrikitoError):
            write_record(team, replace(record, id=found))
    return found, why


def await_id(team: Team, seat: Seat, *, timeout: float = CODEX_ID_WAIT) -> tuple[str, str]:
    """After a seat's first turn was sent: its conversation id once its agent has written it (Codex CLI picks
    its own; for the others it was fixed at start), within ``timeout`` seconds."""
    from fabrikito.team.agents import kind

    given = kind(seat.agent).conversations
    if given is None or given.fixed:
        return "", ""
    deadline = time.monotonic() + timeout
    while True:
        found, why = learn_id(team, seat)
        if found or time.monotonic() >= deadline:
            return found, why
        time.sleep(0.1)


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
