"""``up``'s generated files: settings, hook command, prompt, pane command and environment."""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fabrikito.base import values
from fabrikito.base.errors import UsageError
from fabrikito.launch import lifecycle, seatfiles
from fabrikito.team import teamfile
from fabrikito.team.teamfile import Team

REPO = Path(__file__).resolve().parents[2]
PAYLOADS = REPO / "tests" / "fixtures" / "hook-payloads"


def make_team(tmp_path: Path, seats: str = "", *, shared: str | None = "# Shared rules\n") -> Team:
    base = tmp_path / "proj dir"
    base.mkdir(exist_ok=True)
    if shared is not None:
        (base / "roles").mkdir(exist_ok=True)
        (base / "roles" / "common.md").write_text(shared, encoding="utf-8")
    text = (
        'name = "acme"\ntmux_socket = "acme-test"\nkickoff = "Start."\n\n'
        '[[seat]]\nrole = "em"\nsession = "acme-em"\npermission_mode = "acceptEdits"\n\n'
        '[[seat]]\nrole = "api"\nsession = "acme-api"\npermission_mode = "acceptEdits"\n'
        'args = ["--model", "sonnet"]\nenv = { ANTHROPIC_BASE_URL = "http://127.0.0.1:1/seat/api" }\n\n'
        '[[seat]]\nrole = "sec"\nsession = "acme-sec"\npermission_mode = "bypassPermissions"\n\n'
        '[[seat]]\nrole = "ops"\nsession = "acme-ops"\nargs = ["--permission-mode", "plan", '
        '"--allow-dangerously-skip-permissions"]\n' + seats
    )
    (base / "team.toml").write_text(text, encoding="utf-8")
    return teamfile.load(base / "team.toml")


def seat(team: Team, role: str) -> teamfile.Seat:
    found = team.seat(role)
    assert found is not None
    return found


# -- settings -------------------------------------------------------------------------


def test_settings_hold_both_hooks_on_sendmessage_running_the_seats_hook(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    settings = seatfiles.seat_settings(team, seat(team, "api"))
    hooks = settings["hooks"]
    assert set(hooks) == {"PostToolUse", "PostToolUseFailure"}
    for event in ("PostToolUse", "PostToolUseFailure"):
        assert len(hooks[event]) == 1
        entry = hooks[event][0]
        assert entry["matcher"] == "SendMessage"
        assert [h["type"] for h in entry["hooks"]] == ["command"]
        argv = shlex.split(entry["hooks"][0]["command"])
        assert "from fabrikito.log.hook import main" in argv[argv.index("-c") + 1]
        assert argv[argv.index("--team") + 1] == str(team.path)
        assert argv[argv.index("--role") + 1] == "api"
        assert Path(argv[argv.index("-S") - 1]).is_absolute()


def test_every_seat_but_em_has_a_read_deny_on_the_log_as_an_absolute_rule(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    assert "deny" not in seatfiles.seat_settings(team, seat(team, "em"))["permissions"]
    for role in ("api", "sec", "ops"):
        deny = seatfiles.seat_settings(team, seat(team, role))["permissions"]["deny"]
        assert f"Read(/{team.log_path})" in deny  # `//abs/path`: an absolute path in a permission rule
        assert all(rule.startswith("Read(//") for rule in deny)


def test_bypass_is_switched_off_unless_the_seat_can_bypass(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    perms = {s.role: seatfiles.seat_settings(team, s)["permissions"] for s in team.seats}
    assert perms["em"]["disableBypassPermissionsMode"] == "disable"
    assert perms["api"]["disableBypassPermissionsMode"] == "disable"
    assert "disableBypassPermissionsMode" not in perms["sec"]  # bypassPermissions
    assert "disableBypassPermissionsMode" not in perms["ops"]  # plan with --allow-dangerously-skip-permissions
    assert perms["em"]["defaultMode"] == "acceptEdits"
    assert perms["sec"]["defaultMode"] == "bypassPermissions"
    assert "defaultMode" not in perms["ops"]  # its mode is in args


def test_settings_env_names_role_and_team(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    env = seatfiles.seat_settings(team, seat(team, "api"))["env"]
    command = seatfiles.say_command()
    assert env == {"TEAM_ROLE": "api", "FABRIKITO_TEAM": str(team.path), "FABRIKITO": command}
    assert seatfiles.seat_env(team, seat(team, "api")) == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:1/seat/api",
        "TEAM_ROLE": "api",
        "FABRIKITO_TEAM": str(team.path),
        "FABRIKITO": command,
    }


def test_say_command_is_absolute_and_runs_this_fabrikito_with_an_empty_path(tmp_path: Path) -> None:
    import shlex
    import subprocess

    command = seatfiles.say_command()
    assert shlex.split(command)[0].startswith("/"), command
    assert f"{command} say <role>" in seatfiles.roster_section(make_team(tmp_path), seat(make_team(tmp_path), "api"))
    done = subprocess.run(
        ["/bin/sh", "-c", f"{command} --version"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    from fabrikito import __version__

    assert done.stdout.strip() == f"fabrikito {__version__}", done.stderr


def test_hook_command_names_the_package_directory_and_skips_site(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    checkout = seatfiles.hook_command(team, "api", python="/opt/py/bin/python3", root=Path("/src tree/src"))
    assert checkout.startswith("PYTHONPATH='/src tree/src' /opt/py/bin/python3 -S -c ")
    assert shlex.split(checkout)[-4:] == ["--team", str(team.path), "--role", "api"]
    installed = seatfiles.hook_command(team, "api", python="/opt/py/bin/python3", root=Path("/x/site-packages"))
    assert installed.startswith("PYTHONPATH=/x/site-packages /opt/py/bin/python3 -S -c ")


def test_generated_hook_command_logs_a_sendmessage(tmp_path: Path) -> None:
    """The command in the settings, run by a shell as Claude Code runs it, appends the log line."""
    team = make_team(tmp_path)
    command = seatfiles.seat_settings(team, seat(team, "api"))["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    payload = json.loads((PAYLOADS / "success-same-mode.json").read_text(encoding="utf-8"))
    payload["tool_input"]["to"] = "acme-em"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == b"", done
    fields = team.log_path.read_text(encoding="utf-8").rstrip("\n").split("\t")
    assert fields[1:4] == ["api", "em", "sent"]


# -- the prompt -------------------------------------------------------------------------


def test_prompt_is_the_shared_prompt_then_the_roster(tmp_path: Path) -> None:
    team = make_team(tmp_path, shared="# Shared rules\nAct only on roster names.\n")
    text = seatfiles.seat_prompt(team, seat(team, "api"))
    assert text.startswith("# Shared rules\nAct only on roster names.\n\n## The roster")
    for s in team.seats:
        assert f"| {s.role} | {s.session} |" in text
    assert "You are `api`; your session name is `acme-api`." in text
    assert "The EM is `em`, session `acme-em`." in text
    assert " say <role> " in text


def test_prompt_without_a_shared_prompt_file_is_the_roster(tmp_path: Path) -> None:
    team = make_team(tmp_path, shared=None)
    assert seatfiles.seat_prompt(team, seat(team, "em")).startswith("## The roster")
    assert "You are the EM" in seatfiles.seat_prompt(team, seat(team, "em"))


def test_example_shared_prompt_says_what_keeps_a_team_honest() -> None:
    text = (REPO / "examples" / "roles" / "common.md").read_text(encoding="utf-8")
    for phrase in (
        "exactly",
        "[from launcher]",
        "never",
        "two sessions with the same roster name",
        "say em",
        "A message that was held or refused goes by `say --queue`, never by plain\n  `say`",
        "To reach a seat that is busy at a dialog",
        "Report a refused, denied or expired message to the EM",
    ):
        assert phrase in text, phrase


# -- the pane --------------------------------------------------------------------------


def test_seat_command_runs_the_agent_with_name_settings_mode_prompt_and_args(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    argv = seatfiles.seat_command(team, seat(team, "api"))
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[3] == seatfiles.SEAT_ARGV0
    agent = argv[4:]
    assert agent[0] == "claude"
    assert agent[agent.index("-n") + 1] == "acme-api"
    assert agent[agent.index("--settings") + 1] == str(seatfiles.settings_path(team, "api"))
    assert agent[agent.index("--permission-mode") + 1] == "acceptEdits"
    assert agent[agent.index("--append-system-prompt-file") + 1] == str(seatfiles.prompt_path(team, "api"))
    assert agent[-2:] == ["--model", "sonnet"]
    ops = seatfiles.seat_command(team, seat(team, "ops"))[4:]
    assert ops.count("--permission-mode") == 1  # from its args only
    assert ops[-3:] == ["--permission-mode", "plan", "--allow-dangerously-skip-permissions"]


def test_strip_script_drops_other_sessions_messaging_variables_and_execs(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    script = seatfiles.seat_command(team, seat(team, "api"))[2]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "CLAUDE_CODE_MESSAGING_SOCKET": "/tmp/other.sock",
        "CLAUDE_CODE_MESSAGING_TOKEN": "secret",
        "CLAUDECODE": "1",
        "CLAUDE_CODE_ENTRYPOINT": "cli",
        "KEEP_ME": "yes",
        "MULTI": "line one\nCLAUDE_CODE_MESSAGING_FAKE=x\n*",
        "TEAM_ROLE": "api",
        "CI": "true",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [
            "/bin/sh",
            "-c",
            script,
            seatfiles.SEAT_ARGV0,
            sys.executable,
            "-c",
            "import os; print(repr(dict(os.environ)))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    seen = ast.literal_eval(done.stdout)
    assert seen["KEEP_ME"] == "yes" and seen["TEAM_ROLE"] == "api" and seen["MULTI"] == env["MULTI"]
    assert not {n for n in seen if n.startswith("CLAUDE")}, seen
    assert "CI" not in seen and "NO_COLOR" not in seen  # they would make Claude Code draw without colours


def test_seat_files_are_private(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    seatfiles.write_seat_files(team, seat(team, "api"))
    assert stat.S_IMODE(os.stat(seatfiles.seats_dir(team)).st_mode) == 0o700
    for path in (seatfiles.settings_path(team, "api"), seatfiles.prompt_path(team, "api")):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = json.loads(seatfiles.settings_path(team, "api").read_text(encoding="utf-8"))
    assert data == seatfiles.seat_settings(team, seat(team, "api"))


def test_launch_record_round_trip(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    seatfiles.write_seat_files(team, seat(team, "api"))
    assert seatfiles.read_launch(team, "api") is None
    record = seatfiles.LaunchRecord(pane="%3", pid=42, kickoff="pending", started=1.5)
    seatfiles.write_launch(team, "api", record)
    assert seatfiles.read_launch(team, "api") == record


def test_unknown_role_is_a_usage_error(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    with pytest.raises(UsageError, match="no seat nope"):
        seatfiles.select_seats(team, ["api", "nope"])
    assert [s.role for s in seatfiles.select_seats(team, ["sec", "em"])] == ["em", "sec"]
    assert len(seatfiles.select_seats(team, None)) == 4


def test_cli_registers_up_down_status_demo() -> None:
    from fabrikito.cli import build_parser

    def parse(*argv: str) -> argparse.Namespace:
        return build_parser(argv).parse_args(argv)

    args = parse("up", "--team", "t.toml", "em", "api")
    assert args.roles == ["em", "api"] and args._handler == "fabrikito.cli.commands:cmd_up"
    assert parse("down")._handler == "fabrikito.cli.commands:cmd_down"
    assert parse("status", "--json").json is True
    assert parse("demo", "--stop").stop is True


def test_up_refuses_an_invalid_team_file_before_tmux(tmp_path: Path) -> None:
    bad = tmp_path / "team.toml"
    bad.write_text('name = "x"\n[[seat]]\nrole = "owner"\nsession = "s"\n', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "fabrikito", "up", "--team", str(bad)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "reserved" in done.stderr


def test_up_refuses_before_any_tmux_call_when_the_agent_is_not_found(tmp_path: Path) -> None:
    from fabrikito.base.errors import UsageError
    from fabrikito.base.tmux import Server

    team = make_team(tmp_path)
    team = values.replace(team, agent=("no-such-agent-for-fabrikito",))
    server = Server(socket_name="fab-never-started")
    with pytest.raises(
        UsageError, match=r"'no-such-agent-for-fabrikito' of seat \w+ \(team acme\) is not found on PATH"
    ):
        lifecycle.up(team, out=lambda line: None, server=server)
    assert not server.alive()
