"""The lines ``up`` writes for a kickoff: one line an attempt, never two for one.

The seat is ``bench/replay_agent.sh``: it draws a box recorded from Claude Code 2.1.316 (empty, 220x50),
writes a 2.1.316 session registry entry and then runs on as a process named ``claude`` that neither reads
nor echoes its terminal (``stty -echo``).  So a kickoff pasted there never shows in the box: ``up`` sees
it typed, not staying, ``flush`` finds nothing to submit, and the kickoff is not sent again (nothing may
be typed blind).  That one attempt has one ``NOT-DELIVERED`` line (it had two: the attempt's and, again,
the outcome's), then flush's own.
"""

from __future__ import annotations

import json
from pathlib import Path

from fabrikito.base.tmux import Server
from fabrikito.cli import serverctl
from fabrikito.launch import lifecycle, seatfiles, teardown
from fabrikito.team import teamfile

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "bench" / "replay_agent.sh"
EMPTY_BOX = ROOT / "tests" / "fixtures" / "screens" / "2.1.316" / "inline-220x50-empty-box-fresh-start"


def replayed(tmp_path: Path, server: Server) -> teamfile.Team:
    env = {"REPLAY_SCREEN": str(EMPTY_BOX), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config")}
    (tmp_path / "team.toml").write_text(
        f'name = "ko"\ntmux_socket = "{server.socket_name}"\nkickoff = "Start with the plan."\n'
        f'agent = [{json.dumps(str(REPLAY))}]\n\n[[seat]]\nrole = "dev"\nsession = "ko-dev"\n'
        "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n",
        encoding="utf-8",
    )
    return teamfile.load(tmp_path / "team.toml")


def test_a_kickoff_typed_that_did_not_stay_and_was_not_sent_again_has_one_line(tmp_path: Path, server: Server) -> None:
    team = replayed(tmp_path, server)  # the fixture's tmux server, killed at the end
    said: list[str] = []
    try:
        result = lifecycle.up(team, out=said.append)
        assert [r.role for r in result.failed] == ["dev"], said
        assert "did not stay in the box" in result.failed[0].detail and "nothing was sent" in result.failed[0].detail
        rows = [line.split("\t") for line in team.log_path.read_text(encoding="utf-8").splitlines()]
        assert [row[1:4] for row in rows] == [
            ["launcher", "dev", "NOT-DELIVERED"],
            ["launcher", "dev", "FLUSH-NOTHING"],
        ], rows
        assert rows[0][4] == "Start with the plan."
        record = seatfiles.read_launch(team, "dev")
        assert record is not None and record.kickoff == "pending"  # up gives it again
    finally:
        teardown.down(team, out=lambda _line: None, stop_helpers=[serverctl.stop])
