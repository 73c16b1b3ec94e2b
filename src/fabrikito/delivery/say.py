"""``say``, the command: who speaks, to which seats, the one log line and the report.

:func:`run_say` reads the message (a :class:`Message` from the command line, or a
``str``), checks its text once (:func:`~fabrikito.delivery.engine.check_text`),
works out the sender, checks the log can be written, hands each seat's delivery
to the engine (:func:`fabrikito.delivery.engine.deliver`; to a seat on another
host, :mod:`~fabrikito.delivery.route`), appends the one log line, then prints;
with ``--queue`` (:func:`after_say`) what the seats' state refused is queued
(:mod:`~fabrikito.delivery.queue`) and one line per seat is logged.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from fabrikito import TYPE_CHECKING
from fabrikito.base import durations, statedir
from fabrikito.base.errors import FabrikitoError, StateFileError, UsageError
from fabrikito.base.tmux import Pending, Server
from fabrikito.base.values import frozen
from fabrikito.delivery.engine import (
    EXIT_DELIVERED,
    EXIT_LOG_FAILED,
    EXIT_REFUSED,
    EXIT_USAGE,
    Context,
    Delivery,
    Result,
    check_text,
    deliver,
    exit_code,
    no_trace,
    pane_rows,
    report,
)
from fabrikito.delivery.identity import UNKNOWN_SENDER
from fabrikito.delivery.oneline import OneLine, guarded
from fabrikito.log import msglog
from fabrikito.team.hosts import here_of
from fabrikito.team.teamfile import Team

if TYPE_CHECKING:
    from typing import TextIO


@frozen
class Message:
    """The message as the command line gives it: its words, or (none, or only ``-``) the command's stdin.

    A value, read by :func:`run_say` once the log line is owed (so a usage error, no message at all, is logged
    too): :meth:`text` joins the words, or reads stdin, and prepares the text (:func:`prepare_text`)."""

    words: tuple[str, ...]
    stdin: TextIO | None

    def text(self) -> str:
        if self.words and self.words != ("-",):
            return prepare_text(" ".join(self.words), from_stdin=False)
        if self.stdin is None or self.stdin.isatty():
            raise UsageError("no message: give it as arguments, or pipe it on stdin")
        # bytes that are not UTF-8 are kept (as surrogates) for the text's check to refuse and log
        return prepare_text(self.stdin.buffer.read().decode("utf-8", "surrogateescape"), from_stdin=True)


def prepare_text(text: str, *, from_stdin: bool) -> str:
    """CRLF becomes LF (tmux would turn each into two line breaks); one trailing
    newline from stdin is dropped (``echo`` and ``<<<`` add it)."""
    text = text.replace("\r\n", "\n")
    if from_stdin and text.endswith("\n"):
        text = text[:-1]
    return text


def run_say(
    team: Team,
    server: Server,
    target: str,
    text: str | Message,
    *,
    env_role: str | None,
    caller_pid: int,
    out: Callable[[str], None],
    err: Callable[[str], None],
    trace: Callable[[str], None] = no_trace,
    expire: float | None = None,
    listing: Pending | None = None,
) -> int:
    """The command ``say``: returns its exit status, and writes exactly one log line.

    ``text`` is the message, or the command line's :class:`Message`, read once
    the log line is owed.  ``env_role`` is ``TEAM_ROLE`` (``None`` or empty when
    unset); ``caller_pid`` the process that speaks (the one that ran the command,
    whichever process runs it).  Every way out, a refusal, an error or a signal, goes through
    :func:`~fabrikito.delivery.oneline.guarded`, which writes the line if the
    command has not.

    With ``expire`` (seconds: ``say --queue``), a seat refused for its state
    gets the message queued instead (:mod:`fabrikito.delivery.queue`), which
    logs one line per seat.  ``listing`` is the pane list's tmux call, started
    by the caller before it imported this module (``Server.start_list_panes``).
    """
    line = OneLine(team.log_path, target, "", msglog.Outcome.NOT_DELIVERED, sender=env_role or UNKNOWN_SENDER)

    def stopped(name: str) -> int:
        return _refused(line, f"say was stopped by {name}", err)

    def run() -> int:
        line.message = text if isinstance(text, str) else text.text()
        return _run_say(
            team,
            server,
            target,
            line,
            env_role=env_role,
            caller_pid=caller_pid,
            out=out,
            err=err,
            trace=trace,
            expire=expire,
            listing=listing,
        )

    return guarded(line, run, stopped=stopped)


def _run_say(
    team: Team,
    server: Server,
    target: str,
    line: OneLine,
    *,
    env_role: str | None,
    caller_pid: int,
    out: Callable[[str], None],
    err: Callable[[str], None],
    trace: Callable[[str], None],
    expire: float | None = None,
    listing: Pending | None = None,
) -> int:
    from fabrikito.delivery.identity import IdentityRefused, who_speaks

    text = line.message
    if not text.strip():
        return _refused(line, "the message is empty (or only white space)", err)
    if target != "all" and team.seat(target) is None:
        raise FabrikitoError(
            f"no seat '{target}' in team {team.name} (seats: {', '.join(team.roles)}; or all)", exit_code=EXIT_USAGE
        )
    server_up = os.path.exists(server.resolved_socket_path())
    panes = pane_rows(server, listing) if server_up else []
    here = here_of(team)
    try:
        line.sender = who_speaks(team, server, env_role, panes, caller_pid)
    except IdentityRefused as exc:
        line.sender = exc.log_sender
        return _refused(line, exc.message, err)
    if target == line.sender:
        return _refused(line, "a seat cannot say to itself", err)
    checked = check_text(text)
    if isinstance(checked, str):
        return _refused(line, checked, err)
    seats = [s for s in team.seats if (s.role != line.sender if target == "all" else s.role == target)]
    if not seats:
        return _refused(line, f"'all' means every seat but the sender, and {line.sender} is the team's only seat", err)
    remote = [s.role for s in seats if s.host != here]
    if remote and expire is not None:
        return _refused(line, f"--queue does not reach a seat on another host ({', '.join(remote)}) yet", err)
    if not server_up and expire is None and len(remote) < len(seats):  # with --queue the message waits
        return _refused(
            line,
            f"the team's {server.describe()} is not running, so every seat is down: start the team with ./fabrikito up",
            err,
        )
    statedir.ensure_state_dir(team.base_dir, team.name)
    unsafe_log = statedir.describe_unsafe(line.log_path)
    if unsafe_log is not None:
        line.written = True  # the spec: a link or FIFO there means no line at all
        err(f"not sent: {unsafe_log}.")
        err(f"the record could not be written to {line.log_path}, so nothing was delivered.")
        return EXIT_LOG_FAILED
    ctx = Context(team=team, server=server, panes=panes or [], trace=trace, note_box_text=expire is None)
    results: list[Delivery] = []
    if expire is not None:
        from fabrikito.delivery import queue
    for seat in seats:
        held = queue.behind_earlier(team, seat.role) if expire is not None else None
        if held is None and seat.host != here:
            from fabrikito.delivery.route import deliver_remote

            held = deliver_remote(team, seat, line.sender, text, here)
        results.append(held if held is not None else deliver(ctx, seat, line.sender, checked))
        if results[-1].interrupted:
            break
    if expire is not None:
        line.written = True  # say --queue logs one line per seat itself (queued, or what became of it)
        return after_say(team, line.sender, target, text, results, expire=expire, out=out, err=err)
    all_delivered = all(r.result is Result.DELIVERED for r in results)
    write_error = line.write(msglog.Outcome.DELIVERED if all_delivered else msglog.Outcome.NOT_DELIVERED)
    for r in results:
        report(r, out, err)
    code = exit_code(results)
    if write_error is not None:
        err(f"the record could not be written to {line.log_path}: {write_error}")
        delivered = [r.role for r in results if r.result is Result.DELIVERED]
        if delivered:
            err(f"the message WAS delivered to {', '.join(delivered)}: do not send it again.")
        else:
            err("the message was not delivered.")
        return EXIT_LOG_FAILED
    return code


def after_say(
    team: Team,
    sender: str,
    target: str,
    text: str,
    results: list[Delivery],
    *,
    expire: float,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    """``say --queue`` after its attempt: queue what the seats' state refused, log one line per seat, print."""
    from fabrikito.delivery import queue
    from fabrikito.delivery.queue import QueueFull

    code = EXIT_DELIVERED
    queued = False
    failed_log: list[str] = []
    del target  # one line per seat: a line to sec keeps no body
    for r in results:
        if r.result is Result.REFUSED and r.waitable and not r.interrupted:
            try:
                msg = queue.enqueue(team, r.role, sender, text, expire=expire, reason=r.reason)
            except (QueueFull, StateFileError, OSError) as exc:
                why = exc.message if isinstance(exc, FabrikitoError) else str(exc)
                problem = queue.log_line(
                    team, sender, r.role, msglog.Outcome.NOT_DELIVERED, msglog.body_for(sender, r.role, text)
                )
                err(f"not sent to {r.role} and not queued: {why}. Nothing was typed.")
                code = max(code, EXIT_REFUSED)
            else:
                queued = True
                problem = queue.log(team, msg, msglog.Outcome.QUEUED)
                out(f"queued {msg.id} for {r.role} (waits: {r.reason}; expires in {durations.short(expire)})")
        else:
            outcome = msglog.Outcome.DELIVERED if r.result is Result.DELIVERED else msglog.Outcome.NOT_DELIVERED
            problem = queue.log_line(team, sender, r.role, outcome, msglog.body_for(sender, r.role, text))
            say_code = EXIT_DELIVERED if r.result is Result.DELIVERED else exit_code([r])
            code = max(code, say_code)
            report(r, out, err)
        if problem is not None:
            failed_log.append(problem)
    if queued:
        from fabrikito.delivery import worker

        worker.ensure_running(team)
    if failed_log:
        err(f"the record could not be written to {team.log_path}: {failed_log[0]}")
        return EXIT_LOG_FAILED
    return code


def _refused(line: OneLine, reason: str, err: Callable[[str], None]) -> int:
    """Log ``NOT-DELIVERED`` (once), then say why nothing was typed."""
    write_error = line.write(line.failed)
    err(f"not sent to {line.recipient}: {reason.rstrip('.')}. Nothing was typed.")
    if write_error is not None:
        err(f"the record could not be written to {line.log_path}: {write_error}; the message was not delivered.")
        return EXIT_LOG_FAILED
    return EXIT_REFUSED
