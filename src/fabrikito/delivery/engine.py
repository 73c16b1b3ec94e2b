"""The delivery engine: type a labelled message into a seat's box, or refuse.

It knows nothing of how a message arrived (the ``say`` command, ``up``'s
kickoff, the queue's worker, a routed say from another machine, an inbox): it
takes a sender, a seat and a text, and returns a :class:`Delivery`.  The
commands above it (:mod:`~fabrikito.delivery.say`, :mod:`~fabrikito.delivery.flush`,
:mod:`~fabrikito.delivery.route`, :mod:`~fabrikito.delivery.worker`) use only
the public names here.

One delivery, in order:

1. take the seat's lock (``.state/<team>/say/<role>.lock``, ``flock``, at
   most 8 s; anything but a plain file there is refused at once);
2. find the seat's pane; refuse a dead pane or one whose foreground process
   is not Claude Code;
3. read the pane (tmux state and screen in one call) and require a ready
   box: Claude Code's input box at the bottom, empty or with one dim line;
4. write the paste record (``say/paste-<role>``: label and message, label
   only for ``sec``), paste the label ``[from <sender>] `` on its own, and
   require the box to hold just the label;
5. paste the message; require the box to hold label + message (white space
   aside), label + one ``[Pasted text #N]`` placeholder, or the visible end of
   a message taller than the box;
6. press Enter once, and require the box to be seen empty afterwards (the first
   look comes 50 ms after the Enter, once the agent has sent its request); then
   remove the paste record and the seat's box-text refusal records.

Any check that refuses in a window under 110 columns or 12 rows grows the
window to 220x50 once, checks again there, and the window's size and its
``window-size`` option are put back however ``say`` ends (signals too).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

from fabrikito.base import statedir
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Pending, Server
from fabrikito.base.tmuxcontrol import Controlled
from fabrikito.base.values import field, frozen
from fabrikito.delivery import refusals, seatpane
from fabrikito.delivery.grow import GROW_COLS, GROW_ROWS, Grower
from fabrikito.delivery.oneline import Interrupted, signals_raise
from fabrikito.delivery.seatlock import (
    LOCK_TIMEOUT,
    SeatNotReady,
    SeatRefusal,
    paste_record_path,
    say_dir,
    seat_lock,
    write_paste_record,
)
from fabrikito.screen import BoxReading, PaneSnapshot, Recogniser, ScreenState, Verdict, recogniser_for
from fabrikito.team.agents import CLAUDE, AgentKind
from fabrikito.team.agents import kind as kind_of
from fabrikito.team.teamfile import Seat, Team

RENDER_TIMEOUT = 3.0
ENTER_TIMEOUT = 6.0
POLL = 0.01
# Through a control-mode client a look costs no tmux process (base.tmux.Controlled), and a screen that did not
# change is not recognised again: the agent's drawing of a paste is seen a few ms after it happens.
POLL_CONTROLLED = 0.003
# After the Enter the agent builds and sends its request: a look then (a tmux call and a capture) takes CPU
# from it and delays the request by about 20 ms on two cores (docs/benchmarks.md), so the first look after
# the Enter waits this long; the box is rarely empty again sooner.
ENTER_SETTLE = 0.05

EXIT_DELIVERED = 0
EXIT_LOG_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_TYPED = 4


class Result(StrEnum):
    DELIVERED = "delivered"
    REFUSED = "refused"  # nothing was typed
    TYPED = "typed, not submitted"  # text is in the box, no Enter (or the Enter did not land)
    UNKNOWN = "outcome not known"  # a seat on another host: the connection dropped while its engine ran


@frozen
class Delivery:
    role: str
    result: Result
    reason: str = ""
    interrupted: bool = False  # a signal stopped it: no further seat is tried
    waitable: bool = False  # refused for the seat's state (box, dialog, lock, down): it may pass later


def label_for(sender: str) -> str:
    return f"[from {sender}] "


class LeftInBox(Exception):
    """Text is in the box and no Enter went (or it did not land)."""


# -- reading the seat ---------------------------------------------------------


def no_trace(line: str) -> None:
    pass


@frozen
class Pane:
    server: Server
    pane_id: str
    window_id: str
    recogniser: Recogniser
    trace: Callable[[str], None] = no_trace
    kind: AgentKind = CLAUDE
    poll: float = POLL
    last: list[tuple[PaneSnapshot, BoxReading]] = field(default_factory=list)  # the last screen recognised

    def read(self, started: Pending | None = None) -> tuple[seatpane.Look, BoxReading]:
        """One look (``started``: its tmux call, begun by :func:`attach`) and what the screen shows."""
        try:
            look = seatpane.look(self.server, self.pane_id, started)
        except TmuxError as exc:
            raise SeatNotReady(f"tmux cannot read the screen: {exc}") from None
        if look.dead:
            raise SeatNotReady("the seat's pane is dead (its process exited)")
        if self.last and self.last[0][0] == look.snapshot:  # a recogniser reads the snapshot only
            return look, self.last[0][1]
        reading = self.recogniser.recognise(look.snapshot)
        self.last[:] = [(look.snapshot, reading)]
        return look, reading

    def landed(self, reading: BoxReading) -> bool:
        return landed(self.kind, reading)

    def after_enter(self) -> BoxReading:
        """The screen once the Enter landed (or the last read, past :data:`ENTER_TIMEOUT`); the first look
        comes :data:`ENTER_SETTLE` after the Enter, when the agent has sent its request."""
        time.sleep(ENTER_SETTLE)
        return self.wait(self.landed, timeout=ENTER_TIMEOUT)

    def wait(self, good: Callable[[BoxReading], bool], timeout: float = RENDER_TIMEOUT) -> BoxReading:
        """Read until ``good`` holds or the screen stops changing past the timeout."""
        return self.look_until(good, timeout)[1]

    def look_until(
        self,
        good: Callable[[BoxReading], bool],
        timeout: float = RENDER_TIMEOUT,
        first: tuple[seatpane.Look, BoxReading] | None = None,
    ) -> tuple[seatpane.Look, BoxReading]:
        """:meth:`wait`, with the look (window size and all) of the last read.

        ``first`` is a read just made: the next comes after a pause, not at once
        (read again at once, the screen has rarely changed: one tmux call lost,
        and CPU taken from the agent drawing the paste).
        """
        deadline = time.monotonic() + timeout
        look, reading = self.read() if first is None else first
        while not good(reading) and time.monotonic() < deadline:
            time.sleep(self.poll)
            look, reading = self.read()
        return look, reading


# -- the delivery engine --------------------------------------------------------


@frozen
class Context:
    team: Team
    server: Server
    panes: list[seatpane.PaneRow]
    trace: Callable[[str], None] = no_trace
    recogniser: Recogniser | None = None  # a dialect on trial (``fabrikito qualify``); else by the agent's release
    # For the queue (delivery/worker.py): called right before the first paste (it may raise SeatRefusal
    # to stop with nothing typed); a box that holds text is not a refusal to back off from; only an idle
    # seat gets the message; the seat's lock is waited for this long.
    on_paste: Callable[[], None] | None = None
    note_box_text: bool = True
    idle_only: bool = False
    lock_timeout: float = LOCK_TIMEOUT


@frozen
class Text:
    """A message's text once it is known to be typable: valid UTF-8, no control character but tab and newline
    (:func:`fabrikito.base.text.refusal_for`).  Made by :func:`check_text`; :func:`deliver` checks a plain
    ``str`` itself, a ``Text`` never again."""

    value: str


def check_text(text: str) -> Text | str:
    """``text`` as a :class:`Text`, or why it cannot be typed into a seat."""
    unsafe = unsafe_characters(text)
    return Text(text) if unsafe is None else unsafe


def unsafe_characters(text: str) -> str | None:
    """Why ``text`` cannot be typed into a seat (not UTF-8, or a control character), or ``None``."""
    from fabrikito.base.text import refusal_for

    return refusal_for(text)


def deliver(ctx: Context, seat: Seat, sender: str, text: str | Text) -> Delivery:
    """Type ``[from sender] text`` into ``seat`` and submit it, or refuse.  A ``str`` is checked first
    (:func:`check_text`); a :class:`Text` was checked when it was made."""
    given = check_text(text) if isinstance(text, str) else text
    if isinstance(given, str):
        return Delivery(seat.role, Result.REFUSED, given)
    statedir.ensure_state_dir(ctx.team.base_dir, ctx.team.name)
    statedir.ensure_dir(say_dir(ctx.team))
    try:
        with signals_raise(), seat_lock(ctx.team, seat.role, timeout=ctx.lock_timeout):
            return _deliver_locked(ctx, seat, sender, given.value)
    except SeatRefusal as exc:
        return Delivery(seat.role, Result.REFUSED, str(exc), waitable=isinstance(exc, SeatNotReady))
    except Interrupted as exc:  # while waiting for the lock, or attaching: nothing typed
        return Delivery(seat.role, Result.REFUSED, f"say was stopped by {exc}", interrupted=True)


def attach(ctx: Context, seat: Seat) -> tuple[Pane, Pending]:
    """The seat's pane, once its foreground process is an agent, and the first look at its screen: that
    tmux call starts before the process table is read and the agent's screen rules are imported, and is
    read by the caller's first :meth:`Pane.read` (every check still comes before anything is typed)."""
    row = seatpane.pane_of_session(ctx.panes, seat.session)
    if row is None:
        raise SeatNotReady(f"the seat is down (no tmux session {seat.session} on {ctx.server.describe()})")
    if row.dead:
        raise SeatNotReady("the seat is down (its pane's process exited)")
    first = seatpane.start_look(ctx.server, row.pane_id)
    try:
        agent = seatpane.foreground_agent(row.pane_pid)
        if agent is None:
            raise SeatNotReady(
                "the pane is not running an agent in its foreground (a shell?): the text would run as a command"
            )
        recogniser = ctx.recogniser or recogniser_for(agent.name, agent.version, exe=agent.exe)
    except BaseException:
        _reap(first)
        raise
    controlled = isinstance(ctx.server, Controlled)
    ctx.trace(
        f"{seat.role}: pane {row.pane_id}, {agent.name} {agent.version or '(version unknown)'} pid {agent.pid}, "
        f"recognised as {recogniser.agent} {recogniser.version}; read through "
        + ("the command server's tmux control client" if controlled else "a tmux process per look")
    )
    poll = POLL_CONTROLLED if controlled else POLL
    return Pane(ctx.server, row.pane_id, row.window_id, recogniser, ctx.trace, kind_of(agent.name), poll), first


def _reap(started: Pending) -> None:
    """Wait for a tmux call whose answer is no longer wanted (no process is left behind)."""
    try:
        started.result()
    except TmuxError:
        pass


def _deliver_locked(ctx: Context, seat: Seat, sender: str, text: str) -> Delivery:
    pane, first = attach(ctx, seat)
    grower = Grower(ctx.server, pane.window_id, ctx.trace)
    label = label_for(sender)
    typed = False
    try:
        with signals_raise():
            reading = checked(pane, grower, _ready_verdict, wait_for=None, first=first)
            if reading.busy and not pane.kind.deliver_while_busy:
                raise SeatNotReady(busy_refusal(pane.kind))
            if reading.state is ScreenState.BOX_TEXT and not ctx.note_box_text:
                raise SeatNotReady("the input box holds text (someone typing, or an earlier message not sent)")
            if reading.state is ScreenState.BOX_TEXT:
                klass = refusals.register(
                    ctx.team.state_dir, say_dir(ctx.team), sender=sender, role=seat.role, text=text
                )
                if klass is refusals.RefusalClass.BOX_TEXT_REPEAT:
                    raise SeatNotReady(
                        "the input box already holds text, and this same text was refused for it within "
                        f"{refusals.resend_window()} seconds: stop resending it and do not loop; someone must "
                        "attach and deal with the box first"
                    )
                raise SeatNotReady(
                    "the input box already holds text (someone typing, or an earlier message not sent): attach, "
                    f"deal with it, and send again (or ./fabrikito flush {seat.role} if say left it)"
                )
            if reading.state is not ScreenState.READY:
                reason = reading.reason or "screen not recognised as ready"
                raise SeatNotReady(f"{reason} ({reading.detail})" if reading.detail else reason)
            if ctx.idle_only and reading.busy:
                raise SeatNotReady("the seat is busy with a turn (a queued message waits, to arrive as its own turn)")
            refusals.clear(say_dir(ctx.team), seat.role)
            if ctx.on_paste is not None:
                ctx.on_paste()
            write_paste_record(ctx.team, seat.role, sender, label, text)
            typed = True
            ctx.trace(f"{seat.role}: box ready{' (busy)' if reading.busy else ''}; pasting the label")
            _paste(ctx.server, pane.pane_id, label)
            checked(
                pane,
                grower,
                lambda r: pane.recogniser.check_label(r, label),
                wait_for=lambda r: pane.recogniser.check_label(r, label).ok,
                typed=True,
            )
            ctx.trace(f"{seat.role}: the box holds just the label; pasting the message")
            _paste(ctx.server, pane.pane_id, text)
            checked(
                pane,
                grower,
                lambda r: pane.recogniser.check_after_paste(r, label, text),
                wait_for=lambda r: pane.recogniser.check_after_paste(r, label, text).ok,
                typed=True,
            )
            _before_enter(pane, label, text)
            ctx.trace(f"{seat.role}: the box holds the labelled message; pressing Enter")
            try:
                ctx.server.send_keys(pane.pane_id, "Enter")
            except TmuxError as exc:
                raise LeftInBox(f"the Enter could not be sent ({exc})") from None
            after = pane.after_enter()
            ctx.trace(f"{seat.role}: after the Enter the screen is {after.state.value}")
            if not pane.landed(after):
                raise LeftInBox(
                    "the Enter was sent but the box was not seen empty afterwards, so it may not have landed"
                )
            box_done(ctx.team, seat.role)
            return Delivery(seat.role, Result.DELIVERED)
    except LeftInBox as exc:
        return Delivery(seat.role, Result.TYPED, str(exc))
    except SeatRefusal as exc:
        if typed:
            return Delivery(seat.role, Result.TYPED, str(exc))
        raise
    except Interrupted as exc:
        what = f"say was stopped by {exc}"
        if typed:
            return Delivery(seat.role, Result.TYPED, what, interrupted=True)
        return Delivery(seat.role, Result.REFUSED, what, interrupted=True)
    finally:
        grower.restore_quietly()


def box_done(team: Team, role: str) -> None:
    """The seat's box was submitted or seen empty: what say left there (its paste record) and its refusals go."""
    statedir.remove_quietly(paste_record_path(team, role))
    refusals.clear(say_dir(team), role)


def busy_refusal(kind: AgentKind) -> str:
    return (
        f"{kind.display} is busy with a turn, and an Enter now would be {kind.busy_enter}: say waits for it to be "
        "idle (send again then, or with --queue)"
    )


def _before_enter(pane: Pane, label: str, text: str) -> None:
    """The agent's pause between a paste and its Enter, then one more look: an Enter goes only to a box that
    still holds just the message, of an agent that may take it now (never into a running Codex or Gemini
    turn, where it would be sent as a correction, and never after a paste it would take as a newline)."""
    if pane.kind.deliver_while_busy and not pane.kind.enter_delay:
        return  # Claude Code: the check that just passed is the last look
    time.sleep(pane.kind.enter_delay)
    _, reading = pane.read()
    if reading.busy:
        raise LeftInBox(busy_refusal(pane.kind).partition(": ")[0])
    verdict = pane.recogniser.check_after_paste(reading, label, text)
    if not verdict.ok:
        raise LeftInBox(verdict.reason)


def _ready_verdict(reading: BoxReading) -> Verdict:
    return Verdict(ok=reading.state is ScreenState.READY, reason=reading.reason)


def _landed(reading: BoxReading) -> bool:
    return reading.state in (ScreenState.READY, ScreenState.DIALOG)


def landed(kind: AgentKind, reading: BoxReading) -> bool:
    """Whether an Enter landed: the box empty again or a dialog; for an agent that shows no box while it
    works (Codex, Gemini: their busy screens are never typable), a busy screen with an empty box too."""
    if _landed(reading):
        return True
    return not kind.deliver_while_busy and reading.busy and not reading.box_text.strip()


def checked(
    pane: Pane,
    grower: Grower,
    check: Callable[[BoxReading], Verdict],
    *,
    wait_for: Callable[[BoxReading], bool] | None,
    typed: bool = False,
    first: Pending | None = None,
) -> BoxReading:
    """Run one check (its first look: ``first``, when started already); in a small window, grow once and
    check again there.

    Returns the reading when the check passes, or (before anything is typed)
    a reading whose state says why not; raises when text is in the box.
    """
    look, reading = pane.read(first)
    if wait_for is not None and not wait_for(reading):
        look, reading = pane.look_until(wait_for, first=(look, reading))  # the check runs on the read that ended it
    verdict = check(reading)
    if verdict.ok:
        return reading
    pane.trace(f"check refused: {verdict.reason or reading.state.value} ({reading.detail or 'no detail'})")
    if grower.can_grow(look):
        try:
            grower.grow(look)
        except TmuxError as exc:
            raise SeatRefusal(f"{verdict.reason}; growing the window to check again failed: {exc}") from None
        reading = pane.wait(lambda r: _grown(pane) and check(r).ok, timeout=RENDER_TIMEOUT)
        verdict = check(reading)
        if verdict.ok:
            return reading
    if typed:
        raise LeftInBox(verdict.reason)
    return reading


def _grown(pane: Pane) -> bool:
    look, _ = pane.read()
    return look.snapshot.width >= GROW_COLS and look.snapshot.height >= GROW_ROWS


def _paste(server: Server, pane_id: str, text: str) -> None:
    try:
        server.paste(pane_id, text)
    except TmuxError as exc:
        raise LeftInBox(f"the paste failed ({exc})") from None


# -- for the commands --------------------------------------------------------------


def pane_rows(server: Server, listing: Pending | None = None) -> list[seatpane.PaneRow] | None:
    """The server's pane rows (``listing``: that tmux call, started already), or ``None`` when tmux cannot list them."""
    try:
        return seatpane.list_panes(server, listing)
    except TmuxError:
        return None


def exit_code(results: list[Delivery]) -> int:
    """The exit status of a ``say`` (or a routed one) that ended with ``results``."""
    if all(r.result is Result.DELIVERED for r in results):
        return EXIT_DELIVERED
    if any(r.result in (Result.TYPED, Result.UNKNOWN) for r in results):
        return EXIT_TYPED
    return EXIT_REFUSED


def report(r: Delivery, out: Callable[[str], None], err: Callable[[str], None]) -> None:
    """Print what became of one seat's delivery: ``out`` when delivered, else ``err``, with what to do."""
    if r.result is Result.DELIVERED:
        out(f"delivered to {r.role}")
    elif r.result is Result.REFUSED:
        err(f"not sent to {r.role}: {r.reason}. Nothing was typed; deal with the seat and send again.")
    elif r.result is Result.UNKNOWN:
        err(f"not known whether {r.role} got it: {r.reason}.")
    else:
        err(
            f"typed into {r.role} but not submitted: {r.reason}. The text is left in the box, where it goes out "
            f"with the next Enter: run ./fabrikito flush {r.role} to submit it (and then resend), or attach and "
            "clear it."
        )
