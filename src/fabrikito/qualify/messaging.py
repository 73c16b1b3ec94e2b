"""What a release must do besides drawing its screens: the registry, the hook, the inbox, a labelled message.

Run on two seats (``a`` and ``b``) of one :class:`~fabrikito.qualify.capture.Job`
with fabrikito's own SendMessage hook, as ``up`` sets it, for a small team
file written beside them.  Each check names what differed; an empty list
means the release does everything fabrikito reads of it the way the
dialect expects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fabrikito.base.errors import FabrikitoError
from fabrikito.delivery import engine, seatpane
from fabrikito.inbox import client, sessions
from fabrikito.log import hook, msglog
from fabrikito.offline import seatkit
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import LiveSeat
from fabrikito.offline.standin import StandInTimeoutError
from fabrikito.qualify.capture import Job
from fabrikito.screen import Recogniser
from fabrikito.team import teamfile

TEAM = "qualify"
SENDER = "qualify"
REGISTRY_STATUSES = frozenset({"idle", "busy", "waiting"})


def _team_file(job: Job) -> Path:
    folder = job.root / "team"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "team.toml"
    lines = [
        f'name = "{TEAM}"',
        f'tmux_socket = "{job.server.socket_name}"',
        f'agent = "{job.binary}"',
    ]
    for role in ("a", "b"):
        cwd = job.root / "w" / f"seat-{role}"
        lines += ["", "[[seat]]", f'role = "{role}"', f'session = "seat-{role}"', f'cwd = "{cwd}"']
        lines.append('permission_mode = "acceptEdits"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _hook_settings(team_path: Path, role: str) -> dict[str, object]:
    command = hook.command_line(str(team_path), role)
    entry = [{"matcher": "SendMessage", "hooks": [{"type": "command", "command": command}]}]
    return {"hooks": {"PostToolUse": entry, "PostToolUseFailure": entry}}


def _log_rows(team: teamfile.Team) -> list[list[str]]:
    """Every line of the team's message log, across its rotated generations, oldest first."""
    from fabrikito.base import rotate
    from fabrikito.base.errors import StateFileError

    try:
        text = rotate.read_all(team.state_dir / "messages.log").decode("utf-8")
    except (OSError, StateFileError):
        return []
    return [line.split("\t")[1:] for line in text.splitlines() if line]


def _wait(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def check_registry(job: Job, seat: LiveSeat, release: str) -> list[str]:
    """The seat's registry entry is found, alive, named, with a socket and a known status."""
    entries = sessions.list_sessions({"HOME": str(job.home)})
    mine = [e for e in entries if e.pid == seat.pid]
    if not mine:
        return [f"no registry entry for pid {seat.pid} in {job.home}/.claude/sessions"]
    entry = mine[0]
    problems = []
    if entry.name != seat.session:
        problems.append(f"registry name {entry.name!r}, expected {seat.session!r}")
    if not entry.socket_path:
        problems.append("registry entry has no messagingSocketPath")
    if entry.status not in REGISTRY_STATUSES:
        problems.append(f"registry status {entry.status!r} is not one of {sorted(REGISTRY_STATUSES)}")
    if entry.stale:
        problems.append(f"registry entry read as stale: {entry.describe()}")
    raw = seatkit.read_registry(seat.registry) or {}
    if raw.get("version") != release:
        problems.append(f"registry version {raw.get('version')!r}, expected {release!r}")
    if entry.key_path() is None or not Path(str(entry.key_path())).exists():
        problems.append("no peer key file beside the registry entry")
    return problems


def check_hook(job: Job, team: teamfile.Team, a: LiveSeat) -> list[str]:
    """A SendMessage from ``a`` to ``b`` reaches ``b`` and leaves a ``sent`` line through the hook."""
    text = "hello b, from a (qualify)"
    job.standin.on("qualify: message b", Reply(tool="SendMessage", input={"to": "seat-b", "message": text}), seat="a")
    since = job.standin.mark()
    seatkit.submit(job.server, a, "qualify: message b")
    try:
        job.standin.wait_for_request("b", text, 30, since=since)
    except StandInTimeoutError:
        return ["a SendMessage from seat a never reached seat b as a turn"]
    want = ["a", "b", msglog.Outcome.SENT.value, text]
    if not _wait(lambda: want in _log_rows(team), 15):
        return [f"the hook wrote no line {want} (log: {_log_rows(team)})"]
    return []


def check_inbox(job: Job, b: LiveSeat) -> list[str]:
    """A post to ``b``'s inbox socket from outside arrives as a turn."""
    text = "posted to the inbox by qualify"
    since = job.standin.mark()
    try:
        client.post(b.socket_path, client.build_payload(text, b.peer_token()))
        job.standin.wait_for_request("b", text, 30, since=since)
    except (FabrikitoError, OSError) as exc:
        return [f"the inbox post failed: {exc}"]
    except StandInTimeoutError:
        return ["a post to the inbox socket never arrived as a turn"]
    return []


def check_round_trip(job: Job, team: teamfile.Team, a: LiveSeat, recogniser: Recogniser) -> list[str]:
    """``say``'s engine delivers a labelled message, and the model gets exactly label + text."""
    text = "a labelled message from qualify"
    ctx = engine.Context(team, job.server, seatpane.list_panes(job.server), recogniser=recogniser)
    seat = team.seat(a.role)
    if seat is None:
        return [f"the team file lost its seat {a.role!r}"]
    since = job.standin.mark()
    result = engine.deliver(ctx, seat, SENDER, text)
    if result.result is not engine.Result.DELIVERED:
        return [f"say's engine did not deliver ({result.result.value}): {result.reason}"]
    try:
        request = job.standin.wait_for_request("a", text, 30, since=since)
    except StandInTimeoutError:
        return ["the delivered message never reached the model"]
    expected = engine.label_for(SENDER) + text
    if request.last_user_text.strip() != expected:
        return [f"the model got {request.last_user_text!r}, expected {expected!r}"]
    return []


@dataclass(frozen=True, slots=True)
class Checked:
    problems: list[str]
    exe: str | None  # the program seat a ran, as fabrikito finds it in its pane (what a local record names)


def run(job: Job, release: str, recogniser: Recogniser) -> Checked:
    """All the messaging checks on a fresh pair of seats; every problem found."""
    team_path = _team_file(job)
    starting = [job.seat(role, settings=_hook_settings(team_path, role), wait=False) for role in ("a", "b")]
    a, b = (seatkit.wait_ready(job.server, s) for s in starting)
    agent = seatpane.foreground_agent(a.pid)
    problems = [] if agent is not None else [f"fabrikito does not find Claude Code in seat a's pane (pid {a.pid})"]
    team = teamfile.load(team_path)
    problems += [*check_registry(job, a, release), *check_hook(job, team, a), *check_inbox(job, b)]
    problems += check_round_trip(job, team, a, recogniser)
    return Checked(problems, agent.exe if agent is not None else None)
