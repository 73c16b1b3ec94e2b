"""``status``: the team at a glance, read without typing into any pane.

One row per seat: role, session, pane, state, permission class, and the times
of the last message to and from it in ``messages.log``; then the spec's
``NOTICE <role>`` lines for seats whose box refused three sends or more.

What it reads, and what each costs:

* the panes of the team's tmux server: **one** ``list-panes -a`` call;
* the screens of the seats that run Claude Code: **one** more tmux call, a
  chain of ``display-message`` and ``capture-pane`` for every pane at once
  (read-only: nothing is typed, no key is sent); ``--no-screens`` skips it;
* the process table (``/proc``): which program is in the foreground of each
  pane's terminal, and that process's environment (to find its
  ``${CLAUDE_CONFIG_DIR:-$HOME/.claude}``);
* Claude Code's session registry, ``<config>/sessions/<pid>.json``:
  ``status`` idle / busy / waiting and ``waitingFor``;
* the tail of ``messages.log``, read backwards only as far as needed.

A state is worked out from the registry first (it is what Claude Code itself
says), and the screen refines it: an idle seat whose box holds text shows
``box holds text``; a seat with no registry entry yet shows a startup dialog
(the bypass acceptance warning, the trust prompt) as ``waiting at a dialog``,
anything else as ``starting``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path

from fabrikito.base import durations, procs
from fabrikito.base.tmux import Pending, Server
from fabrikito.base.values import frozen
from fabrikito.delivery import queueview, seatpane
from fabrikito.log import msglog
from fabrikito.screen import BoxReading, ScreenState, readings, recogniser_for
from fabrikito.screen.startup import startup_dialog
from fabrikito.team.teamfile import Seat, Team

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any

JSON_VERSION = 1
CLAUDE = "claude"


class SeatState(StrEnum):
    DOWN = "down"
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    WAITING = "waiting at a dialog"
    BOX_TEXT = "box holds text"
    EXITED = "exited"
    NOT_AGENT = "not running claude"
    UNREACHABLE = "unreachable"  # on another host that did not answer
    UNKNOWN = "unknown"


@frozen
class SeatStatus:
    role: str
    session: str
    pane: str | None
    state: SeatState
    detail: str  # what the dialog is, why unknown, the registry's waitingFor...
    permission_class: str
    last_to: str | None  # local time of the last log line to this seat
    last_from: str | None  # local time of the last log line from this seat
    pid: int | None = None  # the agent's pid, when one runs
    release: str | None = None  # the agent's release, when one runs and it can be told
    qualified: bool | None = None  # whether fabrikito recognises that release (None: no agent)
    host: str | None = None  # the ssh destination of the seat's host (None: this machine)
    state_since: float | None = None  # when the registry's status last changed (statusUpdatedAt), when known
    conversation: str | None = None  # the id of the conversation up started or resumed (None: no record)
    restarts: int = 0  # how often it was started again resuming that conversation


@frozen
class WatcherLine:
    running: bool
    pid: int | None
    stale: float | None  # seconds since its last round, when that is long enough to be worth saying


@frozen
class Notice:
    role: str
    count: int
    last: float


@frozen
class Status:
    team: Team
    seats: tuple[SeatStatus, ...]
    notices: tuple[Notice, ...]
    tmux_calls: int
    server_running: bool
    queue: queueview.Overview | None = None  # the delivery worker and what waits (say --queue)
    screens: Mapping[str, str] | None = None  # role -> its screen as plain text (the watcher asks for them)
    watcher: WatcherLine | None = None  # whether the team's watcher runs (fabrikito.launch.watcherproc)


# -- reading panes ---------------------------------------------------------------


def plain_text(ansi: str) -> str:
    """A screen captured with escapes, as plain text."""
    from fabrikito.screen.ansi import plain

    return plain(ansi)


# -- the registry --------------------------------------------------------------------


# -- the log --------------------------------------------------------------------------


def last_message_times(log_path: Path, roles: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
    """For each role, the times of the last log line to it and from it: ``(to, from)``.

    The log is read backwards a block at a time, from ``messages.log`` into its
    rotated generations, and only until every role has both, so a long log
    costs what its recent lines cost.  A ``say all`` line
    is a message to every seat but its sender.  Lines that do not parse are
    skipped.
    """
    from fabrikito.base import rotate
    from fabrikito.base.errors import FabrikitoError
    from fabrikito.log import seek

    wanted = set(roles)
    to: dict[str, str] = {}
    sent: dict[str, str] = {}
    try:
        fds = rotate.open_generations(log_path)  # messages.log last; the rotated ones before it
    except (OSError, FabrikitoError):
        return {role: (None, None) for role in roles}
    try:
        for fd in reversed(fds):
            for _offset, raw in seek.lines_backward(fd):
                if len(to) == len(wanted) and len(sent) == len(wanted):
                    break
                if raw.endswith(b"\n"):
                    _note_line(raw, wanted, to, sent)
    finally:
        rotate.close_all(fds)
    return {role: (to.get(role), sent.get(role)) for role in roles}


def _note_line(line: bytes, wanted: set[str], to: dict[str, str], sent: dict[str, str]) -> None:
    record = msglog.parse_line(line)
    if isinstance(record, msglog.Foreign):
        return
    sender = record.sender.decode("utf-8", "replace")
    recipient = record.recipient.decode("utf-8", "replace")
    if sender in wanted:
        sent.setdefault(sender, record.time)
    if recipient == "all":
        for role in wanted:
            if role != sender:
                to.setdefault(role, record.time)
    elif recipient in wanted:
        to.setdefault(recipient, record.time)


# -- putting it together --------------------------------------------------------------


def collect(
    team: Team,
    *,
    server: Server | None = None,
    screens: bool = True,
    listing: Pending | None = None,
    keep_screens: bool = False,
) -> Status:
    """Everything ``status`` shows, with at most two tmux calls (up to about 55 seats; one more per 55).

    Each call works while fabrikito does: ``listing`` is the pane list begun by
    the caller (:meth:`Server.start_list_panes`), and the screens' call is
    started before ``/proc``, the registry and the log are read, then read.
    """
    from fabrikito.delivery import refusals

    srv = team.server() if server is None else server
    rows, running = seatpane.panes_if_running(srv, listing)
    calls = 1
    by_session = {seat.session: seatpane.pane_of_session(rows, seat.session) for seat in team.seats}
    pane_ids = [r.pane_id for s in team.seats if (r := by_session[s.session]) is not None and not r.dead]
    looking = seatpane.start_looks(srv, pane_ids if screens else [])
    calls += len(looking.chains)  # one for up to about 55 seats (seatpane.CHAIN_BYTES)
    agents: dict[str, seatpane.Agent | None] = {}
    for seat in team.seats:
        row = by_session[seat.session]
        agents[seat.role] = None if row is None or row.dead else seatpane.foreground_agent(row.pane_pid)
    # Read while tmux answers the looks (at 50 seats its part is the longest): the log, the records, say's
    # refusals, the queue and the watcher need no screen.
    times = last_message_times(team.log_path, team.roles)
    records = conversation_records(team)
    found = refusals.notices(team.state_dir / "say", list(team.roles))  # say's records (seatlock.say_dir)
    queued = queueview.collect(team)
    watcher = watcher_line(team)
    looks = looking.looks()
    kept: dict[str, str] = {}
    seats = []
    for seat in team.seats:
        row = by_session[seat.session]
        agent = agents[seat.role]
        look = looks.get(row.pane_id) if row is not None else None
        state, detail = seat_state(row, agent, agent.registry if agent is not None else None, look)
        if keep_screens and look is not None:
            kept[seat.role] = readings.plain(look.snapshot.ansi)
        last_to, last_from = times.get(seat.role, (None, None))
        conversation, restarts = records.get(seat.role, (None, 0))
        seats.append(
            SeatStatus(
                role=seat.role,
                session=seat.session,
                pane=row.pane_id if row is not None else None,
                state=state,
                detail=detail,
                permission_class=seat.permission_class.value,
                last_to=last_to,
                last_from=last_from,
                pid=agent.pid if agent is not None else None,
                release=agent.version if agent is not None else None,
                qualified=_qualified(agent),
                state_since=_state_since(agent),
                conversation=conversation,
                restarts=restarts,
            )
        )
    return Status(
        team=team,
        seats=tuple(seats),
        notices=tuple(Notice(role=n.role, count=n.count, last=n.last) for n in found),
        tmux_calls=calls,
        server_running=running,
        queue=queued,
        screens=kept if keep_screens else None,
        watcher=watcher,
    )


def watcher_line(team: Team) -> WatcherLine:
    from fabrikito.launch import watcherproc

    info = watcherproc.info(team)
    return WatcherLine(info.running, info.pid, info.stale)


def _state_since(agent: seatpane.Agent | None) -> float | None:
    entry = agent.registry if agent is not None else None
    value = entry.get("statusUpdatedAt") if entry is not None else None
    return value / 1000 if isinstance(value, int | float) and not isinstance(value, bool) else None


def conversation_records(team: Team) -> dict[str, tuple[str | None, int]]:
    """Each seat's recorded conversation id and restart count (a seat with no usable record is left out)."""
    from fabrikito.launch import resume

    return {role: (record.id or None, record.restarts) for role, record in resume.read_records(team).items()}


def seat_state(
    row: seatpane.PaneRow | None,
    agent: seatpane.Agent | None,
    entry: Mapping[str, Any] | None,
    look: seatpane.Look | None,
) -> tuple[SeatState, str]:
    """A seat's state and its detail from what was read about it."""
    if row is None:
        return SeatState.DOWN, ""
    if row.dead or (look is not None and look.dead):
        return SeatState.EXITED, "its agent exited; the pane is kept so the reason can be read (attach)"
    if agent is None:
        if not procs.alive(row.pane_pid):  # it ended, and tmux has not yet marked its pane dead
            return SeatState.EXITED, "its agent exited; the pane is kept so the reason can be read (attach)"
        return SeatState.NOT_AGENT, "the pane's foreground program is not an agent (a shell?)"
    if agent.name != CLAUDE:
        return _screen_state(agent, look)
    if entry is None:
        if look is not None:
            dialog = startup_dialog(plain_text(look.snapshot.ansi))
            if dialog is not None:
                return SeatState.WAITING, dialog[0]
            reading = _reading(agent, look)
            if reading is not None and reading.state is ScreenState.DIALOG:
                return SeatState.WAITING, reading.detail or reading.reason
        return SeatState.STARTING, ""
    status = entry.get("status")
    if status == "waiting":
        waiting_for = entry.get("waitingFor")
        return SeatState.WAITING, str(waiting_for) if waiting_for else ""
    if status == "busy":
        return SeatState.BUSY, ""
    reading = _reading(agent, look)  # only an idle seat's screen is read: it can refine the state
    if reading is not None:
        if reading.state is ScreenState.BOX_TEXT:
            return SeatState.BOX_TEXT, ""
        if reading.state is ScreenState.DIALOG:
            return SeatState.WAITING, reading.detail or reading.reason
        if reading.state is ScreenState.COPY_MODE:
            return SeatState.IDLE, "in copy mode"
    if status == "idle":
        return SeatState.IDLE, ""
    return SeatState.UNKNOWN, f"registry status {status!r}"


def _screen_state(agent: seatpane.Agent, look: seatpane.Look | None) -> tuple[SeatState, str]:
    """The state of an agent with no session registry (Codex, Gemini), from its screen alone."""
    reading = _reading(agent, look)
    if reading is None:
        return SeatState.UNKNOWN, "its screen could not be read"
    if reading.state is ScreenState.DIALOG:
        return SeatState.WAITING, reading.detail or reading.reason
    if reading.busy:  # its busy screens are never typable, whatever else they show
        return SeatState.BUSY, ""
    if reading.state is ScreenState.BOX_TEXT:
        return SeatState.BOX_TEXT, ""
    if reading.state is ScreenState.COPY_MODE:
        return SeatState.IDLE, "in copy mode"
    if reading.state is ScreenState.READY:
        return SeatState.IDLE, ""
    return SeatState.UNKNOWN, reading.reason


def _qualified(agent: seatpane.Agent | None) -> bool | None:
    if agent is None:
        return None
    if agent.version is None:
        return False
    from fabrikito.screen import releases

    return releases.lookup(agent.name or CLAUDE, agent.version, agent.exe) is not None


def release_cell(release: str | None, qualified: bool | None) -> str:
    """``2.1.332``, or ``2.1.999 (not qualified: run fabrikito qualify)``; ``-`` with no agent."""
    if qualified is None:
        return "-"
    return (release or "?") + ("" if qualified else " (not qualified: run fabrikito qualify)")


def _reading(agent: seatpane.Agent, look: seatpane.Look | None) -> BoxReading | None:
    if look is None:
        return None
    return readings.read(recogniser_for(agent.name or CLAUDE, agent.version, exe=agent.exe), look.snapshot)


# -- output -------------------------------------------------------------------------


def shown_time(value: str | None, today: str | None = None) -> str:
    """A log time for the table: ``HH:MM:SS`` when it is today, the whole time otherwise."""
    if value is None:
        return "-"
    day = time.strftime("%Y-%m-%d") if today is None else today
    date, _, clock = value.partition("T")
    return clock if date == day else value


def notice_line(notice: Notice, attach: str) -> str:
    return (
        f"NOTICE {notice.role}: {notice.count} sends to it were refused because its input box holds text; "
        f"the last at {msglog.local_time(notice.last)}. Attach ({attach}) and deal with the box "
        f"(./fabrikito flush {notice.role} if say left it there); only a later say clears this notice."
    )


def attach_command(team: Team, seat: Seat) -> str:
    return " ".join(["tmux", *team.server().server_flags, "attach", "-t", seat.session])


def report(found: Status, *, as_json: bool) -> str:
    """What ``status`` prints of what was collected (this machine's :func:`collect`, or every host's
    through ``launch/multihost.collect``): the table, or its JSON."""
    if as_json:
        from fabrikito.log.logview import json_text

        return json_text(to_json(found), indent=2)
    return render(found)


def render(status: Status, *, today: str | None = None) -> str:
    team = status.team
    header: tuple[str, ...] = (
        "ROLE",
        "SESSION",
        "PANE",
        "STATE",
        "CLASS",
        "RELEASE",
        "LAST TO",
        "LAST FROM",
        "CONVERSATION",
    )
    hosted = any(s.host for s in status.seats)
    if hosted:
        header = ("ROLE", "HOST", *header[1:])
    rows: list[tuple[str, ...]] = []
    for s in status.seats:
        state = s.state.value + (f" ({s.detail})" if s.detail and s.state is not SeatState.EXITED else "")
        rows.append(
            (
                s.role,
                *((s.host or "here",) if hosted else ()),
                s.session,
                s.pane or "-",
                state,
                s.permission_class,
                release_cell(s.release, s.qualified),
                shown_time(s.last_to, today),
                shown_time(s.last_from, today),
                conversation_cell(s.conversation, s.restarts),
            )
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"team {team.name} ({team.server().describe()})"]
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    if not status.server_running:
        lines.append("(the tmux server is not running: every seat is down)")
    for notice in status.notices:
        seat = team.seat(notice.role)
        attach = attach_command(team, seat) if seat is not None else "attach to it"
        lines.append(notice_line(notice, attach))
    if status.queue is not None:
        lines += queue_lines(status.queue)
    if status.watcher is not None:
        lines.append(watcher_text(status.watcher))
    return "\n".join(lines)


def watcher_text(w: WatcherLine) -> str:
    """The watcher's line: no age unless it is stale (the same line served or not, round after round)."""
    if not w.running:
        return "watcher: not running (./fabrikito up starts it)"
    if w.stale is not None:
        return f"watcher: running (pid {w.pid}), no round for {w.stale:.0f}s: stuck? see watcher.err"
    return f"watcher: running (pid {w.pid})"


def conversation_cell(conversation: str | None, restarts: int) -> str:
    """The conversation's id, shortened as Claude Code's own picker shows it, and its restarts."""
    if conversation is None:
        return "-"
    again = f" ({restarts} restart{'s' if restarts != 1 else ''})" if restarts else ""
    return conversation[:8] + again


def queue_lines(view: queueview.Overview) -> list[str]:
    """The delivery worker, each seat's waiting messages (how many, the oldest's age, why), the queue's notices."""
    w = view.worker
    lines = [f"delivery worker: running (pid {w.pid})" if w.running else "delivery worker: not running"]
    for q in view.seats:
        oldest = durations.short(q.oldest or 0)
        lines.append(f"queued for {q.role}: {q.waiting} waiting, the oldest for {oldest} ({q.why})")
    return lines + list(view.notices)


def to_json(status: Status) -> dict[str, Any]:
    team = status.team
    return {
        **team.json_header(JSON_VERSION),
        "server_running": status.server_running,
        "seats": [
            {
                "role": s.role,
                "session": s.session,
                "pane": s.pane,
                "state": s.state.value,
                "detail": s.detail,
                "class": s.permission_class,
                "last_to": s.last_to,
                "last_from": s.last_from,
                "pid": s.pid,
                "release": s.release,
                "qualified": s.qualified,
                "host": s.host,
                "conversation": s.conversation,
                "restarts": s.restarts,
            }
            for s in status.seats
        ],
        "notices": [{"role": n.role, "count": n.count, "last": msglog.local_time(n.last)} for n in status.notices],
        "queue": None if status.queue is None else queue_json(status.queue),
        "watcher": None
        if status.watcher is None
        else {"running": status.watcher.running, "pid": status.watcher.pid, "stale": status.watcher.stale is not None},
    }


def queue_json(view: queueview.Overview) -> dict[str, Any]:
    return {
        "worker": {"running": view.worker.running, "pid": view.worker.pid},
        "seats": [
            {"role": q.role, "waiting": q.waiting, "oldest_seconds": round(q.oldest or 0, 3), "why": q.why}
            for q in view.seats
        ],
        "notices": list(view.notices),
    }
