"""The command line: a thin layer over the modules, and the one error boundary.

Each subcommand has a builder (its arguments) and a handler, named by module
path and imported only once the command line is parsed, so ``say`` and the
hook do not pay for what they do not use.  :func:`main` turns a
:class:`~fabrikito.errors.FabrikitoError` into a message on stderr and its
exit code; a traceback is shown only with ``FABRIKITO_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabrikito.errors import FabrikitoError

Builder = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    handler: str  # "module:function", imported after parsing
    build: Builder


def _team_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--team", metavar="FILE", help="the team file (default: ./team.toml)")


def _json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _build_check(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    _json_arg(p)


COMMANDS: tuple[Command, ...] = (
    Command(
        "check",
        "validate the team file and show each seat's permission class, hooks and kickoff",
        "fabrikito.commands:cmd_check",
        _build_check,
    ),
)


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabrikito",
        description="Run a team of Claude Code seats in tmux and carry messages between them.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.build(p)
        p.set_defaults(_handler=command.handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from fabrikito import __version__

        print(f"fabrikito {__version__}")
        return 0
    handler_path = getattr(args, "_handler", None)
    if handler_path is None:
        parser.print_help(sys.stderr)
        return 2
    module_name, _, func_name = handler_path.partition(":")
    try:
        handler = getattr(importlib.import_module(module_name), func_name)
        code = handler(args)
        return int(code)
    except FabrikitoError as exc:
        if os.environ.get("FABRIKITO_DEBUG") == "1":
            raise
        _print_error(f"fabrikito {args.command}: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        _print_error(f"fabrikito {args.command}: interrupted")
        return 130


def _print_error(text: str) -> None:
    try:
        print(text, file=sys.stderr)
    except OSError:
        pass


def run() -> None:
    sys.exit(main())
