"""Codex CLI and Gemini CLI set-up for offline runs: where they are installed, their homes, a seat's argv and env."""

from __future__ import annotations

import json
import stat
import tomllib
from pathlib import Path

import pytest

from fabrikito.offline import other_setup
from fabrikito.offline.claude_setup import BenchError


def test_tools_dirs_are_per_agent_and_release(tmp_path: Path) -> None:
    assert other_setup.tools_dir_for("codex", "0.171.0", tmp_path) == tmp_path / ".tools" / "codex-0.171.0"
    binary = other_setup.binary_in("codex", tmp_path)
    assert binary.parts[-2:] == ("bin", "codex") and "@openai" in binary.parts
    assert other_setup.binary_in("gemini", tmp_path).name == "gemini.js"
    with pytest.raises(BenchError, match="known are codex, gemini"):
        other_setup.binary_in("aider", tmp_path)


def test_the_demo_keeps_them_in_the_checkout_or_the_cache(tmp_path: Path) -> None:
    found = other_setup.demo_tools_dir("gemini", "0.61.0", {"XDG_CACHE_HOME": str(tmp_path)})
    assert found.name == "gemini-0.61.0" and found.parent.name in (".tools", "fabrikito")


def test_codex_home_names_the_standin_and_trusts_the_workdir(tmp_path: Path) -> None:
    work = tmp_path / "work"
    home = other_setup.make_codex_home(tmp_path / "codex", base_url="http://127.0.0.1:9/seat/dev", workdirs=[work])
    path = home / "config.toml"
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:9/seat/dev/v1" and provider["wire_api"] == "responses"
    assert provider["env_key"] == other_setup.CODEX_KEY_VAR
    assert config["projects"][str(work.resolve())]["trust_level"] == "trusted"
    assert config["check_for_update_on_startup"] is False and config["analytics"]["enabled"] is False
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_gemini_home_picks_api_key_auth_unless_asked_not_to(tmp_path: Path) -> None:
    settings = json.loads(
        (other_setup.make_gemini_home(tmp_path / "a") / ".gemini" / "settings.json").read_text(encoding="utf-8")
    )
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["general"]["enableAutoUpdate"] is False and settings["privacy"]["usageStatisticsEnabled"] is False
    open_question = other_setup.make_gemini_home(tmp_path / "b", auth=False) / ".gemini" / "settings.json"
    assert "security" not in json.loads(open_question.read_text(encoding="utf-8"))


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_seat_launch_strips_the_users_keys_and_sets_what_the_agent_needs(tmp_path: Path, agent: str) -> None:
    binary = other_setup.binary_in(agent, tmp_path / "tools")
    inherited = {"OPENAI_API_KEY": "x", "GEMINI_API_KEY": "y", "GOOGLE_CLOUD_PROJECT": "z", "TMUX": "t", "PATH": "/bin"}
    argv, env = other_setup.seat_launch(
        agent,
        binary,
        home=tmp_path / "home",
        workdir=tmp_path / "work",
        base_url="http://127.0.0.1:9/seat/dev",
        environ=inherited,
    )
    unset = {argv[i + 1] for i, word in enumerate(argv) if word == "-u"}
    assert argv[0] == "env" and "PATH" not in unset and "TMUX" in unset and "OPENAI_API_KEY" in unset
    assert env["HOME"] == str(tmp_path / "home")
    if agent == "codex":
        assert argv[-2:] == [str(binary), "--no-daemon"]
        assert env["CODEX_HOME"] == str(tmp_path / "home" / ".codex") and env[other_setup.CODEX_KEY_VAR]
        assert "GEMINI_API_KEY" in unset
    else:
        assert argv[-1] == str(binary) and Path(argv[-2]).name == "node"
        assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9/seat/dev"
        assert env["GEMINI_CLI_TRUST_WORKSPACE"] == "true" and env["GEMINI_CLI_NO_RELAUNCH"] == "true"
        assert env["COLORTERM"] == "truecolor" and "GEMINI_API_KEY" not in unset  # set again by env, so kept
    assert (tmp_path / "work").is_dir()


def test_a_program_is_told_by_its_package(tmp_path: Path) -> None:
    package = tmp_path / "node_modules" / "@google" / "gemini-cli"
    (package / "bundle").mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@google/gemini-cli"}', encoding="utf-8")
    (package / "bundle" / "gemini.js").write_text("", encoding="utf-8")
    assert other_setup.kind_of(package / "bundle" / "gemini.js") == "gemini"
    codex = tmp_path / "node_modules" / "@openai" / "codex"
    (codex / "bin").mkdir(parents=True)
    (codex / "package.json").write_text('{"name": "@openai/codex"}', encoding="utf-8")
    assert other_setup.kind_of(codex / "bin" / "codex.js") == "codex"
    # The JS shim stands for the platform package's binary beside it.
    native = other_setup.program_for("codex", codex / "bin" / "codex.js")
    assert native == other_setup.binary_in("codex", tmp_path)
    assert other_setup.kind_of(Path("/bin/sh")) is None
