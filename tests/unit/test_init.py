"""``fabrikito init``: a starting team that checks clean, never an overwrite, ``.state/`` ignored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabrikito import cli
from fabrikito.team import check, init, teamfile

REPO = Path(__file__).resolve().parents[2]


def test_init_writes_a_team_that_loads_and_checks_without_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "My App"
    assert cli.main(["init", str(target), "--roles", "em,api,web,sec"]) == 0
    team = teamfile.load(target / "team.toml")
    assert team.name == "My-App" and team.roles == ("em", "api", "web", "sec")
    assert [s.session for s in team.seats] == ["My-App-em", "My-App-api", "My-App-web", "My-App-sec"]
    assert team.shared_prompt == target / "roles" / "common.md"
    assert (target / "roles" / "common.md").read_text() == (REPO / "examples" / "roles" / "common.md").read_text()
    report = check.run(team)
    assert report.warnings == () and report.exit_code == 0
    text = (target / "team.toml").read_text()
    assert text.count("\n#") >= 10  # commented
    out = capsys.readouterr().out
    assert f"edit {target / 'team.toml'}" in out
    assert f"check --team {target / 'team.toml'}" in out and f"up --team {target / 'team.toml'}" in out


def test_init_in_the_current_directory_defaults_to_em_api_web(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init"]) == 0
    assert teamfile.load(tmp_path / "team.toml").roles == init.DEFAULT_ROLES
    out = capsys.readouterr().out
    assert " check " in out and "--team" not in out


def test_init_refuses_to_overwrite_and_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "common.md").write_text("my own rules\n")
    assert cli.main(["init", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "common.md already exists" in err and "never overwrites" in err
    assert not (tmp_path / "team.toml").exists()
    assert (tmp_path / "roles" / "common.md").read_text() == "my own rules\n"


def test_init_refuses_a_dangling_link_where_team_toml_goes(tmp_path: Path) -> None:
    os.symlink(tmp_path / "elsewhere.toml", tmp_path / "team.toml")
    with pytest.raises(init.InitRefused):
        init.init(tmp_path)
    assert not (tmp_path / "elsewhere.toml").exists() and not (tmp_path / "roles").exists()


def test_a_failed_second_file_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # team.toml appears between the check and its creation (O_EXCL): the prompt written first goes again.
    real_create = init._create

    def racing_create(path: Path, content: str) -> None:
        if path.name == "team.toml":
            path.write_text("someone else's team\n")
        real_create(path, content)

    monkeypatch.setattr(init, "_create", racing_create)
    with pytest.raises(init.InitRefused, match="appeared while init ran"):
        init.init(tmp_path)
    assert (tmp_path / "team.toml").read_text() == "someone else's team\n"
    assert list((tmp_path / "roles").iterdir()) == []


def test_init_adds_state_to_an_existing_gitignore_once(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules")
    written = init.init(tmp_path / ".", ("em",))
    assert written.gitignore == tmp_path / ".gitignore"
    assert (tmp_path / ".gitignore").read_text().splitlines()[0] == "node_modules"
    assert ".state/" in (tmp_path / ".gitignore").read_text().splitlines()
    other = tmp_path / "b"
    other.mkdir()
    (other / ".gitignore").write_text("/.state\n")
    assert init.init(other).gitignore is None
    assert (other / ".gitignore").read_text() == "/.state\n"


def test_no_gitignore_is_made_when_there_is_none(tmp_path: Path) -> None:
    assert init.init(tmp_path).gitignore is None
    assert not (tmp_path / ".gitignore").exists()


@pytest.mark.parametrize(
    ("roles", "said"),
    [
        ("", "no roles given"),
        ("em,,api", "an empty role"),
        ("em,API", "'API' is not a role id"),
        ("em,launcher", "'launcher' is fabrikito's own sender label"),
        ("em,em", "'em' is given twice"),
        ("em," + "x" * 70, "too long"),
    ],
)
def test_bad_roles_are_a_usage_error_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], roles: str, said: str
) -> None:
    assert cli.main(["init", str(tmp_path / "t"), "--roles", roles]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "t" / "team.toml").exists()


def test_the_checkout_examples_are_the_package_data() -> None:
    assert (REPO / "examples").resolve() == init.example_dir()
    assert teamfile.load(init.example_dir() / "team.toml").name == "acme"
