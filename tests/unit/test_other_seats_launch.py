"""What ``up`` starts Codex and Gemini seats with, and ``down`` ending every process a seat started."""

from __future__ import annotations

import json
import secrets
import time
import tomllib
from pathlib import Path

import pytest

from fabrikito.base import procs
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.launch import lifecycle, otherseat, reap, seatfiles, teardown
from fabrikito.team import check, teamfile
from fabrikito.team.teamfile import Team

TEAM = """
name = "mx"
kickoff = "Start."
[[seat]]
role = "em"
session = "mx-em"
permission_mode = "acceptEdits"
[[seat]]
role = "cx"
session = "mx-cx"
agent = "codex"
cwd = "work.d/cx"
args = ["-m", "o9"]
[[seat]]
role = "gm"
session = "mx-gm"
agent = "gemini"
cwd = "work.d/gm"
"""


def make(tmp_path: Path, text: str = TEAM) -> Team:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "common.md").write_text('# Rules "quoted"\nline two\\n\n', encoding="utf-8")
    for sub in ("cx", "gm"):
        (tmp_path / "work.d" / sub).mkdir(parents=True)
    (tmp_path / "team.toml").write_text(text, encoding="utf-8")
    return teamfile.load(tmp_path / "team.toml")


def seat(team: Team, role: str) -> teamfile.Seat:
    found = team.seat(role)
    assert found is not None
    return found


def overrides(argv: list[str]) -> dict[str, object]:
    """The ``-c key=value`` overrides of a Codex command line, parsed as Codex parses them (TOML values)."""
    found: dict[str, object] = {}
    for i, arg in enumerate(argv):
        if arg == "-c":
            key, _, value = argv[i + 1].partition("=")
            found[key] = tomllib.loads(f"v = {value}")["v"]
    return found


def test_codex_runs_without_daemon_trusted_without_update_check_and_with_the_prompt(tmp_path: Path) -> None:
    team = make(tmp_path)
    cx = seat(team, "cx")
    (tmp_path / ".git").mkdir()  # the seat's folder is inside a repository: its root is trusted too
    argv = seatfiles.seat_command(team, cx)
    agent = argv[argv.index(seatfiles.SEAT_ARGV0) + 1 :]
    assert agent[:2] == ["codex", "--no-daemon"]
    assert agent[-2:] == ["-m", "o9"]
    found = overrides(agent)
    assert found["check_for_update_on_startup"] is False
    assert found["projects"] == {
        str(cx.cwd): {"trust_level": "trusted"},
        str(tmp_path): {"trust_level": "trusted"},
    }
    prompt = found["developer_instructions"]
    assert prompt == seatfiles.seat_prompt(team, cx)
    assert isinstance(prompt, str) and '# Rules "quoted"\nline two\\n' in prompt
    assert "You are not Claude Code: you have no SendMessage tool" in prompt
    assert "| cx | mx-cx | codex |" in prompt
    seatfiles.write_seat_files(team, cx)
    assert not (cx.cwd / "AGENTS.md").exists()  # nothing written where the user keeps their own


def test_gemini_gets_session_trust_and_its_prompt_in_a_gemini_md_marked_as_fabrikitos(tmp_path: Path) -> None:
    team = make(tmp_path)
    gm = seat(team, "gm")
    seatfiles.write_seat_files(team, gm)
    argv = seatfiles.seat_command(team, gm)
    assert argv[argv.index(seatfiles.SEAT_ARGV0) + 1 :] == ["gemini", "--skip-trust"]
    env = seatfiles.seat_env(team, gm)
    assert env["COLORTERM"] == "truecolor" and env["TEAM_ROLE"] == "gm"
    written = (gm.cwd / "GEMINI.md").read_text(encoding="utf-8")
    assert written.startswith("<!-- fabrikito: the team's prompt for seat gm")
    assert written.endswith(seatfiles.seat_prompt(team, gm))
    seatfiles.write_seat_files(team, gm)  # its own file is rewritten at the next start
    assert (gm.cwd / "GEMINI.md").read_text(encoding="utf-8") == written


def test_a_users_own_gemini_md_is_never_overwritten_and_the_seat_not_started(tmp_path: Path) -> None:
    team = make(tmp_path, TEAM.replace('agent = "gemini"', 'agent = "gemini"\ncommand = "/bin/sh"'))
    gm = seat(team, "gm")
    (gm.cwd / "GEMINI.md").write_text("the user's own\n", encoding="utf-8")
    with pytest.raises(otherseat.UsersOwnFile, match="move yours one folder up"):
        seatfiles.write_seat_files(team, gm)
    assert (gm.cwd / "GEMINI.md").read_text(encoding="utf-8") == "the user's own\n"
    report = check.run(team, env={"HOME": str(tmp_path)})
    kinds = {w.kind: w for w in report.warnings}
    assert kinds["own-gemini-md"].roles == ("gm",)
    assert kinds["gemini-updates"].roles == ("gm",)  # no settings file: Gemini checks for updates
    lines: list[str] = []
    server = Server(socket_name=f"fab-unit-{secrets.token_hex(4)}")
    try:
        result = lifecycle.up(team, ["gm"], out=lines.append, server=server)
    finally:
        try:
            server.kill_server()
        except TmuxError:
            pass
    assert result.failed and "move yours one folder up" in result.failed[0].detail


def test_gemini_update_settings_turned_off_by_the_user_silence_the_warning(tmp_path: Path) -> None:
    team = make(tmp_path)
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps({"general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}), encoding="utf-8"
    )
    assert "gemini-updates" not in {w.kind for w in check.run(team, env={"HOME": str(tmp_path)}).warnings}


def test_a_claude_seat_in_a_mixed_team_is_told_to_use_say_for_the_others(tmp_path: Path) -> None:
    team = make(tmp_path)
    prompt = seatfiles.seat_prompt(team, seat(team, "em"))
    assert "Not Claude Code: cx, gm. SendMessage reaches them by their session name" in prompt
    assert seatfiles.seat_command(team, seat(team, "em"))[4] == "claude"


def test_a_seat_whose_program_is_missing_is_refused_naming_the_seat(tmp_path: Path) -> None:
    from fabrikito.base.errors import UsageError

    team = make(tmp_path, TEAM.replace('agent = "codex"', 'agent = "codex"\ncommand = "/nowhere/codex"'))
    with pytest.raises(UsageError, match=r"'/nowhere/codex' of seat cx .* install Codex CLI, or set command"):
        lifecycle.require_agent(team, [seat(team, "cx")])


# -- down ends every process a seat started ---------------------------------------------

SURVIVOR = (
    # A child that ignores the hangup, re-parented to init once the pane's shell is gone (as Gemini CLI's
    # relaunched node is), and a grandchild of it; the pane's own process waits on a sleep.
    "trap '' HUP; (trap '' HUP; sleep 300 & sleep 301) & echo started; exec sleep 302"
)


def start_pane(server: Server, session: str) -> tuple[str, int]:
    out = server.run("new-session", "-d", "-P", "-F", "#{pane_id} #{pane_pid}", "-s", session, "sh", "-c", SURVIVOR)
    pane, pid = out.split()
    return pane, int(pid)


def members_after(pid: int, timeout: float = 5.0) -> list[procs.ProcInfo]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(procs.session_members(pid)) < 4:
        time.sleep(0.05)
    return procs.session_members(pid)


def test_closing_the_pane_alone_leaves_processes_behind(server: Server) -> None:
    """The control: what down must deal with is real."""
    _, pid = start_pane(server, "control")
    assert len(members_after(pid)) >= 3
    server.kill_session("control")
    time.sleep(1.0)
    left = procs.session_members(pid)
    try:
        assert left, "the hangup ended every process: the survivor case is not reproduced"
    finally:
        reap.end([reap.Tracked(p.pid, p.start_ticks) for p in left], grace=1.0)


def test_down_ends_every_process_of_the_seat_and_none_remain(tmp_path: Path, server: Server) -> None:
    team = make(tmp_path)
    gm = seat(team, "gm")
    pane, pid = start_pane(server, gm.session)
    before = members_after(pid)
    assert len(before) >= 3
    ticks = procs.info(pid).start_ticks
    seatfiles.write_seat_files(team, seat(team, "cx"))  # makes .state/<team>/seats/
    seatfiles.write_launch(team, "gm", seatfiles.LaunchRecord(pane, pid, "delivered", time.time(), ticks))
    lines: list[str] = []
    code = teardown.down(team, ["gm"], out=lines.append, server=server, grace=2.0)
    assert code == 0, lines
    assert procs.session_members(pid) == []
    assert not [p for p in before if procs.alive(p.pid)]
    assert seatfiles.read_launch(team, "gm") is None


def test_a_reused_id_is_never_signalled(server: Server) -> None:
    _, pid = start_pane(server, "reuse")
    members_after(pid)
    later = procs.info(pid).start_ticks + 10**9  # as if the session were newer than all that runs in it
    assert reap.seat_processes(pid, later) == []
    wrong = [reap.Tracked(pid, procs.info(pid).start_ticks + 1)]
    assert reap.end(wrong, grace=0.2) == []
    assert procs.alive(pid)


def test_down_after_the_tmux_server_was_killed_still_ends_what_survived(tmp_path: Path, server: Server) -> None:
    team = make(tmp_path)
    pane, pid = start_pane(server, seat(team, "gm").session)
    members_after(pid)
    seatfiles.write_seat_files(team, seat(team, "cx"))  # makes .state/<team>/seats/
    seatfiles.write_launch(
        team, "gm", seatfiles.LaunchRecord(pane, pid, "delivered", time.time(), procs.info(pid).start_ticks)
    )
    server.kill_server()
    time.sleep(0.5)
    assert procs.session_members(pid), "something survived the server, as Gemini CLI does"
    lines: list[str] = []
    assert teardown.down(team, out=lines.append, server=server, grace=2.0) == 0, lines
    assert any("its session is gone" in line for line in lines), lines
    assert procs.session_members(pid) == []
    assert seatfiles.read_launch(team, "gm") is None


def test_check_warns_that_seats_which_are_not_claude_code_can_read_the_log(tmp_path: Path) -> None:
    """Claude Code seats get a Read deny on messages.log; Codex and Gemini seats have none: check says which."""
    team = make(tmp_path)
    warning = {w.kind: w for w in check.run(team, env={"HOME": str(tmp_path)}).warnings}["log-readable"]
    assert warning.roles == ("cx", "gm")
    assert "messages.log" in warning.message
    (tmp_path / "c").mkdir()
    claude_only = make(tmp_path / "c", "[[seat]]".join(TEAM.split("[[seat]]")[:2]))
    assert all(s.agent == "claude" for s in claude_only.seats)
    assert "log-readable" not in {w.kind for w in check.run(claude_only, env={"HOME": str(tmp_path)}).warnings}
