"""``fabrikito qualify`` and finding Claude Code in a pane, against the real binary (each live release).

* qualify passes on the real binary, records it (0600 in a 0700 folder) and
  saves its screens;
* it fails closed on an agent whose box is drawn differently (a fake
  release, 2.1.999), saving the differing screens, recording nothing, and
  ``say`` to a seat running it types nothing and says to run qualify;
* Claude Code started through a wrapper that does not ``exec`` it is found in
  the pane's foreground process group, and a shell at its own prompt is not.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from pathlib import Path

import pytest

from fabrikito.base.tmux import Server
from fabrikito.delivery import seatpane
from fabrikito.offline import claude_setup
from fabrikito.offline.standin import StandIn

from .teamkit import clean_env, fabrikito, wait_for
from .test_up_live import write_up_team

pytestmark = pytest.mark.live

FAKE = Path(__file__).resolve().parent / "fake_agent.py"


def fake_agent(tmp_path: Path) -> Path:
    """An executable that runs the fake agent (a release fabrikito has not qualified, drawn differently)."""
    wrapper = tmp_path / "fake-claude"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return wrapper


def qualify(agent: Path, tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    import subprocess

    config = tmp_path / "config"
    out = tmp_path / "screens"
    env = clean_env({"XDG_CONFIG_HOME": str(config), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    done = subprocess.run(
        [sys.executable, "-m", "fabrikito", "qualify", "--agent", str(agent), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, config / "fabrikito" / "qualified.json"


def test_qualify_passes_on_the_real_release_and_records_it(claude_binary: Path, tmp_path: Path) -> None:
    code, output, record = qualify(claude_binary, tmp_path)
    assert code == 0, output
    release = claude_binary.parent.parent.joinpath("package.json").read_text(encoding="utf-8")
    version = json.loads(release)["version"]
    assert f"Claude Code {version} qualified as dialect claude-" in output
    assert "messaging: registry, hook, inbox, labelled message" in output  # the messaging checks ran
    data = json.loads(record.read_text(encoding="utf-8"))
    [entry] = data["qualified"]
    assert entry["release"] == version and entry["binary"] == str(claude_binary.resolve())
    assert len(entry["sha256"]) == 64
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    screens = {p.name for p in (tmp_path / "screens").iterdir()}
    for name in ("inline-120x40-empty-box-fresh-start", "fullscreen-120x40-held-dialog", "inline-120x40-copy-mode"):
        assert {f"{name}.txt", f"{name}.ansi", f"{name}.json"} <= screens


def test_qualify_fails_closed_on_a_box_drawn_differently(tmp_path: Path) -> None:
    code, output, record = qualify(fake_agent(tmp_path), tmp_path)
    assert code == 1, output
    assert "Claude Code 2.1.999 is NOT qualified" in output
    assert "empty-box-fresh-start: read as not-recognised" in output  # what differs is named
    assert "attach that folder to a bug report" in output
    assert not record.exists()  # nothing recorded: fabrikito still refuses it
    saved = {p.name for p in (tmp_path / "screens").iterdir()}
    assert {"inline-120x40-empty-box-fresh-start.txt", "inline-120x40-empty-box-fresh-start.ansi"} <= saved
    assert {"fullscreen-120x40-empty-box-fresh-start.txt", "report.txt"} <= saved


def test_say_types_nothing_into_an_unqualified_release(tmux_server: Server, tmp_path: Path) -> None:
    home = claude_setup.make_home(tmp_path / "home")
    keys = tmp_path / "keys"
    pane = tmux_server.new_session(
        "fake-dev",
        [str(fake_agent(tmp_path)), "-n", "fake-dev"],
        cwd=str(tmp_path),
        width=120,
        height=40,
        env={"HOME": str(home), "FAKE_AGENT_KEYS": str(keys)},
    )
    wait_for(lambda: "❯\u00a0" in tmux_server.capture(pane), 20, "the fake agent's box")
    team = tmp_path / "team" / "team.toml"
    team.parent.mkdir()
    team.write_text(
        f'name = "live"\ntmux_socket = "{tmux_server.socket_name}"\n\n[[seat]]\nrole = "dev"\nsession = "fake-dev"\n',
        encoding="utf-8",
    )
    done = fabrikito("say", "dev", "hello there", team=team)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Claude Code 2.1.999 is not a release fabrikito has qualified: run `fabrikito qualify`" in done.stderr
    assert not keys.exists() or keys.read_bytes() == b""  # not one key reached it
    status = fabrikito("status", "--json", team=team, role=None)
    seat = json.loads(status.stdout)["seats"][0]
    assert seat["release"] == "2.1.999" and seat["qualified"] is False, seat


def test_claude_behind_a_wrapper_is_found_and_a_shell_at_its_prompt_is_not(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    team = tmp_path / "team" / "team.toml"
    wrapper = ["sh", "-c", '"$0" "$@"; exec bash --norc --noprofile -i', str(claude_binary)]
    write_up_team(
        team, tmux_server, claude_binary, standin, [("dev", "acceptEdits", {})], home=claude_home, agent=wrapper
    )
    done = fabrikito("up", team=team, role=None, timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dev: kickoff delivered" in done.stdout
    pane = tmux_server.run("list-panes", "-t", "=live-dev:", "-F", "#{pane_id} #{pane_pid}").split()
    agent = seatpane.foreground_agent(int(pane[1]))
    assert agent is not None and agent.pid != int(pane[1])  # Claude Code is the shell's child, not the pane's process
    mark = standin.mark()
    said = fabrikito("say", "dev", "through the wrapper", team=team)
    assert said.returncode == 0, said.stderr
    assert (
        "[from live-test] through the wrapper"
        in standin.wait_for_request("dev", "through the wrapper", 30, since=mark).last_user_text
    )
    os.kill(agent.pid, signal.SIGTERM)  # Claude Code exits; the wrapper's shell takes the terminal
    wait_for(lambda: seatpane.foreground_agent(int(pane[1])) is None, 30, "Claude Code to exit")
    refused = fabrikito("say", "dev", "into the shell", team=team)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "not running an agent in its foreground" in refused.stderr


def test_check_shows_the_agents_release_and_warns_when_it_is_not_qualified(
    claude_binary: Path, tmux_server: Server, tmp_path: Path
) -> None:
    team = tmp_path / "team" / "team.toml"
    team.parent.mkdir()
    body = f'tmux_socket = "{tmux_server.socket_name}"\n\n[[seat]]\nrole = "dev"\nsession = "live-dev"\n'
    team.write_text(f'name = "live"\nagent = "{claude_binary}"\n{body}', encoding="utf-8")
    done = fabrikito("check", team=team, role=None)
    version = json.loads((claude_binary.parent.parent / "package.json").read_text(encoding="utf-8"))["version"]
    assert f"agent {claude_binary}: Claude Code {version}, qualified (fabrikito, dialect claude-" in done.stdout
    assert "is not qualified" not in done.stdout
    team.write_text(f'name = "live"\nagent = "{fake_agent(tmp_path)}"\n{body}', encoding="utf-8")
    done = fabrikito("check", "--json", team=team, role=None)
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert (data["agent"]["release"], data["agent"]["qualified"]) == ("2.1.999", False)
    plain = fabrikito("check", team=team, role=None)
    assert "WARNING: the agent's release 2.1.999 is not qualified" in plain.stdout


def test_up_says_at_once_that_an_unqualified_release_needs_qualify(
    tmux_server: Server, standin: StandIn, tmp_path: Path
) -> None:
    home = claude_setup.make_home(tmp_path / "home")
    team = tmp_path / "team" / "team.toml"
    agent = [str(fake_agent(tmp_path))]
    write_up_team(team, tmux_server, Path(agent[0]), standin, [("dev", "acceptEdits", {})], home=home, agent=agent)
    done = fabrikito("up", "--timeout", "60", team=team, role=None, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "dev did not come up: Claude Code 2.1.999 is not a release fabrikito has qualified" in done.stdout
    assert "[from launcher]" not in tmux_server.capture(
        tmux_server.run("list-panes", "-t", "=live-dev:", "-F", "#{pane_id}").strip()
    )
