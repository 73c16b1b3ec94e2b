"""``up`` and ``restart``: start the team's seats, wait for their boxes, give each its kickoff.

What each seat is started with (its generated settings, prompt and command)
is :mod:`fabrikito.launch.seatfiles`; the kickoff goes through
:func:`fabrikito.delivery.engine.deliver` like any other message.
``down`` is :mod:`fabrikito.launch.teardown` (``restart`` stops a seat through it).
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from fabrikito.base import procs, statedir
from fabrikito.base.errors import FabrikitoError, TmuxError, UsageError
from fabrikito.base.tmux import FIELD_SEP, Server, format_of
from fabrikito.base.tmuxcontrol import tmux_events
from fabrikito.base.values import frozen
from fabrikito.delivery import seatpane
from fabrikito.launch import resume as conversations
from fabrikito.launch import seatevents, seatinboxes
from fabrikito.launch.otherseat import UsersOwnFile
from fabrikito.launch.seatfiles import (
    LAUNCHER,
    PANE_COLS,
    PANE_ROWS,
    LaunchRecord,
    read_launch,
    seat_command,
    seat_env,
    seats_dir,
    select_seats,
    write_launch,
    write_seat_files,
)
from fabrikito.launch.teardown import down
from fabrikito.log import msglog
from fabrikito.screen import FailClosedRecogniser, ScreenState, recogniser_for
from fabrikito.team.teamfile import Seat, Team

if TYPE_CHECKING:
    from fabrikito.delivery.engine import Delivery

READY_TIMEOUT = 90.0
KICKOFF_TIMEOUT = 20.0
KICKOFF_RETRY = 1.0
READY_ROUNDS = 2
FULL_READ_EVERY = 5
PROMPT = "\u276f\u00a0"  # the live box's prompt: ❯ + NO-BREAK SPACE
#: Words of the startup dialogs, as they appear in a capture with escapes.
STARTUP_HINTS = ("Bypass Permissions mode", "trust this folder", "custom API key")
BOX_TEXT_REFUSAL = "already holds text"
POLL = 0.2

#: A helper process ``up`` starts for the team once the seats have their kickoffs: its name, its start
#: (``True``: started, ``False``: already running, ``None``: none for this team) and what goes on without it.
Helper = tuple[str, Callable[[Team], bool | None], str]


class Step(StrEnum):
    """The outcome of ``up`` for one seat."""

    STARTED = "started"  # started and given its kickoff (or it has none)
    ALREADY_UP = "already up"
    FAILED = "failed"


@frozen
class SeatResult:
    role: str
    step: Step
    detail: str = ""


@frozen
class UpResult:
    seats: tuple[SeatResult, ...]

    @property
    def failed(self) -> tuple[SeatResult, ...]:
        return tuple(r for r in self.seats if r.step is Step.FAILED)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


class Progress:
    """Thread-safe progress lines, each with the seconds since ``up`` began."""

    def __init__(self, out: Callable[[str], None]) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def __call__(self, role: str, text: str) -> None:
        with self._lock:
            self._out(f"[{time.monotonic() - self._t0:5.1f}s] {role}: {text}")


# -- up ---------------------------------------------------------------------------------


def require_agent(team: Team, seats: Sequence[Seat] | None = None) -> None:
    """Refuse to start anything when a seat's agent command cannot be found."""
    import shutil

    from fabrikito.team.agents import command_for, kind

    for seat in team.seats if seats is None else seats:
        program = command_for(team, seat)[0]
        if shutil.which(program) is not None:
            continue
        where = "set agent in the team file" if seat.agent == "claude" and seat.command is None else "set command"
        raise UsageError(
            f"the command {program!r} of seat {seat.role} (team {team.name}) is not found on PATH ({team.path}): "
            f"install {kind(seat.agent).display}, or {where} to its full path"
        )


def attach_hint(team: Team, seat: Seat) -> str:
    return shlex.join(["tmux", *team.server().server_flags, "attach", "-t", seat.session])


@dataclass
class _Waiting:
    seat: Seat
    pane: str
    started: float
    plan: conversations.Plan | None = None  # None: a seat up already, still owed its kickoff
    reported_dialog: str | None = None
    last_screen: str = ""  # with escapes
    ready_rounds: int = 0
    rounds: int = 0
    resuming: bool = False  # its box showed, its resumed conversation not yet


@dataclass
class _Run:
    team: Team
    server: Server
    progress: Progress
    timeout: float
    resume: bool | None = None  # up --resume: True; plain up: None (resumes seats gone without down)
    results: dict[str, SeatResult] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self, role: str, step: Step, detail: str = "") -> None:
        with self.lock:
            self.results[role] = SeatResult(role, step, detail)

    def fail(self, seat: Seat, detail: str) -> None:
        self.progress(seat.role, f"FAILED: {detail}")
        self.done(seat.role, Step.FAILED, detail)


def up(
    team: Team,
    roles: Sequence[str] | None = None,
    *,
    out: Callable[[str], None],
    server: Server | None = None,
    timeout: float = READY_TIMEOUT,
    helpers: Sequence[Helper] = (),
    resume: bool | None = None,
) -> UpResult:
    """Start the seats of ``team`` (or only ``roles``) that are not running; see the module docstring.
    ``helpers`` are started after the delivery worker (the command line's: its command server).
    ``resume``: see :func:`fabrikito.launch.resume.plan`.  One ``up`` at a time per team."""
    seats = select_seats(team, roles)
    require_agent(team, seats)
    with conversations.starting(team):
        return _up(team, seats, out, server, timeout, helpers, resume)


def restart(
    team: Team, roles: Sequence[str], *, out: Callable[[str], None], timeout: float = READY_TIMEOUT
) -> UpResult:
    """``fabrikito restart ROLE…``: each seat stopped, then started again resuming its conversation; one whose
    agent is not running and whose pane runs something else is left alone (:mod:`fabrikito.launch.agentless`)."""
    seats = select_seats(team, roles)
    require_agent(team, seats)
    from fabrikito.launch import agentless

    with conversations.starting(team):
        refused = {role: SeatResult(role, Step.FAILED, why) for role, why in agentless.occupied(team, seats).items()}
        for r in refused.values():
            Progress(out)(r.role, f"FAILED: {r.detail}")
        go = [s for s in seats if s.role not in refused]
        if go:
            down(team, [s.role for s in go], out=out)
            refused |= {r.role: r for r in _up(team, go, out, None, timeout, (), True).seats}
        return UpResult(seats=tuple(refused[s.role] for s in seats if s.role in refused))


def _up(
    team: Team,
    seats: list[Seat],
    out: Callable[[str], None],
    server: Server | None,
    timeout: float,
    helpers: Sequence[Helper],
    resume: bool | None,
) -> UpResult:
    srv = team.server() if server is None else server
    run = _Run(team=team, server=srv, progress=Progress(out), timeout=timeout, resume=resume)
    for line in conversations.orphans(team):
        out(line)
    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(seats_dir(team))
    from fabrikito.delivery.seatpane import panes_if_running
    from fabrikito.launch import agentless

    rows, _ = panes_if_running(srv)
    waiting: list[_Waiting] = []
    for seat in seats:
        row = seatpane.pane_of_session(rows, seat.session)
        left = None if row is None or row.dead else agentless.left_in(row.pane_pid)  # a live pane, no agent
        if left is not None and not left.idle:
            run.fail(seat, left.refusal(seat.role))
            continue
        if row is not None and not row.dead and left is None:
            record = read_launch(team, seat.role)
            ours = record is not None and (record.pane, record.pid) == (row.pane_id, row.pane_pid)
            if ours and record is not None and record.kickoff == "pending":
                run.progress(seat.role, f"running without its kickoff yet (pane {row.pane_id}): waiting for its box")
                waiting.append(_Waiting(seat, row.pane_id, time.monotonic()))
            else:
                run.progress(seat.role, f"already up (session {seat.session}, pane {row.pane_id}): left alone")
                run.done(seat.role, Step.ALREADY_UP, row.pane_id)
            continue
        if row is not None:
            run.progress(seat.role, "its pane had exited: starting it again" if left is None else left.note())
            try:
                with tmux_events(srv):
                    srv.kill_session(seat.session)
            except TmuxError:
                pass
        started = _start(run, seat)
        if started is not None:
            waiting.append(started)
    if waiting:
        _wait_and_kickoff(run, waiting)
    failed_roles = {role for role, r in run.results.items() if r.step is Step.FAILED}
    seatinboxes.start(team, [s for s in seats if s.role in run.results and s.role not in failed_roles], out)
    if server is None or server == team.server():
        _start_helpers(team, out, helpers)
    ordered = tuple(run.results[s.role] for s in seats if s.role in run.results)
    return UpResult(seats=ordered)


def _start(run: _Run, seat: Seat) -> _Waiting | None:
    team, srv = run.team, run.server
    if not seat.cwd.is_dir():
        run.fail(seat, f"its working directory {seat.cwd} does not exist: create it or fix cwd in the team file")
        return None
    plan = conversations.plan(team, seat, resume=run.resume)
    if plan.resumed:
        run.progress(seat.role, f"resuming its conversation {plan.id} (restart {plan.restarts})")
        seatevents.emit(team, seat.role, "resumed", f"conversation {plan.id}, restart {plan.restarts}")
    elif plan.note:
        run.progress(seat.role, plan.note)
        seatevents.emit(team, seat.role, "fresh-start", plan.note)
    try:
        write_seat_files(team, seat)
    except UsersOwnFile as exc:
        run.fail(seat, str(exc))
        return None
    except (OSError, FabrikitoError) as exc:
        run.fail(seat, f"its settings could not be written to {seats_dir(team)}: {exc}")
        return None
    args = [
        "new-session",
        "-d",
        "-P",
        "-F",
        format_of(("pane_id", "pane_pid")),
        "-s",
        seat.session,
        "-c",
        str(seat.cwd),
    ]
    args += ["-x", str(PANE_COLS), "-y", str(PANE_ROWS)]
    for key, value in seat_env(team, seat).items():
        args += ["-e", f"{key}={value}"]
    args += ["--", *seat_command(team, seat, plan.agent_args(seat.agent))]
    # In the same tmux call, so an agent that exits at once leaves its pane (and its reason) behind.
    args += [";", "set-option", "-w", "-t", f"={seat.session}:", "remain-on-exit", "on"]
    t0 = time.monotonic()
    try:
        with tmux_events(srv):  # never while a command server's tmux client connects (tmux < 3.7 crashes)
            out = srv.run(*args)
    except TmuxError as exc:
        run.fail(seat, f"tmux could not start its session: {exc}")
        return None
    pane, _, pid = out.strip().partition(FIELD_SEP)
    conversations.started(team, seat, plan)
    try:
        ticks = procs.info(int(pid or 0)).start_ticks
    except (procs.ProcessGone, procs.ProcessUnreadable, ValueError):
        ticks = 0
    write_launch(
        team,
        seat.role,
        LaunchRecord(
            pane=pane,
            pid=int(pid or 0),
            kickoff="pending" if plan.resumed or team.kickoff_for(seat) else "none",
            started=time.time(),
            ticks=ticks,
        ),
    )
    run.progress(seat.role, f"started (session {seat.session}, pane {pane})")
    return _Waiting(seat, pane, t0, plan)


def _wait_and_kickoff(run: _Run, waiting: list[_Waiting]) -> None:
    """One loop for every seat: a single tmux call per round reads all their screens."""
    from fabrikito.delivery.seatpane import look_panes

    pending = {w.pane: w for w in waiting}
    ready: list[_Waiting] = []
    while pending:
        looks = look_panes(run.server, list(pending))
        now = time.monotonic()
        for pane, w in list(pending.items()):
            verdict = _judge(run, w, looks.get(pane), now)
            if verdict is None:
                continue
            del pending[pane]
            if verdict:
                run.progress(w.seat.role, f"box ready ({now - w.started:.1f}s)")
                ready.append(w)
        if pending:
            time.sleep(POLL)
    # Kickoffs go out once every seat started here is ready (or has failed), so a kickoff that
    # says "tell the EM" finds the EM up and registered for messages.
    kickoffs: list[Future[None]] = []
    # Each kickoff makes Claude Code redraw as the paste lands; a few at a time keeps the CPUs for them.
    workers = max(1, min(len(ready), 2 * (os.cpu_count() or 1)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kickoff") as pool:
        for w in ready:
            kickoffs.append(pool.submit(_kickoff, run, w))
        for f in kickoffs:
            f.result()


def _judge(run: _Run, w: _Waiting, look: seatpane.Look | None, now: float) -> bool | None:
    """``True`` ready, ``False`` failed (reported), ``None`` still waiting."""
    from fabrikito.launch import startfail
    from fabrikito.screen.ansi import plain as plain_text
    from fabrikito.screen.startup import ROOT_REFUSAL, startup_dialog

    seat, team = w.seat, run.team
    if look is None:
        if not run.server.has_session(seat.session):
            run.fail(
                seat,
                "its session ended at once: the agent exited before its pane could be kept. "
                f"Run it by hand in {seat.cwd} to see why",
            )
            return False
        return None if now - w.started < run.timeout else _timed_out(run, w)
    if look.dead:
        run.fail(seat, startfail.exit_report(run.server, seat, look.pane_id, attach_hint(team, seat)))
        return False
    raw = look.snapshot.ansi
    w.last_screen = raw
    w.rounds += 1
    if ROOT_REFUSAL in raw:
        run.fail(seat, startfail.root_advice(seat))
        return False
    # Parsing a screen costs CPU the starting seats need: a screen is read in full only when it
    # shows the box's prompt or a startup dialog's words, and otherwise every few rounds.
    hinted = any(hint in raw for hint in STARTUP_HINTS)
    claude = seat.agent == "claude"
    if claude and PROMPT not in raw and not hinted and w.rounds % FULL_READ_EVERY:
        return None if now - w.started < run.timeout else _timed_out(run, w)
    agent = seatpane.foreground_agent(look.pane_pid)
    recogniser = (
        recogniser_for(seat.agent, None) if agent is None else recogniser_for(agent.name, agent.version, exe=agent.exe)
    )
    if agent is not None and agent.version is not None and isinstance(recogniser, FailClosedRecogniser):
        # The seat runs, but a release fabrikito has not qualified: no kickoff can be typed, now or later.
        run.fail(seat, f"{recogniser.reason}; then run `fabrikito up` again to give its kickoff")
        return False
    reading = recogniser.recognise(look.snapshot)
    if reading.state is ScreenState.READY and agent is not None:
        # Ready once the box was seen on two rounds in a row and Claude Code has registered
        # for messaging: a box drawn while it is still starting can be slow to take a paste.
        # Other agents have no registry: their box, idle (no turn running), twice in a row.
        # A resumed seat also shows its conversation first: Gemini CLI takes its box away to load it.
        w.resuming = w.plan is not None and w.plan.resumed and not recogniser.conversation_shown(look.snapshot)
        w.ready_rounds = 0 if w.resuming else w.ready_rounds + 1
        registered = agent.registry is not None if agent.name == "claude" else not reading.busy
        if w.ready_rounds >= READY_ROUNDS and registered:
            if agent.registry is not None and w.plan is not None:
                note = conversations.confirm_id(team, seat.role, agent.registry.get("sessionId"))
                if note:
                    run.progress(seat.role, note)
            return True
        return None if now - w.started < run.timeout else _timed_out(run, w)
    w.ready_rounds = 0
    dialog = startup_dialog(plain_text(raw)) if hinted else None
    if dialog is None and reading.state is ScreenState.DIALOG:
        dialog = (reading.detail or reading.reason or "a dialog", "answer it")
    if dialog is not None and w.reported_dialog != dialog[0]:
        w.reported_dialog = dialog[0]
        left = max(0.0, run.timeout - (now - w.started))
        run.progress(
            seat.role,
            f"stopped at {dialog[0]}: attach with `{attach_hint(team, seat)}` and {dialog[1]}; "
            f"up waits {left:.0f}s more for its box",
        )
    if now - w.started >= run.timeout:
        return _timed_out(run, w)
    return None


def _timed_out(run: _Run, w: _Waiting) -> bool:
    seat = w.seat
    hint = attach_hint(run.team, seat)
    if w.reported_dialog is not None:
        run.fail(
            seat,
            f"still at {w.reported_dialog} after {run.timeout:g}s. Attach with `{hint}`, answer it, then run "
            "`fabrikito up` again: it gives the kickoff to a seat that has not had it",
        )
        return False
    from fabrikito.screen.ansi import plain as plain_text

    screen = "\n".join(plain_text(w.last_screen).rstrip().split("\n")[-15:])
    if w.resuming:
        run.fail(
            seat,
            f"its box showed but not the conversation it resumes, after {run.timeout:g}s: nothing was typed. "
            f"Attach with `{hint}` to look; `fabrikito up` again gives its restart notice. Its last screen:\n{screen}",
        )
        return False
    run.fail(
        seat,
        f"no input box after {run.timeout:g}s (attach with `{hint}` to look; `fabrikito up` again gives the "
        f"kickoff once the box shows). Its last screen:\n{screen}",
    )
    return False


def _kickoff(run: _Run, w: _Waiting) -> None:
    """Give the seat its kickoff through the delivery engine, then log one line."""
    from fabrikito.delivery import engine

    team, seat = run.team, w.seat
    text = team.kickoff_for(seat)
    conversation, _ = conversations.read_record(team, seat.role)
    if conversation is not None and conversation.restarted:  # resumed: no kickoff again, one line instead
        text, what = conversations.restart_notice(conversation.restarted), "restart notice"
    else:
        what = "kickoff"
    record = read_launch(team, seat.role)
    pid = record.pid if record is not None else 0
    ticks = record.ticks if record is not None else 0
    if text is None:
        run.progress(seat.role, "no kickoff in the team file: nothing sent")
        write_launch(team, seat.role, LaunchRecord(w.pane, pid, "none", time.time(), ticks))
        run.done(seat.role, Step.STARTED, "no kickoff")
        return
    delivery = _deliver_kickoff(run, seat, text)
    emptied = False
    log_error: str | None = None  # the last attempt's line, once written
    if delivery.result is engine.Result.TYPED:
        # Text say itself left in the box (the label, or the start of the kickoff): submit it with
        # flush, as the spec's recovery says, then send the kickoff once more.
        log_error = _log(team, LAUNCHER, seat.role, msglog.Outcome.NOT_DELIVERED, text)
        flushed = _flush(run, seat)
        emptied = flushed is msglog.Outcome.FLUSH_NOTHING  # what was typed never reached the box
        if flushed is msglog.Outcome.FLUSHED:
            run.progress(seat.role, f"kickoff typed but not submitted ({delivery.reason}): flushed, sending it again")
            delivery = _deliver_kickoff(run, seat, text)
            log_error = None  # a second attempt: a line of its own
    ok = delivery.result is engine.Result.DELIVERED
    if log_error is None:  # one line an attempt: one not tried again has its line already
        log_error = _log(
            team, LAUNCHER, seat.role, msglog.Outcome.DELIVERED if ok else msglog.Outcome.NOT_DELIVERED, text
        )
    state = "delivered" if ok else "pending" if emptied else "failed"  # emptied: nothing sent, up gives it again
    write_launch(team, seat.role, LaunchRecord(w.pane, pid, state, time.time(), ticks))
    if ok and w.plan is not None and not w.plan.id:  # Codex CLI picks its conversation's id: read it now
        found, why = conversations.await_id(team, seat)
        if found or why:
            run.progress(seat.role, f"its conversation is {found}" if found else f"{why}: it cannot be resumed")
    if ok:
        run.progress(seat.role, f"{what} delivered" + log_error)
        run.done(seat.role, Step.STARTED, f"{what} delivered" + log_error)
    elif emptied:
        run.fail(
            seat,
            f"its {what} was typed but did not stay in the box ({delivery.reason}), and the box is empty now: "
            f"nothing was sent. Attach with `{attach_hint(team, seat)}`, then `fabrikito up` again to give it"
            + log_error,
        )
    elif delivery.result is engine.Result.TYPED:
        run.fail(
            seat,
            f"its kickoff was typed but not submitted: {delivery.reason}. It is in the box: "
            f"`fabrikito flush {seat.role}` submits it" + log_error,
        )
    else:
        run.fail(
            seat,
            f"its kickoff was not delivered: {delivery.reason}. Nothing was typed; attach with "
            f"`{attach_hint(team, seat)}`, then `fabrikito up` again to give it" + log_error,
        )
        write_launch(team, seat.role, LaunchRecord(w.pane, pid, "pending", time.time(), ticks))


def _deliver_kickoff(run: _Run, seat: Seat, text: str) -> Delivery:
    """``engine.deliver`` as ``launcher``, tried again while it refuses with nothing typed (not for a box with text)."""
    from fabrikito.delivery import engine

    deadline = time.monotonic() + KICKOFF_TIMEOUT
    while True:
        try:
            panes = seatpane.list_panes(run.server)
        except TmuxError as exc:
            delivery = engine.Delivery(seat.role, engine.Result.REFUSED, f"tmux cannot list the panes: {exc}")
        else:
            delivery = engine.deliver(
                engine.Context(team=run.team, server=run.server, panes=panes), seat, LAUNCHER, text
            )
        if delivery.result is not engine.Result.REFUSED or time.monotonic() >= deadline:
            return delivery
        if BOX_TEXT_REFUSAL in delivery.reason:
            return delivery  # someone is typing there: a retry would only count as a resend (say's back-off)
        time.sleep(KICKOFF_RETRY)  # nothing was typed: the box may be redrawing after start; try again


def _flush(run: _Run, seat: Seat) -> msglog.Outcome | None:
    """Submit what the kickoff left in the box (``flush``); log its line; its outcome (``None``: not tried)."""
    from fabrikito.delivery import engine, flush

    try:
        ctx = engine.Context(team=run.team, server=run.server, panes=seatpane.list_panes(run.server))
        result = flush.flush_seat(ctx, seat)
    except (TmuxError, FabrikitoError):
        return None
    _log(run.team, LAUNCHER, seat.role, result.outcome, msglog.FLUSH_MESSAGE)
    return result.outcome


def _log(team: Team, sender: str, role: str, outcome: msglog.Outcome, text: str) -> str:
    """Append one log line; return an error note for the progress line (empty when written)."""
    try:
        line = msglog.format_line(time.time(), sender, role, outcome, msglog.body_for(sender, role, text))
        msglog.append_checked(team.log_path, line)
    except (OSError, FabrikitoError) as exc:
        return f" (the log line could not be written: {exc})"
    return ""


def _start_helpers(team: Team, out: Callable[[str], None], more: Sequence[Helper]) -> None:
    """The team's delivery worker (``say --queue``) and ``more``, after the kickoffs so they go first."""
    from fabrikito.delivery import worker
    from fabrikito.launch import watcherproc

    helpers: list[Helper] = [
        ("delivery worker", worker.ensure_running, "queued messages wait until it runs"),
        watcherproc.UP_HELPER,
    ]
    for name, start, meanwhile in [*helpers, *more]:
        try:
            started = start(team)
        except (OSError, FabrikitoError) as exc:
            out(f"the {name} could not be started ({exc}): {meanwhile}")
            continue
        if started is not None:
            out(f"{name}: started" if started else f"{name}: already running")
