"""fastargs reads a plain command line exactly as argparse does, and leaves every other line to argparse."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.test_hostile_args import NOT_UTF8

from fabrikito import cli
from fabrikito.cli import fastargs

COMMANDS = {c.name: c for c in cli.COMMANDS}


def by_argparse(argv: list[str]) -> dict[str, object] | None:
    """What argparse makes of ``argv``: its values, or ``None`` when it exits (an error, --help)."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return vars(cli.build_parser(argv).parse_args(argv))
        except SystemExit:
            return None


def by_fastargs(argv: list[str]) -> dict[str, object] | None:
    command = COMMANDS[argv[0]]
    found = fastargs.parse(argv, cli._builder(command), handler=command.handler)
    return None if found is None else vars(found)


def words(command: str) -> list[str]:
    """Every option string of the command, with the tokens argparse treats specially."""
    parser = cli.build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = [s for a in sub.choices[command]._actions for s in a.option_strings]
    tricky = ["-", "--", "-h", "--help", "-vv", "--te", "--team=x", "-1", "", "a b", "-x y", "2.5", "nan", "x", "api"]
    hostile = [NOT_UTF8, "caf\udce9", "\x1b[2Jhi", " ", "../../etc", "x" * 5000, "-\x07", "--\x1b"]  # test_hostile_args
    return options + tricky + hostile


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_fastargs_gives_what_argparse_gives_or_leaves_the_line_to_it(command: str) -> None:
    vocabulary = words(command)

    @settings(max_examples=150, deadline=None, database=None)
    @given(st.lists(st.sampled_from(vocabulary), max_size=6))
    def check(rest: list[str]) -> None:
        argv = [command, *rest]
        fast = by_fastargs(argv)
        if fast is not None:
            assert fast == by_argparse(argv), argv

    check()


@pytest.mark.parametrize(
    "argv",
    [
        ["say", "api", "the build is green"],
        ["say", "--team", "t.toml", "-v", "all", "hello", "-", "world"],
        ["say", "--queue", "--expire", "10m", "api"],
        ["send", "--to", "api", "hi"],
        ["send", "--to", "api", "--no-label", "--json", "--cwd", "/w", "--team", "t", "-"],
        ["send", "--to", "api"],
        ["status"],
        ["status", "--json", "--no-screens", "--team", "x"],
        ["flush", "--team", "t", "api"],
        ["queue", "drop", "api-0123abcd"],
        ["log", "--json", "-f"],
    ],
)
def test_the_lines_seats_and_people_type_skip_argparse(argv: list[str]) -> None:
    fast = by_fastargs(argv)
    assert fast is not None, argv  # read here: the hot commands do not import argparse for it
    assert fast == by_argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["say", "--help"],
        ["say"],  # no role: argparse's error
        ["say", "api", "hi", "--team", "t"],  # an option after a positional: argparse's order
        ["send", "--to", "api", "a", "b"],  # one message at most
        ["send", "--timeout", "3", "--to", "api", "hi"],  # a value argparse converts and checks
        ["send", "--to", "-x"],
        ["status", "--js"],  # an abbreviation
        ["status", "--team=x"],
        ["status", "extra"],
        ["log", "--from", "api"],  # append: argparse's
    ],
)
def test_lines_argparse_must_read_are_left_to_it(argv: list[str]) -> None:
    assert by_fastargs(argv) is None


def test_a_builder_that_does_more_is_left_to_argparse() -> None:
    def grouped(p: argparse.ArgumentParser) -> None:
        p.add_mutually_exclusive_group()

    def typed_text_default(p: argparse.ArgumentParser) -> None:
        p.add_argument("--n", type=int, default="3")

    def optional_first(p: argparse.ArgumentParser) -> None:
        p.add_argument("a", nargs="?")
        p.add_argument("b")

    for build in (grouped, typed_text_default, optional_first):
        assert fastargs.parse(["x"], build, handler="m:f") is None
        assert fastargs.spec_of(build) is None


def test_usage_errors_and_help_are_argparse_s_own() -> None:
    """Through main: the fast path changes no message (argparse words them, one line, status 2)."""
    for argv, status, words_ in (
        (["say"], 2, "the following arguments are required: role"),
        (["status", "extra"], 2, "unrecognized arguments: extra"),
        (["send", "--timeout", "0", "--to", "x", "hi"], 2, "out of range"),
        (["status", "--help"], 0, "usage: fabrikito status"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "fabrikito", *argv], capture_output=True, text=True, check=False, timeout=60
        )
        assert done.returncode == status, (argv, done.stderr)
        assert words_ in done.stdout + done.stderr, (argv, done.stderr)
