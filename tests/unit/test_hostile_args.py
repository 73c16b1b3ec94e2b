"""Every subcommand, given hostile arguments: no traceback, a one-line error, a documented exit status."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fabrikito import cli

REPO = Path(__file__).resolve().parents[2]
COMMANDS = [c.name for c in cli.COMMANDS]
NOT_UTF8 = os.fsdecode(b"caf\xe9")


def documented_statuses(command: str) -> set[int]:
    """The exit statuses the command's --help lists."""
    parser = cli.build_parser([command])  # only the command run gets its arguments and epilog
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    epilog = sub.choices[command].epilog or ""
    assert "exit status" in epilog, f"{command} --help lists no exit status"
    text = epilog.split("exit status", 1)[1]
    return {int(n) for n in re.findall(r"(?:^|[:;\n]\s*)(\d+)\s", text)}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_lists_its_exit_statuses(command: str) -> None:
    assert {0, 2} <= documented_statuses(command) or command == "wait-idle"


def hostile_cases(tmp: Path) -> dict[str, list[str]]:
    nested = tmp / "nested.toml"
    nested.write_text('name = "t"\nx = ' + "[" * 3000 + "]" * 3000 + "\n")
    binary = tmp / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00name")
    directory = tmp / "dir.toml"
    directory.mkdir()
    team = tmp / "team.toml"
    team.write_text(
        f'name = "t"\ntmux_socket_path = "{tmp / "no-server"}"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n'
        'permission_mode = "default"\n'
    )
    box = tmp / ".state" / "t" / "say"
    box.mkdir(parents=True)
    (box / "box-dev.json").write_text('{"count": "lots", "last": [1]}')
    return {
        "missing team": ["--team", str(tmp / "absent.toml")],
        "team is a directory": ["--team", str(directory)],
        "team not UTF-8": ["--team", str(binary)],
        "team nested deeply": ["--team", str(nested)],
        "team name not UTF-8": ["--team", str(tmp / NOT_UTF8)],
        "unknown option": ["--no-such-option"],
        "valid team": ["--team", str(team)],
    }


EXTRA = {
    "say": [["dev", "caf\udce9"], ["nobody", "hi"], ["dev", "\x1b[2Jhi"], ["all", " "], ["dev"]],
    "flush": [["nobody"], ["dev"], ["../../etc"]],
    "log": [
        ["--since", "99999999999999d"],
        ["--since", "2026-13-45"],
        ["--until", "25:99"],
        ["--outcome", "nope"],
        ["--json"],
    ],
    "send": [["--to", "nobody", "hi"], ["--to", "", "\x07"], ["--to", "x" * 5000, "hi"]],
    "sessions": [["--all", "--json"]],
    "wait-idle": [["--timeout", "-1", "nobody"], ["--timeout", "nan", "nobody"], [""]],
    "up": [["nobody"], ["--timeout", "nan", "nobody"]],
    "down": [["nobody"]],
    "status": [["--json"], ["--no-screens"]],
    "check": [["--json"]],
    "demo": [["--dir", "/proc/no/such"]],  # refused before anything starts
    "authorize-host": [["/no/such.pub"], ["-"], ["--install", "--file", "/proc/no/such", "-"], [NOT_UTF8]],
}
SAFE_WITH_VALID_TEAM = {"check", "log", "status", "down", "sessions", "say", "flush", "send", "wait-idle"}


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TEAM_ROLE": "", "FABRIKITO_DEBUG": ""}
    env.pop("TMUX", None)
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", *argv],
        capture_output=True,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_hostile_arguments_get_a_one_line_error_and_a_documented_status(tmp_path: Path, command: str) -> None:
    cases = hostile_cases(tmp_path)
    allowed = documented_statuses(command) | {2}
    runs: list[list[str]] = []
    for name, args in cases.items():
        if name == "valid team" and command not in SAFE_WITH_VALID_TEAM:
            continue
        if command in ("send", "sessions", "wait-idle", "demo", "authorize-host") and name != "unknown option":
            continue  # these take no team file as a required input; their own cases are below
        runs.append([command, *args, *(EXTRA.get(command, [[]])[0] if name == "valid team" else [])])
    team = ["--team", str(tmp_path / "team.toml")]
    for extra in EXTRA.get(command, []):
        takes_team = command not in ("sessions", "demo", "authorize-host")
        runs.append([command, *(team if takes_team else []), *extra])
    for argv in runs:
        done = run(argv, tmp_path)
        err = done.stderr.decode("utf-8", "replace")
        shown = f"fabrikito {' '.join(argv)!r} -> {done.returncode}: {err!r}"
        assert "Traceback" not in err, shown
        assert done.returncode in allowed, shown
        lines = [line for line in err.splitlines() if line.strip()]
        if done.returncode == 2:  # bad usage or team file: one line that says what to fix
            assert len(lines) == 1, shown
            assert lines[0].startswith(("fabrikito ", "fabrikito: ")), shown
        elif done.returncode != 0:  # a refusal or warnings: said somewhere
            assert lines or done.stdout.strip(), shown
