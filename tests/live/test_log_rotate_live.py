"""A real seat's SendMessage lines across a rotation: the hook appends to whatever messages.log is, the
rotation keeps every line, and ``log -n`` / ``log --since`` read the generations as one log."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tests.live.teamkit import fabrikito
from tests.live.test_hook_live import hook_settings

from fabrikito.base import rotate
from fabrikito.base.tmux import Server
from fabrikito.log import msglog, upkeep
from fabrikito.offline import seatkit
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import SeatFactory
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile

pytestmark = pytest.mark.live


def test_a_real_seats_lines_survive_rotation_and_are_read_across_it(
    seat_factory: SeatFactory, tmux_server: Server, standin: StandIn, tmp_path: Path
) -> None:
    (tmp_path / "team").mkdir()
    team_path = tmp_path / "team" / "team.toml"
    team_path.write_text(
        f'name = "live"\ntmux_socket = "{tmux_server.socket_name}"\nlog_max_size = "64K"\nlog_keep = 2\n\n'
        '[[seat]]\nrole = "a"\nsession = "lv-a"\npermission_mode = "acceptEdits"\n\n'
        '[[seat]]\nrole = "b"\nsession = "lv-b"\npermission_mode = "acceptEdits"\n',
        encoding="utf-8",
    )
    team = teamfile.load(team_path)
    team.state_dir.mkdir(parents=True, mode=0o700)
    old = [msglog.format_line(time.time() - 86400 + i, "b", "a", "sent", f"old {i}") for i in range(2000)]
    team.log_path.write_bytes(b"".join(old))  # a day-old log past its 64 KiB limit
    started = msglog.local_time()
    a = seat_factory.start("a", session="lv-a", settings=hook_settings(team_path, "a", tmp_path / "r"))

    def send(prompt: str, message: str) -> None:
        standin.on(prompt, Reply(tool="SendMessage", input={"to": "no-such-seat", "message": message}), seat="a")
        since = standin.mark()
        seatkit.submit(tmux_server, a, prompt)
        standin.wait_for_request("a", prompt, 30, since=since)
        standin.wait_for_tool_result("a", "SendMessage", 30)
        seatkit.wait_until(
            lambda: message.encode() in rotate.read_all(team.log_path),
            30,
            describe=lambda: tmux_server.capture(a.pane),
            what=f"the hook's line for {message!r}",
        )
        seatkit.wait_until(
            lambda: seatkit.box_ready(tmux_server, a.pane, a.session),
            30,
            describe=lambda: tmux_server.capture(a.pane),
            what="seat a to be ready again",
        )

    send("first call", "before the rotation")
    assert upkeep.upkeep(team) == ["messages.log"]  # what the worker and the command server run
    assert not team.log_path.exists()  # the next writer makes it
    send("second call", "after the rotation")
    assert b"before the rotation" in Path(f"{team.log_path}.1").read_bytes()
    assert b"after the rotation" in team.log_path.read_bytes()

    done = fabrikito("log", "-n", "2", "--json", team=team_path)
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)["records"]
    assert [r["message"] for r in records] == ["before the rotation", "after the rotation"]
    assert [r["outcome"] for r in records] == ["NOT-SENT", "NOT-SENT"]
    done = fabrikito("log", "--since", started, "--json", team=team_path)
    assert [r["message"] for r in json.loads(done.stdout)["records"]] == ["before the rotation", "after the rotation"]
    done = fabrikito("log", "--json", team=team_path)
    every = json.loads(done.stdout)["records"]
    assert len(every) == 2002 and every[0]["message"] == "old 0" and every[-1]["line"] == 2002
