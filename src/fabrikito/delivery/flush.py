"""``flush <role>``: submit text that ``say`` itself left in a seat's box.

``say`` writes what it is about to paste into ``.state/<team>/say/paste-<role>``
and removes it after its Enter landed, so a crash or a partial paste leaves
it.  ``flush`` submits the box only when the box, white space left out, is a
non-empty start of that record (label + message), or the record's label and
one ``[Pasted text #N]`` placeholder; for a message to or from ``sec`` the
record keeps only the label, so only a label left alone matches.  Anything
else is refused and left as it is: text a person typed is never cleared or
submitted.  It runs ``say``'s pane checks, reads the box again right before
its one Enter (refusing if it changed), sends that one Enter with no retry,
and logs ``FLUSHED``, ``NOT-FLUSHED`` or ``FLUSH-NOTHING`` with the message
``[flush]``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from fabrikito import TYPE_CHECKING
from fabrikito.base import statedir
from fabrikito.base.errors import FabrikitoError, StateFileError, TmuxError
from fabrikito.base.tmux import Server
from fabrikito.base.values import frozen
from fabrikito.delivery import engine, seatlock
from fabrikito.delivery.grow import Grower
from fabrikito.delivery.identity import UNKNOWN_SENDER
from fabrikito.delivery.oneline import Interrupted, OneLine, guarded, signals_raise
from fabrikito.log import msglog
from fabrikito.screen import ScreenState, Verdict
from fabrikito.team.teamfile import Seat, Team

if TYPE_CHECKING:
    from typing import Any

FLUSH_MESSAGE = "[flush]"
EXIT_FLUSHED = 0
EXIT_NOT_FLUSHED = 3


@frozen
class FlushResult:
    outcome: msglog.Outcome
    reason: str


def _read_record(team: Team, role: str) -> dict[str, Any] | None:
    try:
        raw = statedir.read_plain(seatlock.paste_record_path(team, role))
    except (OSError, StateFileError):
        return None
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("label"), str) else None


def flush_seat(ctx: engine.Context, seat: Seat) -> FlushResult:
    statedir.ensure_state_dir(ctx.team.base_dir, ctx.team.name)
    statedir.ensure_dir(seatlock.say_dir(ctx.team))
    try:
        with signals_raise(), seatlock.seat_lock(ctx.team, seat.role):
            return _flush_locked(ctx, seat)
    except seatlock.SeatRefusal as exc:
        return FlushResult(msglog.Outcome.NOT_FLUSHED, str(exc))
    except Interrupted as exc:
        return FlushResult(
            msglog.Outcome.NOT_FLUSHED, f"flush was stopped by {exc}: attach and look whether the box was submitted"
        )


def _flush_locked(ctx: engine.Context, seat: Seat) -> FlushResult:
    pane, first = engine.attach(ctx, seat)
    grower = Grower(ctx.server, pane.window_id)
    try:
        _, reading = pane.read(first)
        if reading.busy and not pane.kind.deliver_while_busy:
            return FlushResult(msglog.Outcome.NOT_FLUSHED, _busy(pane.kind))
        if reading.state is ScreenState.READY:
            engine.box_done(ctx.team, seat.role)
            return FlushResult(msglog.Outcome.FLUSH_NOTHING, "the box is empty: nothing to flush")
        record = _read_record(ctx.team, seat.role)
        if record is None:
            return FlushResult(
                msglog.Outcome.NOT_FLUSHED,
                "there is no paste record for this seat, so the text in its box was not left by say: "
                "it is left as it is (attach and deal with it)",
            )
        label = str(record["label"])
        body = record.get("body")
        body_text = body if isinstance(body, str) else None

        def matches(r: Any) -> Verdict:
            ok = r.state is ScreenState.BOX_TEXT and pane.recogniser.flush_matches(r, label, body_text or "")
            return Verdict(ok=ok, reason=_why_not(r))

        reading = engine.checked(pane, grower, matches, wait_for=None)
        if not matches(reading).ok:
            return FlushResult(msglog.Outcome.NOT_FLUSHED, _why_not(reading))
        again = pane.wait(lambda r: False, timeout=0.15)
        if again.box_text != reading.box_text or not matches(again).ok:
            return FlushResult(
                msglog.Outcome.NOT_FLUSHED, "the box changed while flush was looking at it: left as it is"
            )
        if again.busy and not pane.kind.deliver_while_busy:
            return FlushResult(
                msglog.Outcome.NOT_FLUSHED, engine.busy_refusal(pane.kind).replace("say waits", "flush waits")
            )
        try:
            ctx.server.send_keys(pane.pane_id, "Enter")
        except TmuxError as exc:
            return FlushResult(msglog.Outcome.NOT_FLUSHED, f"the Enter could not be sent ({exc})")
        after = pane.after_enter()
        if not pane.landed(after):
            return FlushResult(
                msglog.Outcome.NOT_FLUSHED,
                "one Enter was sent but the box was not seen empty afterwards; flush does not retry: attach and look",
            )
        engine.box_done(ctx.team, seat.role)
        return FlushResult(msglog.Outcome.FLUSHED, "")
    finally:
        grower.restore_quietly()


def _busy(kind: Any) -> str:
    return (
        engine.busy_refusal(kind).replace("say waits", "flush waits").replace(" (send again then, or with --queue)", "")
    )


def _why_not(reading: Any) -> str:
    if reading.state is ScreenState.BOX_TEXT:
        return (
            "the text in the box does not match what say left there (its paste record): flush submits only "
            "that, so the box is left as it is; attach and look"
        )
    return reading.reason or "screen not recognised as ready"


def run_flush(
    team: Team,
    server: Server,
    role: str,
    *,
    env_role: str | None,
    caller_pid: int,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    """The command ``flush``: returns its exit status, and writes exactly one log line (see ``say``);
    ``caller_pid`` is the process that speaks."""
    line = OneLine(team.log_path, role, FLUSH_MESSAGE, msglog.Outcome.NOT_FLUSHED, sender=env_role or UNKNOWN_SENDER)

    def stopped(name: str) -> int:
        return _report(line, FlushResult(msglog.Outcome.NOT_FLUSHED, f"flush was stopped by {name}"), out, err)

    def run() -> int:
        from fabrikito.delivery.identity import IdentityRefused, who_speaks

        seat = team.seat(role)
        if seat is None:
            raise FabrikitoError(f"no seat '{role}' in team {team.name} (seats: {', '.join(team.roles)})", exit_code=2)
        server_up = os.path.exists(server.resolved_socket_path())
        panes = engine.pane_rows(server) if server_up else []
        try:
            line.sender = who_speaks(team, server, env_role, panes, caller_pid)
        except IdentityRefused as exc:
            line.sender = exc.log_sender
            return _report(line, FlushResult(msglog.Outcome.NOT_FLUSHED, exc.message), out, err)
        from fabrikito.team.hosts import here_of

        here = here_of(team)
        if seat.host != here:  # on another host: flushed there (delivery/route.py), logged on both
            from fabrikito.delivery.route import flush_remote

            outcome, reason = flush_remote(team, seat, line.sender, here)
            return _report(line, FlushResult(msglog.Outcome(outcome), reason), out, err)
        if not server_up:
            reason = f"the team's {server.describe()} is not running, so the seat is down"
            return _report(line, FlushResult(msglog.Outcome.NOT_FLUSHED, reason), out, err)
        statedir.ensure_state_dir(team.base_dir, team.name)
        result = flush_seat(engine.Context(team=team, server=server, panes=panes or []), seat)
        return _report(line, result, out, err)

    return guarded(line, run, stopped=stopped)


def _report(line: OneLine, result: FlushResult, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    """Log the outcome (once), then print it; returns the exit status."""
    write_error = line.write(result.outcome)
    role = line.recipient
    if result.outcome is msglog.Outcome.FLUSHED:
        out(
            f"flushed {role}: the text say left in its box went to the seat as a turn. Resend the message whole "
            "if it was cut short."
        )
    elif result.outcome is msglog.Outcome.FLUSH_NOTHING:
        out(f"nothing to flush in {role}: {result.reason}")
    else:
        err(f"not flushed {role}: {result.reason.rstrip('.')}")
    if write_error is not None:
        done = "was" if result.outcome is msglog.Outcome.FLUSHED else "was not"
        err(f"the record could not be written to {line.log_path}: {write_error}; the box {done} submitted.")
        return 1
    return EXIT_NOT_FLUSHED if result.outcome is msglog.Outcome.NOT_FLUSHED else EXIT_FLUSHED


def serve_flush(team: Team, sender: str, role: str, data: bytes, *, write: Callable[[bytes], None]) -> int:
    """The host's side of a routed ``flush`` (:mod:`~fabrikito.delivery.route`): check the sender, flush, log here,
    answer."""
    from fabrikito.delivery.route import ACCEPTED, NotTrusted, check_routed, read_voucher
    from fabrikito.team import hosts

    here = hosts.this_host(team)
    line = OneLine(team.log_path, role, FLUSH_MESSAGE, msglog.Outcome.NOT_FLUSHED, sender=sender)

    def answer(outcome: msglog.Outcome, reason: str) -> int:
        log_error = line.write(outcome)
        write(json.dumps({"outcome": outcome.value, "reason": reason, "log_error": log_error}).encode() + b"\n")
        return EXIT_NOT_FLUSHED if outcome is msglog.Outcome.NOT_FLUSHED else EXIT_FLUSHED

    def run() -> int:
        seat = team.seat(role)
        write(ACCEPTED)
        try:
            check_routed(team, sender, here, read_voucher(data)[0])
            if seat is None or seat.host != here:
                raise NotTrusted(f"no seat {role!r} of team {team.name} runs on this host ({here})")
        except NotTrusted as exc:
            return answer(msglog.Outcome.NOT_FLUSHED, exc.message)
        server = team.server()
        panes = engine.pane_rows(server) if os.path.exists(server.resolved_socket_path()) else []
        if panes is None:
            return answer(msglog.Outcome.NOT_FLUSHED, "tmux cannot list the panes of the team's server")
        result = flush_seat(engine.Context(team=team, server=server, panes=panes), seat)
        return answer(result.outcome, result.reason)

    return guarded(line, run, stopped=lambda name: answer(msglog.Outcome.NOT_FLUSHED, f"stopped by {name}"))
