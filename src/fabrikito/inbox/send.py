"""``fabrikito send``, ``fabrikito sessions`` and ``fabrikito wait-idle``: the inbox from the command line.

A builder is imported by :mod:`fabrikito.cli` when its command runs, so this
module imports nothing heavy at the top; the handlers import
:mod:`fabrikito.inbox` (and the team file and message log) when they run.

``--to`` takes, in this order: a role of the current team (the team file's
roster gives its session name), ``uds:/path``, or a session name.

Without ``--to``, inside a Claude Code hook or Bash command, the target is
``uds:$CLAUDE_CODE_MESSAGING_SOCKET``: the session that runs it.

Who speaks is told by ``say``'s rules (:mod:`fabrikito.delivery.identity`):
``TEAM_ROLE`` (a role of the team, or ``live-test``), else the seat whose pane
this runs in, else ``owner``; a ``TEAM_ROLE`` that names no sender is a usage
error and nothing is sent.  The text goes out as ``[from <sender>] <text>``
unless ``--no-label``, or the target is fabrikito's inbox of a seat that is not
Claude Code: that inbox labels each message by the process that sent it (the
seat whose pane ``send`` runs in, else ``unverified-sender``: a label written
into the text would be typed as text), and ``send`` keeps the connection until
the inbox has read it.

The team: ``--team``, else ``$FABRIKITO_TEAM``, else ``./team.toml`` when there
is one.  For a ``uds:`` target, a ``./team.toml`` that cannot be read, or whose
seats do not include the receiver, is left out: it has nothing to do with
this send.

The message log: when the sender or the target is a seat of the team,
``send`` appends one line to ``.state/<team>/messages.log``, before it prints
anything about the outcome, in the format of the other lines (the text
without its label; the sender field says who).  The outcome is
``sent`` when the message was written to the socket (in the inbox, not yet
delivered: the same meaning as the hook's ``sent``) and ``NOT-SENT`` when it
was not.
"""

from __future__ import annotations

import os
import sys
import time

from fabrikito import TYPE_CHECKING
from fabrikito.base.errors import FabrikitoError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping
    from typing import Any

    from fabrikito.inbox import client, sessions
    from fabrikito.team.teamfile import Seat, Team

# The exit codes are fabrikito.inbox.EXIT_*; the table is here so that building the
# parser does not import the inbox library.
EXIT_CODES_HELP = """\
exit status:
  0   written to the session's inbox socket (in its inbox, not yet known to be delivered)
  1   other failure (send: written or not, the message log line could not be written)
  2   usage: no message, an empty message, text that is not valid Unicode, no --to outside a hook,
      a --timeout out of range, or a TEAM_ROLE that names no sender
  3   no such session in the registry
  4   ambiguous: several live sessions match (candidates listed; add --cwd)
  5   stale: the matching registry files belong to processes that are gone
  6   connection refused or failed (socket missing, refused, not permitted, no answer)
  7   too large: over 1,000,000 characters serialized; nothing was sent
  8   connected, but the message could not be written whole
  9   wait-idle: the session exited
  10  wait-idle: the timeout passed"""


def _epilog() -> str:
    return EXIT_CODES_HELP


def _common(p: argparse.ArgumentParser) -> None:
    p.epilog = _epilog()
    p.add_argument(
        "--team", metavar="FILE", help="the team file, for roles and the message log (default: ./team.toml if present)"
    )


def build_send(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument(
        "--to",
        metavar="TARGET",
        help="a roster role, a session name, or uds:/socket/path (inside a Claude Code hook or Bash command: "
        "default $CLAUDE_CODE_MESSAGING_SOCKET, the session that runs it)",
    )
    p.add_argument("--cwd", metavar="DIR", help="pick the session started in DIR when several share the name")
    p.add_argument(
        "--timeout",
        type=post_timeout,
        default=5.0,
        metavar="S",
        help=f"seconds for connect and write, more than 0 and at most {RECEIVER_LINE_LIMIT:g} (default 5)",
    )
    p.add_argument("--no-label", action="store_true", help="send the text as it is, without the [from <sender>] label")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("message", nargs="?", help="the message (default: read from stdin; '-' reads stdin too)")


#: The receiver closes a connection that has not delivered a whole line within this many seconds
#: (message-claude.md): a longer timeout could only end in a message dropped.
RECEIVER_LINE_LIMIT = 15.0


def post_timeout(value: str) -> float:
    """``--timeout``: a number of seconds, more than 0 and at most :data:`RECEIVER_LINE_LIMIT`."""
    import argparse  # only argparse reads --timeout (fabrikito.cli.fastargs leaves a typed option to it)
    import math

    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or not 0 < seconds <= RECEIVER_LINE_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{value} is out of range: give more than 0 and at most {RECEIVER_LINE_LIMIT:g} seconds (the receiver "
            f"drops a connection that has not delivered a whole line within {RECEIVER_LINE_LIMIT:g} s)"
        )
    return seconds


def build_sessions(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="also list stale registry files (process gone)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.epilog = "exit status: 0 listed (none is not an error); 1 an error the message names; 2 bad usage"


def build_wait_idle(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("name", metavar="NAME", help="a session name or a roster role")
    p.add_argument("--cwd", metavar="DIR", help="pick the session started in DIR when several share the name")
    p.add_argument("--timeout", type=float, metavar="S", help="give up after S seconds (default: wait for ever)")


# -- helpers ------------------------------------------------------------------------------------


def _load_team(path: str | None) -> Team | None:
    if path is None and not team_file_here():
        return None
    from fabrikito.team import teamfile

    return teamfile.load(path)


def team_file_here() -> bool:
    """Whether ``teamfile.resolve_team_path(None)`` names a file that is there, told without importing
    the team file's module (a send outside any team does not need it)."""
    return os.path.exists(os.environ.get("FABRIKITO_TEAM") or "team.toml")


def _read_message(arg: str | None) -> str:
    from fabrikito.inbox.sessions import InvalidMessageError

    if arg is not None and arg != "-":
        return arg
    if sys.stdin is None or (arg is None and sys.stdin.isatty()):
        raise InvalidMessageError("no message: pass it as an argument, or pipe it on stdin")
    raw = sys.stdin.buffer.read()
    text = raw.decode("utf-8", "surrogateescape")
    # One trailing newline is how echo and heredocs end; it is not part of the message.
    return text.removesuffix("\n")


def _fmt_seconds(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def _preview(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# -- send -------------------------------------------------------------------------------------


def cmd_send(args: argparse.Namespace) -> int:
    from fabrikito.base.errors import TeamFileError, UsageError
    from fabrikito.inbox import client, recent, sessions

    env = os.environ
    to: str | None = args.to
    if to is None:
        hook_socket = env.get(sessions.ENV_SOCKET)
        if not hook_socket:
            raise UsageError(
                "no --to: give a roster role, a session name or uds:/socket/path (inside a Claude Code hook it "
                f"defaults to ${sessions.ENV_SOCKET}, which is not set here)"
            )
        to = sessions.UDS_PREFIX + hook_socket
    uds = to.startswith(sessions.UDS_PREFIX)
    implicit = args.team is None and not env.get("FABRIKITO_TEAM")
    try:
        team = _load_team(args.team)
    except TeamFileError:
        if not (uds and implicit):
            raise
        team = None  # a team file here that cannot be read has nothing to say about a socket address
    name = to
    recipient: Seat | None = None
    if team is not None and not uds:
        recipient = team.seat(to) or team.seat_by_session(to)
        if recipient is not None:
            name = recipient.session
    sender = "?"
    text: str | None = None
    target: sessions.Target | None = None
    try:
        text = _read_message(args.message)
        client.check_text(text)
        if not (uds and implicit):
            sender = _sender(team, env)
        target = sessions.resolve(name, args.cwd, env=env)
        if team is not None and recipient is None and target.name is not None:
            recipient = team.seat_by_session(target.name)
        if uds and implicit:
            if recipient is None:
                team = None  # ./team.toml, and the receiver is none of its seats: it has nothing to do with this send
            sender = _sender(team, env)
        to_inbox = target.entry is not None and target.entry.fabrikito_inbox
        # fabrikito's inbox labels a message by its sender's process (inbox/peer.py): a label here would be
        # typed as text after it.
        sent_text = text if args.no_label or to_inbox else f"[from {sender}] {text}"
        warning = recent.repeat_warning(recent.last_send(target.socket_path), sent_text, time.time())
        if warning is not None:
            print(f"fabrikito send: warning: {warning}", file=sys.stderr)
        receiver_mode = recipient.effective_mode if recipient is not None else None
        report = client.send(to, sent_text, env=env, receiver_mode=receiver_mode, timeout=args.timeout, target=target)
    except FabrikitoError as exc:
        if text is not None:
            _log(team, sender, recipient, to, text, sent=False, error=exc)
        raise
    recent.remember(target.socket_path, sent_text, time.time())
    logged = _log(team, sender, recipient, to, text, sent=True, error=None)
    _print_report(report, sent_text, as_json=args.json)
    if logged is not None:
        print(
            f"fabrikito send: the message WAS written, but its line could not be added to {logged}: "
            "do not send it again.",
            file=sys.stderr,
        )
        return 1
    return 0


def _sender(team: Team | None, env: Mapping[str, str]) -> str:
    """Who is speaking, by ``say``'s rules (:mod:`fabrikito.delivery.identity`)."""
    from fabrikito.base.errors import UsageError
    from fabrikito.delivery import identity

    role = env.get("TEAM_ROLE") or None
    try:
        if team is None:
            return identity.sender_without_team(role)
        return identity.sender_for(team, team.server(), role)
    except identity.IdentityRefused as exc:
        raise UsageError(f"{exc.message} Nothing was sent.") from None


def _print_report(report: client.SendReport, text: str, *, as_json: bool) -> None:
    import json

    if as_json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
        return
    r = report.result
    print(
        f"written: “{_preview(text)}” → {report.target.describe()}; {r.bytes_written:,} bytes in "
        f"{_fmt_seconds(r.total_seconds)}, auth: {report.token.kind.value} token"
    )
    for line in report.fate[1:]:
        print(f"  {line}")
    print("  Written is not delivered: nothing comes back on the socket.")


def _log(
    team: Team | None,
    sender: str,
    recipient: Seat | None,
    to: str,
    text: str,
    *,
    sent: bool,
    error: Exception | None,
) -> str | None:
    """Append the log line when the team is involved; return the log path when it could not be written."""
    if team is None:
        return None
    sender_is_seat = team.seat(sender) is not None
    if not sender_is_seat and recipient is None:
        return None
    recipient_field = recipient.role if recipient is not None else to
    path = team.log_path
    try:
        from fabrikito.log import msglog

        outcome = msglog.Outcome.SENT if sent else msglog.Outcome.NOT_SENT
        body = msglog.body_for(sender, recipient_field, text)
        line = msglog.format_line(None, sender, recipient_field, outcome, body)
        msglog.append_checked(path, line)
    except (FabrikitoError, OSError) as exc:  # the record failing must not hide the outcome
        if error is not None:
            print(f"fabrikito send: the log line could not be written to {path} ({exc})", file=sys.stderr)
            return None
        print(f"fabrikito send: could not write the log line ({exc})", file=sys.stderr)
        return str(path)
    return None


# -- sessions ---------------------------------------------------------------------------------


def cmd_sessions(args: argparse.Namespace) -> int:
    import json

    from fabrikito.inbox import sessions

    entries = sessions.list_sessions()
    shown = [e for e in entries if args.all or not e.stale]
    if args.json:
        envelope: dict[str, Any] = {
            "version": 1,
            "sessionsDir": str(sessions.sessions_dir()),
            "sessions": [e.to_json() for e in shown],
        }
        print(json.dumps(envelope, ensure_ascii=False, indent=2))
        return 0
    if not shown:
        print(f"no live sessions in {sessions.sessions_dir()}")
        return 0
    rows = [("NAME", "STATUS", "PID", "CWD", "SOCKET")]
    for e in shown:
        status = e.status or "?"
        if e.waiting_for:
            status += f" ({e.waiting_for})"
        if e.stale:
            status = f"STALE ({e.liveness.value})"
        rows.append((e.name or "?", status, str(e.pid), e.cwd or "?", e.socket_path or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return 0


# -- wait-idle --------------------------------------------------------------------------------


def cmd_wait_idle(args: argparse.Namespace) -> int:
    from fabrikito.inbox import client, recent, sessions

    team = _load_team(args.team)
    name: str = args.name
    if team is not None:
        seat = team.seat(name)
        if seat is not None:
            name = seat.session
    entry = sessions.find(name, args.cwd)
    last = recent.last_send(entry.socket_path) if entry.socket_path else None
    since = last.sent_at if last is not None else None
    final = client.wait_idle(entry, timeout=args.timeout, since=since)
    print(f"{final.name or name} (pid {final.pid}) is idle")
    if since is not None and not client.turn_started_after(final, since) and final.status_updated_at is not None:
        print(
            f"  (no turn began for the message sent to it {time.time() - since:.0f} s ago: it may have been held, "
            "refused or dropped)"
        )
    return 0
