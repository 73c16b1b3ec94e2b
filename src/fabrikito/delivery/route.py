"""``say`` and ``flush`` to a seat on another host: the engine runs on that host.

The sender's side (:func:`deliver_remote`, :func:`flush_remote`) runs one ssh
command, ``fabrikito _host say <team> --sender <role> <seat>`` with this
machine's voucher and the message on stdin, through the team's master
connection to the seat's host.
The host's side (:func:`serve_say`, :func:`serve_flush`) runs the same
delivery engine as a local ``say`` (:func:`fabrikito.delivery.engine.deliver`),
next to the pane, and writes the host's own log line.  It prints ``accepted``
before the engine starts and one JSON line with the outcome at the end, and
exits with ``say``'s status.

The sender's log line is written by ``say`` as for a local seat.  When the
connection fails:

* before ``accepted`` arrived, nothing was typed: ``NOT-DELIVERED`` with ssh's
  reason (unreachable, host key, login), exit 3;
* after it, the engine on the host carries on by itself (it runs without a
  terminal, so losing the connection does not stop it) and its log line says
  what happened: here the outcome is *not known*, ``NOT-DELIVERED`` with a
  reason saying where to look, exit 4; nothing is retried, so nothing is
  ever typed twice.

What the host trusts (:func:`check_routed`): the sender named on the command
line is taken only when the first line on stdin vouches for it with the
sending machine's secret (:mod:`fabrikito.team.routekeys`: the host knows only
its hash) and the sender is a seat of that machine, or ``owner`` from the team's
own machine (where the owner runs); and only from
a command that came in over ssh (``SSH_CONNECTION`` set), with no
``TEAM_ROLE`` (a seat has one), not from inside one of the host's seats (the
same walk up the process tree ``say`` does).  A seat can read its own
machine's secret, so it can claim another seat of its own machine (as
``TEAM_ROLE`` could), never a seat of another machine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from fabrikito.base.errors import FabrikitoError
from fabrikito.base.ssh import HostError
from fabrikito.delivery.engine import Delivery, Result
from fabrikito.team import hosts
from fabrikito.team.teamfile import Seat, Team

ACCEPTED = b"accepted\n"
SAY_TIMEOUT = 60.0
EXIT_NOT_FOUND = 127


def deliver_remote(team: Team, seat: Seat, sender: str, text: str, here: str | None) -> Delivery:
    """``say``'s engine for ``seat`` run on its host; the outcome as a local delivery reports it."""
    try:
        dest = hosts.dest_of(team, seat, here)
        ref, program = hosts.command_for(team, seat)
    except FabrikitoError as exc:
        return Delivery(seat.role, Result.REFUSED, exc.message)
    host = hosts.host(team, dest)
    try:
        args = ["_host", "say", ref, "--sender", sender, seat.role]
        answer = host.run(args, program=program, input=voucher(team, here) + text.encode("utf-8"), timeout=SAY_TIMEOUT)
    except HostError as exc:
        return _failed(seat.role, exc, started=exc.out.startswith(ACCEPTED))
    return _read_answer(seat.role, dest, answer.code, answer.out, answer.err)


def _failed(role: str, exc: HostError, *, started: bool) -> Delivery:
    if started:
        return Delivery(
            role,
            Result.UNKNOWN,
            f"{exc.message}. Its engine was already delivering there and finishes on its own; the host's log says "
            "whether it went (fabrikito log). Do not send it again before you have looked",
        )
    return Delivery(role, Result.REFUSED, exc.message, waitable=True)


def _read_answer(role: str, dest: str, code: int, out: bytes, err: str) -> Delivery:
    if code == EXIT_NOT_FOUND and not out.startswith(ACCEPTED):
        return Delivery(role, Result.REFUSED, not_installed(dest, err))
    if not out.startswith(ACCEPTED):
        said = err.strip().replace("\n", "; ") or f"exit status {code}"
        return Delivery(role, Result.REFUSED, f"host {dest}: fabrikito there refused it ({said})")
    try:
        data = json.loads(out[len(ACCEPTED) :].decode("utf-8", "replace").strip().splitlines()[-1])
        result = Result(data["result"])
        reason = str(data.get("reason") or "")
    except (ValueError, KeyError, IndexError, TypeError):
        return Delivery(
            role,
            Result.UNKNOWN,
            f"host {dest}: its engine ended without saying how (exit status {code}); the host's log says whether "
            "it went (fabrikito log). Do not send it again before you have looked",
        )
    return Delivery(role, result, f"on {dest}: {reason}" if reason else "", waitable=bool(data.get("waitable")))


def not_installed(dest: str, said: str = "") -> str:
    from fabrikito import __version__

    detail = f" (the host said: {said.strip()})" if said.strip() else ""
    return (
        f"host {dest}: fabrikito is not installed there (no `fabrikito` on its PATH or in ~/.local/bin){detail}. "
        f"Install the same release there, e.g. `uv tool install fabrikito=={__version__}` (or pipx), then try again"
    )


# -- the host's side ----------------------------------------------------------------------


class NotTrusted(FabrikitoError):
    exit_code = 3


def voucher(team: Team, here: str | None) -> bytes:
    """The first line a routed command reads: this machine's name and secret (:mod:`fabrikito.team.routekeys`)."""
    from fabrikito.team import routekeys

    head = {"machine": routekeys.machine_name(here), "secret": routekeys.secret(team)}
    return json.dumps(head).encode() + b"\n"


def read_voucher(data: bytes) -> tuple[tuple[str, str] | None, bytes]:
    """The voucher line of a routed command's stdin (``None`` if it has none), and the rest."""
    head, newline, rest = data.partition(b"\n")
    if not newline:
        return None, data
    try:
        given = json.loads(head)
        return (str(given["machine"]), str(given["secret"])), rest
    except (ValueError, KeyError, TypeError):
        return None, data


def check_routed(
    team: Team,
    sender: str,
    here: str | None,
    given: tuple[str, str] | None,
    environ: dict[str, str] | None = None,
) -> None:
    """Refuse a routed sender this host does not take (see the module docstring)."""
    from fabrikito.delivery.identity import OWNER, IdentityRefused, sender_from_ancestry
    from fabrikito.team import routekeys

    env = os.environ if environ is None else environ
    if env.get("TEAM_ROLE"):
        raise NotTrusted("a routed message comes over ssh, never from a seat (TEAM_ROLE is set here): use say")
    if not env.get("SSH_CONNECTION"):
        raise NotTrusted("a routed message comes over ssh, and this did not: use say")
    machine = given[0] if given is not None else "?"
    if given is None or machine == routekeys.machine_name(here) or not routekeys.vouched(team, *given):
        raise NotTrusted(
            f"the sending machine ({machine}) is not vouched for by its secret here: run `fabrikito up` on the "
            "team's machine again, which hands the machines' secrets round"
        )
    seat = team.seat(sender)
    if sender == OWNER and machine != routekeys.ORIGIN:
        raise NotTrusted(
            f"the sender 'owner' speaks only from the team's own machine, and this came from {machine}: refused"
        )
    if sender != OWNER and (seat is None or routekeys.machine_name(seat.host) != machine):
        raise NotTrusted(f"the sender {sender!r} is not a seat of {machine}, where this came from")
    from fabrikito.delivery.engine import pane_rows

    server = team.server()
    panes = pane_rows(server) if os.path.exists(server.resolved_socket_path()) else []
    try:
        inside = sender_from_ancestry(team, panes)
    except IdentityRefused as exc:
        raise NotTrusted(exc.message) from None
    if inside != OWNER:
        raise NotTrusted(f"this runs inside seat {inside} of this host: a seat sends with say")


def serve_say(team: Team, sender: str, role: str, data: bytes, *, write: Callable[[bytes], None]) -> int:
    """The host's side of a routed ``say``: check the sender, deliver, log here, answer."""
    from fabrikito.delivery import engine
    from fabrikito.delivery.oneline import OneLine, guarded
    from fabrikito.log import msglog

    here = hosts.this_host(team)
    given, rest = read_voucher(data)
    text = rest.decode("utf-8", "surrogateescape")
    line = OneLine(team.log_path, role, text, msglog.Outcome.NOT_DELIVERED, sender=sender)

    def answer(delivery: Delivery) -> int:
        ok = delivery.result is Result.DELIVERED
        log_error = line.write(msglog.Outcome.DELIVERED if ok else msglog.Outcome.NOT_DELIVERED)
        data = {
            "result": delivery.result.value,
            "reason": delivery.reason,
            "waitable": delivery.waitable,
            "log_error": log_error,
        }
        write(json.dumps(data).encode() + b"\n")
        return engine.exit_code([delivery])

    def run() -> int:
        seat = team.seat(role)
        try:
            check_routed(team, sender, here, given)
            if seat is None or seat.host != here:
                raise NotTrusted(f"no seat {role!r} of team {team.name} runs on this host ({here})")
        except NotTrusted as exc:
            write(ACCEPTED)
            return answer(Delivery(role, Result.REFUSED, exc.message))
        write(ACCEPTED)
        server = team.server()
        panes = engine.pane_rows(server) if os.path.exists(server.resolved_socket_path()) else []
        if panes is None:
            return answer(Delivery(role, Result.REFUSED, "tmux cannot list the panes of the team's server", True))
        return answer(engine.deliver(engine.Context(team=team, server=server, panes=panes), seat, sender, text))

    return guarded(line, run, stopped=lambda name: answer(Delivery(role, Result.REFUSED, f"stopped by {name}")))


# -- flush -------------------------------------------------------------------------------------------------


def flush_remote(team: Team, seat: Seat, sender: str, here: str | None) -> tuple[str, str]:
    """``flush`` of a seat on another host, run there: its outcome (a log outcome's value) and reason."""
    from fabrikito.log.msglog import Outcome

    try:
        dest = hosts.dest_of(team, seat, here)
        ref, program = hosts.command_for(team, seat)
        answer = hosts.host(team, dest).run(
            ["_host", "flush", ref, "--sender", sender, seat.role],
            program=program,
            input=voucher(team, here),
            timeout=SAY_TIMEOUT,
        )
    except FabrikitoError as exc:
        if isinstance(exc, HostError) and exc.out.startswith(ACCEPTED):
            return Outcome.NOT_FLUSHED.value, f"{exc.message}; the host's log says whether it was flushed"
        return Outcome.NOT_FLUSHED.value, exc.message
    delivery = _read_answer(seat.role, dest, answer.code, answer.out, answer.err)
    try:
        data = json.loads(answer.out[len(ACCEPTED) :].decode("utf-8", "replace").strip().splitlines()[-1])
        return Outcome(data["outcome"]).value, str(data.get("reason") or "")
    except (ValueError, KeyError, IndexError, TypeError):
        return Outcome.NOT_FLUSHED.value, delivery.reason or f"host {dest}: no outcome came back"
