"""The command line: a thin layer over the modules, and the one error boundary.

Each subcommand is one entry of :data:`COMMANDS`: its name, its one-line help,
its builder (its arguments) and its handler.  Only the command being run has
its arguments built and its handler imported, so ``say``, ``send`` and
``status`` do not pay for the others; ``fabrikito --help`` lists the commands
from the table without building any of them.  :func:`main` turns a
:class:`~fabrikito.base.errors.FabrikitoError` into a message on stderr and its
exit code; a traceback is shown only with ``FABRIKITO_DEBUG=1``.

Start-up is kept small on purpose (docs/benchmarks.md): no dataclasses here
(they import ``inspect``), and argparse only when it is needed: a plain command
line of a command is read by :mod:`fabrikito.cli.fastargs` from the command's own
builder, and everything else (``--help``, an error, an unusual option) by
argparse, laid out by :mod:`fabrikito.cli.argparsing`.
"""

from __future__ import annotations

import os
import sys

from fabrikito import TYPE_CHECKING
from fabrikito.base.errors import FabrikitoError, print_error
from fabrikito.cli.invocation import Invocation

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any

    Builder = Callable[[argparse.ArgumentParser], None]


class Command:
    """One subcommand.  ``build`` is a function or ``"module:function"``, ``handler`` is
    ``"module:function"``; a named one is imported only when its command runs."""

    __slots__ = ("build", "handler", "help", "name")

    def __init__(self, name: str, help: str, handler: str, build: Builder | str) -> None:
        self.name = name
        self.help = help
        self.handler = handler
        self.build = build


def _team_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--team", metavar="FILE", help="the team file (default: ./team.toml)")


def _json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _timeout_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for each seat's box (default 90)")


def _build_check(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    _json_arg(p)
    p.epilog = (
        "exit status: 0 nothing needs attention; 1 warnings (listed); 2 invalid or unreadable team file, or an "
        "error listed (a notify program that cannot be run)"
    )


def _build_say(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("role", help="the seat's role id, or all (every seat but the sender)")
    p.add_argument("message", nargs="*", help="the message (read from stdin when omitted or -)")
    p.add_argument("-v", "--verbose", action="store_true", help="say each step on stderr (checks, pastes, resizes)")
    p.add_argument(
        "--queue",
        action="store_true",
        help="when the seat's state refuses it (text in the box, a dialog, busy, down), queue the message: "
        "the delivery worker types it once the box is ready and empty. Prints 'queued <id>': queued is "
        "not delivered (see ./fabrikito queue)",
    )
    p.add_argument(
        "--expire",
        metavar="DURATION",
        help="with --queue: give up (EXPIRED, nothing typed) if not delivered within DURATION "
        "(default 30m, at most 24h)",
    )
    p.epilog = (
        "exit status: 0 delivered (or, with --queue, queued); 1 the log line could not be written (the output says "
        "whether it was delivered); 2 bad usage or team file; 3 refused, nothing typed; 4 typed but not submitted "
        "(see flush)"
    )


def _build_flush(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("role", help="the seat whose box holds text say left there")
    p.epilog = "exit status: 0 flushed or nothing to flush; 1 log line not written; 2 bad usage; 3 not flushed"


def _build_log(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("--from", dest="sender", action="append", metavar="ROLE", help="only lines from ROLE (repeatable)")
    p.add_argument("--to", dest="recipient", action="append", metavar="ROLE", help="only lines to ROLE (repeatable)")
    p.add_argument("--outcome", action="append", metavar="OUTCOME", help="only lines with OUTCOME (repeatable)")
    p.add_argument("--since", metavar="WHEN", help="from this local time (2026-10-30T14:05, 14:05) or age (10m, 2h)")
    p.add_argument("--until", metavar="WHEN", help="up to this local time or age, inclusive")
    p.add_argument("-n", "--last", type=int, metavar="N", help="only the last N lines shown (after the filters)")
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="print lines as they are appended, from the end (with -n N: its last N first)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (JSON lines with --follow)")
    p.epilog = (
        "exit status: 0 shown (also when stopped with Ctrl-C or when the reader of the output went away); "
        "2 bad usage (an option, a time) or team file"
    )


def _build_up(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("roles", nargs="*", metavar="ROLE", help="start only these seats (default: every seat)")
    _timeout_arg(p)
    p.add_argument(
        "--resume",
        action="store_true",
        help="start each missing seat resuming its own conversation, even one stopped by down (plain up resumes "
        "only seats that went away without down)",
    )
    p.epilog = (
        "exit status: 0 every seat up; 1 a seat failed (the output says what to do), or another up is starting the "
        "team; 2 invalid team file"
    )


def _build_restart(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("roles", nargs="+", metavar="ROLE", help="the seats to restart")
    _timeout_arg(p)
    p.epilog = "exit status: 0 every seat back up; 1 a seat failed, or another up is starting the team; 2 bad usage"


def _build_down(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("roles", nargs="*", metavar="ROLE", help="stop only these seats (default: every seat)")
    p.epilog = (
        "exit status: 0 every seat named is down; 1 a seat could not be stopped (listed); 2 bad usage or team file"
    )


def _build_status(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    _json_arg(p)
    p.add_argument(
        "--no-screens", action="store_true", help="do not read the seats' screens (one tmux call; no 'box holds text')"
    )
    p.epilog = (
        "exit status: 0 shown (a seat that is down is shown as down); 1 an error the message names; "
        "2 bad usage or team file"
    )


def _build_init(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where to write it (default: here)")
    p.add_argument("--roles", default="em,api,web", metavar="R1,R2", help="the seats' role ids (default: em,api,web)")
    p.epilog = (
        "exit status: 0 written; 1 a file is already there (nothing is overwritten) or cannot be written; 2 bad usage"
    )


def _build_queue(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    _json_arg(p)
    p.add_argument(
        "args",
        nargs="*",
        metavar="ROLE | drop ID | release ID",
        help="one seat's queue; drop ID removes a message; release ID lets a message an inbox held be typed",
    )
    p.epilog = (
        "exit status: 0 listed, dropped or released; 2 bad usage (no such seat or id); 3 the message is being typed"
    )


def _build_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", metavar="DIR", help="where the demo keeps its team file and state (default: a temp dir)")
    p.add_argument("--stop", action="store_true", help="stop a running demo: its seats and its stand-in model")
    p.add_argument(
        "--mixed", action="store_true", help="a team of one Claude Code, one Codex CLI and one Gemini CLI seat"
    )
    p.add_argument("--tmux-socket", metavar="NAME", help="its tmux server (-L NAME; default fabrikito-demo[-mixed])")
    p.epilog = (
        "exit status: 0 the demo ran (or --stop stopped it); 1 it could not be set up or run (the message says "
        "what to do); 2 bad usage"
    )


COMMANDS: tuple[Command, ...] = (
    Command(
        "check",
        "validate the team file and show each seat's permission class, hooks and kickoff",
        "fabrikito.cli.commands:cmd_check",
        _build_check,
    ),
    Command(
        "say",
        "type a labelled message into a seat's Claude Code box, or refuse with the reason",
        "fabrikito.cli.commands:cmd_say",
        _build_say,
    ),
    Command(
        "flush",
        "submit text that an interrupted say left in a seat's box (never a person's draft)",
        "fabrikito.cli.commands:cmd_flush",
        _build_flush,
    ),
    Command(
        "log",
        "read the message log: who sent what to whom, and what came of it",
        "fabrikito.log.logview:cmd_log",
        _build_log,
    ),
    Command(
        "send",
        "post a message into a Claude Code session's inbox",
        "fabrikito.inbox.send:cmd_send",
        "fabrikito.inbox.send:build_send",
    ),
    Command(
        "sessions",
        "list the live Claude Code sessions in the registry",
        "fabrikito.inbox.send:cmd_sessions",
        "fabrikito.inbox.send:build_sessions",
    ),
    Command(
        "wait-idle",
        "wait until a Claude Code session is idle (or exits)",
        "fabrikito.inbox.send:cmd_wait_idle",
        "fabrikito.inbox.send:build_wait_idle",
    ),
    Command("up", "start the team's seats and give each its kickoff", "fabrikito.cli.commands:cmd_up", _build_up),
    Command(
        "down", "stop the team's seats (the state and the log are kept)", "fabrikito.cli.commands:cmd_down", _build_down
    ),
    Command(
        "restart",
        "stop seats and start them again, each resuming its own conversation",
        "fabrikito.cli.commands:cmd_restart",
        _build_restart,
    ),
    Command(
        "queue",
        "list the messages waiting for a seat (say --queue, an inbox), drop one, or release a held one",
        "fabrikito.cli.commands:cmd_queue",
        _build_queue,
    ),
    Command(
        "status", "show every seat's state and its last messages", "fabrikito.cli.commands:cmd_status", _build_status
    ),
    Command(
        "watch",
        "a live view of the team: each seat's state, what needs you, the log; keys to attach and flush",
        "fabrikito.watch.commands:cmd_watch",
        "fabrikito.watch.commands:build_watch",
    ),
    Command(
        "events",
        "read the watcher's events: what needed the owner, when, and when it cleared",
        "fabrikito.watch.commands:cmd_events",
        "fabrikito.watch.commands:build_events",
    ),
    Command(
        "notify",
        "notify --test: run the team file's notify command once with a test event",
        "fabrikito.watch.commands:cmd_notify",
        "fabrikito.watch.commands:build_notify",
    ),
    Command(
        "authorize-host",
        "print (or --install) the authorized_keys line that lets a host's key run only fabrikito's routed say here",
        "fabrikito.launch.routelogin:cmd_authorize_host",
        "fabrikito.launch.routelogin:build_authorize_host",
    ),
    Command(
        "qualify",
        "check your Claude Code release offline against what fabrikito reads, and accept it when it passes",
        "fabrikito.qualify.command:cmd_qualify",
        "fabrikito.qualify.command:build_qualify",
    ),
    Command(
        "init",
        "write a starting team: a commented team.toml and the shared prompt (never overwrites)",
        "fabrikito.cli.commands:cmd_init",
        _build_init,
    ),
    Command(
        "demo",
        "run the example team offline: real Claude Code seats, a stand-in model",
        "fabrikito.cli.commands:cmd_demo",
        _build_demo,
    ),
)


def build_parser(argv: Sequence[str] = (), commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """The parser for ``argv``: only the command ``argv`` names, with its arguments;
    every command, none built, when it names none or one that does not exist."""
    from fabrikito.cli.argparsing import HelpFormatter, Parser, untranslated

    untranslated()
    parser = Parser(
        prog="fabrikito",
        description="Run a team of Claude Code seats in tmux and carry messages between them.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _command_name(argv)
    known = [command for command in commands if command.name == chosen]
    for command in known or commands:  # the list (--help, an unknown command) or the one being run
        p = sub.add_parser(command.name, help=command.help, description=command.help, formatter_class=HelpFormatter)
        if command.name == chosen:
            _builder(command)(p)
            p.set_defaults(_handler=command.handler)
    return parser


def _builder(command: Command) -> Builder:
    return _resolve(command.build) if isinstance(command.build, str) else command.build


def _command_name(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the
    options before a command, ``--help`` and ``--version``, take no value)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def _resolve(path: str) -> Callable[..., Any]:
    """``"module:function"``, imported now (by ``__import__``: importlib's package costs 0.5 ms)."""
    module_name, _, func_name = path.partition(":")
    return getattr(__import__(module_name, fromlist=[func_name]), func_name)  # type: ignore[no-any-return]


def parse(argv: Sequence[str], commands: Sequence[Command] = COMMANDS) -> tuple[Any, argparse.ArgumentParser | None]:
    """The arguments of ``argv``, and the parser when argparse read them.

    A plain command line (the command first, its options, then its
    positionals) is read by :mod:`fabrikito.cli.fastargs` into the same values
    argparse gives (tests/unit/test_fastargs.py compares them); anything else,
    including ``--help`` and every error, goes to argparse.
    """
    known = [command for command in commands if argv and command.name == argv[0]]
    if known:
        from fabrikito.cli import fastargs

        args = fastargs.parse(argv, _builder(known[0]), handler=known[0].handler)
        if args is not None:
            return args, None
    parser = build_parser(argv, commands)
    return parser.parse_args(argv), parser


def main(argv: Sequence[str] | None = None, invocation: Invocation | None = None) -> int:
    """Run the command ``argv`` (default: this process's); ``invocation`` says for whom and where it prints
    (default: this process, :meth:`Invocation.here`; the command server hands its child the asker's)."""
    if argv is None:
        argv = sys.argv[1:]
    inv = Invocation.here() if invocation is None else invocation
    if argv[:1] == ["_host"]:  # a host's side of a team across hosts, run over ssh (launch/hostside.py); unlisted
        try:
            return int(_resolve("fabrikito.launch.hostside:main")(argv[1:]))
        except FabrikitoError as exc:
            print_error(f"fabrikito _host: {exc.message}")
            return exc.exit_code
    served = argv[:1] and argv[0] in ("say", "flush", "status")  # the server's commands (cli/wire.py: SERVED)
    if served and not inv.served and os.environ.get("FABRIKITO_SERVER") != "0":
        from fabrikito.cli import wire  # the team's command server runs it, when there is one

        code = wire.ask(list(argv))
        if code is not None:
            inv.handed = True
            return code
        inv.held = wire.holding()  # a stop signal came first: it stops the command here, once it can
    command = argv[0] if argv else ""
    try:
        code = _run(argv, inv)
    except BaseException:
        _release(inv, command)
        raise
    interrupted = _release(inv, command)
    return code if interrupted is None else interrupted


def _release(inv: Invocation, command: str) -> int | None:
    """Let through a stop signal held that no guard took: it ends the command now, as it would have
    (Ctrl-C: ``interrupted``, 130; ``None``: none came)."""
    if inv.held:
        from fabrikito.cli import wire

        inv.held = False
        try:
            wire.release()
        except KeyboardInterrupt:
            print_error(f"fabrikito {command}: interrupted")
            return 130
    return None


def _run(argv: Sequence[str], inv: Invocation) -> int:
    if inv.held and argv[:1] not in (["say"], ["flush"]):  # no guard to wait for (cli/wire.py: GUARDED)
        interrupted = _release(inv, argv[0])
        if interrupted is not None:
            return interrupted
    args, parser = parse(argv)
    if args.version:
        from fabrikito import __version__

        inv.out(f"fabrikito {__version__}")
        return 0
    handler_path = getattr(args, "_handler", None)
    if handler_path is None:
        if parser is not None:
            parser.print_help(sys.stderr)
        return 2
    args.invocation = inv
    try:
        code = _resolve(handler_path)(args)
        return int(code)
    except FabrikitoError as exc:
        if os.environ.get("FABRIKITO_DEBUG") == "1":
            raise
        print_error(f"fabrikito {args.command}: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        print_error(f"fabrikito {args.command}: interrupted")
        return 130


def run() -> None:
    """The ``fabrikito`` command.  A command the team's command server ran ends this process at once, its
    streams flushed (``os._exit``): nothing ran here, and Python's own ending took 2-4 ms of a served
    ``status`` (docs/decisions/0041)."""
    inv = Invocation.here()
    code = main(invocation=inv)
    if inv.handed:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code & 0xFF)
    sys.exit(code)
