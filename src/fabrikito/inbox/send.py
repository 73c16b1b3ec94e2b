"""``fabrikito send``, ``fabrikito sessions`` and ``fabrikito wait-idle``: the inbox from the command line.

The builders are imported by :mod:`fabrikito.cli` when the parser is built,
so this module imports nothing heavy at the top; the handlers import
:mod:`fabrikito.inbox` (and the team file and message log) when they run.

``--to`` takes, in this order: a role of the current team (the team file's
roster gives its session name), ``uds:/path``, or a session name.

The message log: when the sender (``TEAM_ROLE``) or the target is a seat of
the team, ``send`` appends one line to ``.state/<team>/messages.log``, before
it prints anything about the outcome, in the format of the other lines.  The
sender is ``TEAM_ROLE`` when that is a roster role or ``live-test``; ``?``
when it is set to anything else, or unset inside a Claude Code session (a seat
whose environment lost it cannot be told apart); ``owner`` otherwise (a shell,
a script or a hook outside every seat, run for the owner).  The outcome is
``sent`` when the message was written to the socket (in the inbox, not yet
delivered: the same meaning as the hook's ``sent``) and ``NOT-SENT`` when it
was not.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from fabrikito.base.errors import FabrikitoError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from fabrikito.inbox import client, sessions
    from fabrikito.team.teamfile import Team

LIVE_TEST_SENDER = "live-test"


# The exit codes are fabrikito.inbox.EXIT_*; the table is here so that building the
# parser (on every command) does not import the inbox library.
EXIT_CODES_HELP = """\
exit status:
  0   written to the session's inbox socket (in its inbox, not yet known to be delivered)
  1   other failure (send: written or not, the message log line could not be written)
  2   usage: no message, an empty message, or text that is not valid Unicode
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
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = _epilog()
    p.add_argument(
        "--team", metavar="FILE", help="the team file, for roles and the message log (default: ./team.toml if present)"
    )


def build_send(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--to", required=True, metavar="TARGET", help="a roster role, a session name, or uds:/socket/path")
    p.add_argument("--cwd", metavar="DIR", help="pick the session started in DIR when several share the name")
    p.add_argument("--timeout", type=float, default=5.0, metavar="S", help="seconds for connect and write (default 5)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("message", nargs="?", help="the message (default: read from stdin; '-' reads stdin too)")


def build_sessions(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="also list stale registry files (process gone)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def build_wait_idle(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("name", metavar="NAME", help="a session name or a roster role")
    p.add_argument("--cwd", metavar="DIR", help="pick the session started in DIR when several share the name")
    p.add_argument("--timeout", type=float, metavar="S", help="give up after S seconds (default: wait for ever)")


# -- helpers ------------------------------------------------------------------------------------


def _load_team(path: str | None) -> Team | None:
    from fabrikito.team import teamfile

    if path is None and not teamfile.resolve_team_path(None).exists():
        return None
    return teamfile.load(path)


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


def sender_of(team: Team | None, env: Mapping[str, str]) -> str:
    """The log's sender field: a roster role or live-test, ``?``, or ``owner`` (see the module docstring)."""
    role = env.get("TEAM_ROLE")
    if role:
        if role == LIVE_TEST_SENDER or (team is not None and team.seat(role) is not None):
            return role
        return "?"
    if env.get("CLAUDECODE") or env.get("CLAUDE_CODE_MESSAGING_SOCKET"):
        return "?"
    return "owner"


def _fmt_seconds(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def _preview(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# -- send -------------------------------------------------------------------------------------


def cmd_send(args: argparse.Namespace) -> int:
    from fabrikito.inbox import client, sessions

    env = os.environ
    team = _load_team(args.team)
    to: str = args.to
    name = to
    recipient_role: str | None = None
    receiver_mode: str | None = None
    if team is not None:
        seat = team.seat(to) if not to.startswith(sessions.UDS_PREFIX) else None
        if seat is None and not to.startswith(sessions.UDS_PREFIX):
            seat = team.seat_by_session(to)
        if seat is not None:
            name = seat.session
            recipient_role = seat.role
            receiver_mode = seat.effective_mode
    sender = sender_of(team, env)
    text: str | None = None
    target: sessions.Target | None = None
    try:
        text = _read_message(args.message)
        client.check_text(text)
        target = sessions.resolve(name, args.cwd, env=env)
        if team is not None and recipient_role is None and target.name is not None:
            seat = team.seat_by_session(target.name)
            if seat is not None:
                recipient_role = seat.role
                receiver_mode = seat.effective_mode
        report = client.send(to, text, env=env, receiver_mode=receiver_mode, timeout=args.timeout, target=target)
    except sessions.InboxError as exc:
        if text is not None:
            _log(team, sender, recipient_role, to, text, sent=False, error=exc)
        raise
    logged = _log(team, sender, recipient_role, to, text, sent=True, error=None)
    _print_report(report, text, as_json=args.json)
    if logged is not None:
        print(
            f"fabrikito send: the message WAS written, but its line could not be added to {logged}: "
            "do not send it again.",
            file=sys.stderr,
        )
        return 1
    return 0


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
    recipient_role: str | None,
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
    if not sender_is_seat and recipient_role is None:
        return None
    recipient = recipient_role if recipient_role is not None else to
    path = team.log_path
    try:
        from fabrikito.log import msglog

        outcome = msglog.Outcome.SENT if sent else msglog.Outcome.NOT_SENT
        body = msglog.body_for(sender, recipient, text)
        line = msglog.format_line(None, sender, recipient, outcome, body)
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
    from fabrikito.inbox import client, sessions

    team = _load_team(args.team)
    name: str = args.name
    if team is not None:
        seat = team.seat(name)
        if seat is not None:
            name = seat.session
    entry = sessions.find(name, args.cwd)
    final = client.wait_idle(entry, timeout=args.timeout)
    print(f"{final.name or name} (pid {final.pid}) is idle")
    return 0
