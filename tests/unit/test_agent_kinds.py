"""Seats of other agents in the team file, in ``check``, and found in a pane's foreground."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from fabrikito.base.errors import TeamFileError
from fabrikito.base.tmux import Server
from fabrikito.delivery import seatpane
from fabrikito.team import agents, check, teamfile
from fabrikito.team.teamfile import PermissionClass

MIXED = """
name = "mx"
[[seat]]
role = "em"
session = "mx-em"
permission_mode = "acceptEdits"
[[seat]]
role = "cx"
session = "mx-cx"
agent = "codex"
[[seat]]
role = "gm"
session = "mx-gm"
agent = "gemini"
command = ["npx", "@google/gemini-cli"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_seat_names_its_kind_and_command_and_claude_is_the_default(tmp_path: Path) -> None:
    team = teamfile.load(write(tmp_path, MIXED))
    em, cx, gm = team.seats
    assert (em.agent, cx.agent, gm.agent) == ("claude", "codex", "gemini")
    assert agents.command_for(team, em) == ("claude",)
    assert agents.command_for(team, cx) == ("codex",)
    assert agents.command_for(team, gm) == ("npx", "@google/gemini-cli")
    assert cx.permission_class is PermissionClass.NONE
    assert em.permission_class is PermissionClass.PROMPTING


@pytest.mark.parametrize(
    ("seat_lines", "says"),
    [
        ('agent = "gpt"', "agent 'gpt' is not an agent kind: set it to one of claude, codex, gemini"),
        ('agent = "/usr/bin/codex"', "to name the program it runs, set command = '/usr/bin/codex'"),
        ("agent = 3", "agent 3 is not an agent kind"),
        ('agent = "codex"\npermission_mode = "acceptEdits"', "permission_mode is a Claude Code setting"),
        ('command = ""', "'command' must be the program to run"),
        ('command = "codex --no-daemon"', "write it as a list, ['codex', '--no-daemon']"),
        ("command = []", "'command' must be the program to run"),
        ('command = ["codex", 1]', "'command' must be the program to run"),
    ],
)
def test_a_bad_kind_or_command_says_what_to_do(tmp_path: Path, seat_lines: str, says: str) -> None:
    text = f'name = "mx"\n[[seat]]\nrole = "cx"\nsession = "mx-cx"\n{seat_lines}\n'
    with pytest.raises(TeamFileError) as info:
        teamfile.load(write(tmp_path, text))
    assert says in str(info.value)
    assert "seat 'cx'" in str(info.value)


def test_claude_only_argument_rules_do_not_bind_other_kinds(tmp_path: Path) -> None:
    text = 'name = "mx"\n[[seat]]\nrole = "cx"\nsession = "mx-cx"\nagent = "codex"\nargs = ["-m", "o9", "-n"]\n'
    assert teamfile.load(write(tmp_path, text)).seats[0].args == ("-m", "o9", "-n")


def test_check_shows_each_kind_and_what_messaging_means_for_it(tmp_path: Path) -> None:
    team = teamfile.load(write(tmp_path, MIXED))
    report = check.run(team, env={})
    text = check.render(report)
    assert "AGENT" in text.splitlines()[1]
    assert [s.agent for s in report.seats] == ["claude", "codex", "gemini"]
    assert "cx (codex): no SendMessage and no hook: it sends with `fabrikito say" in text
    assert "correction of the running turn" in text
    assert "gm (gemini)" in text
    # permission classes are Claude Code's: other kinds neither warn nor count as 'cannot see'
    assert not [w for w in report.warnings if w.kind in ("cannot-see", "mixed-classes")]
    data = check.to_json(report)
    assert data["seats"][1]["agent"] == "codex" and "fabrikito say" in data["seats"][1]["messaging"]


def test_release_from_a_platform_package() -> None:
    assert agents.release_from_package("0.171.0-linux-x64") == "0.171.0"
    assert agents.release_from_package("0.172.0-alpha.2-darwin-arm64") == "0.172.0-alpha.2"
    assert agents.release_from_package("0.61.0") == "0.61.0"


# -- finding the agent in a pane -------------------------------------------------------


def fake_package(root: Path, name: str, version: str, rel: str, program: Path) -> Path:
    """An npm-like package at ``root`` holding ``program`` at ``rel``."""
    root.mkdir(parents=True)
    (root / "package.json").write_text(json.dumps({"name": name, "version": version}), encoding="utf-8")
    target = root / rel
    target.parent.mkdir(parents=True)
    shutil.copy(program, target)
    target.chmod(0o755)
    return target


def pane_pid(server: Server, *argv: str) -> int:
    out = server.run("new-session", "-d", "-P", "-F", "#{pane_pid}", "-x", "80", "-y", "20", "--", *argv)
    return int(out.strip())


def wait_agent(pid: int) -> seatpane.Agent | None:
    deadline = time.monotonic() + 10
    found = seatpane.foreground_agent(pid)
    while found is None and time.monotonic() < deadline:
        time.sleep(0.05)
        found = seatpane.foreground_agent(pid)
    return found


def test_a_codex_binary_in_its_platform_package_is_found_with_its_release(tmp_path: Path, server: Server) -> None:
    sleep = Path(shutil.which("sleep") or "/bin/sleep")
    codex = fake_package(
        tmp_path / "node_modules/@openai/codex-linux-x64",
        "@openai/codex",
        "0.171.0-linux-x64",
        "vendor/x86_64-unknown-linux-musl/bin/codex",
        sleep,
    )
    pid = pane_pid(server, "/bin/sh", "-c", f"{codex} 30")  # a wrapper without exec, as users write them
    found = wait_agent(pid)
    assert found is not None
    assert (found.name, found.version) == ("codex", "0.171.0")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_node_script_of_gemini_cli_is_found_through_a_bin_link(tmp_path: Path, server: Server) -> None:
    pkg = tmp_path / "node_modules/@google/gemini-cli"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "@google/gemini-cli", "version": "0.61.0"}))
    (pkg / "bundle").mkdir()
    (pkg / "bundle/gemini.js").write_text("setTimeout(() => {}, 30000);\n")
    bin_dir = tmp_path / "node_modules/.bin"
    bin_dir.mkdir()
    (bin_dir / "gemini").symlink_to("../@google/gemini-cli/bundle/gemini.js")
    node = shutil.which("node")
    assert node is not None
    pid = pane_pid(server, node, "--max-old-space-size=512", str(bin_dir / "gemini"))
    found = wait_agent(pid)
    assert found is not None
    assert (found.name, found.version) == ("gemini", "0.61.0")


def test_a_program_of_another_package_or_a_shell_is_no_agent(tmp_path: Path, server: Server) -> None:
    sleep = Path(shutil.which("sleep") or "/bin/sleep")
    other = fake_package(tmp_path / "node_modules/left-pad", "left-pad", "1.0.0", "bin/codexish", sleep)
    pid = pane_pid(server, str(other), "30")
    time.sleep(0.3)
    assert seatpane.foreground_agent(pid) is None
    shell = pane_pid(server, "/bin/sh")
    time.sleep(0.3)
    assert seatpane.foreground_agent(shell) is None


def test_the_first_package_json_above_a_program_decides(tmp_path: Path) -> None:
    inner = tmp_path / "node_modules" / "@openai" / "codex" / "node_modules" / "left-pad"
    (inner / "bin").mkdir(parents=True)
    (inner / "package.json").write_text(json.dumps({"name": "left-pad", "version": "1.0.0"}), encoding="utf-8")
    outer = tmp_path / "node_modules" / "@openai" / "codex"
    (outer / "package.json").write_text(json.dumps({"name": "@openai/codex", "version": "0.171.0"}))
    assert agents.agent_in_package(inner / "bin" / "x") is None  # a dependency inside Codex is not Codex
    assert agents.agent_in_package(outer / "bin" / "codex.js") == ("codex", "0.171.0")
    (outer / "package.json").write_text(json.dumps({"name": "@openai/codex"}))
    assert agents.agent_in_package(outer / "bin" / "codex.js") == ("codex", None)
    (outer / "package.json").write_text("{not json")
    assert agents.agent_in_package(outer / "bin" / "codex.js") is None
    assert agents.agent_in_package(Path("/bin/sh")) is None
