"""The SendMessage hook on real seats: the stand-in makes seat a call SendMessage, the log gets the lines.

With ``FABRIKITO_RECORD_FIXTURES=1`` the hook inputs Claude Code gave are
also saved as ``tests/fixtures/hook-payloads/live-*.json``.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from tests import userenv

from fabrikito.base.tmux import Server
from fabrikito.offline import seatkit
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import SeatFactory
from fabrikito.offline.standin import StandIn

pytestmark = pytest.mark.live

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hook-payloads"
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"


def write_team(path: Path, server: Server) -> Path:
    path.write_text(
        f'name = "live"\ntmux_socket = "{server.socket_name}"\n\n'
        '[[seat]]\nrole = "a"\nsession = "lv-a"\npermission_mode = "acceptEdits"\n\n'
        '[[seat]]\nrole = "b"\nsession = "lv-b"\npermission_mode = "acceptEdits"\n',
        encoding="utf-8",
    )
    return path


def hook_settings(team: Path, role: str, record: Path) -> dict[str, object]:
    """The seat's settings: the hook (as up writes it) and a recorder of the hook input."""
    log_hook = f"{shlex.quote(sys.executable)} -m fabrikito.log.hook --team {shlex.quote(str(team))} --role {role}"
    recorder = f"sh -c 'cat >> {shlex.quote(str(record))}; echo >> {shlex.quote(str(record))}'"
    hooks = [{"type": "command", "command": log_hook}, {"type": "command", "command": recorder}]
    entry = [{"matcher": "SendMessage", "hooks": hooks}]
    return {"hooks": {"PostToolUse": entry, "PostToolUseFailure": entry}}


def log_rows(team: Path) -> list[list[str]]:
    path = team.parent / ".state" / "live" / "messages.log"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        assert len(fields) == 5 and re.fullmatch(TIME, fields[0]), line
        rows.append(fields[1:])
    return rows


def test_real_seat_sendmessage_is_logged(
    seat_factory: SeatFactory, tmux_server: Server, standin: StandIn, tmp_path: Path
) -> None:
    (tmp_path / "team").mkdir()
    team = write_team(tmp_path / "team" / "team.toml", tmux_server)
    record = tmp_path / "payloads.jsonl"
    # Both start before either is waited for, as start_many does: a running seat rewrites the
    # HOME's .claude.json, and a seat started after that can lose its trusted-folder entry.
    starting = [
        seat_factory.start(role, session=f"lv-{role}", settings=hook_settings(team, role, record), wait=False)
        for role in ("a", "b")
    ]
    a, b = (seatkit.wait_ready(tmux_server, seat) for seat in starting)
    calls: list[tuple[str, dict[str, Any], list[str]]] = [
        ("send to b", {"to": "lv-b", "message": "hello b, from a"}, ["a", "b", "sent", "hello b, from a"]),
        (
            "send to nobody",
            {"to": "no-such-seat", "message": "hello nobody"},
            ["a", "no-such-seat", "NOT-SENT", "hello nobody"],
        ),
        (
            "send to b by address",
            {"to": f"uds:{b.socket_path}", "message": "hello b\tby address"},
            ["a", "b", "sent", "hello b\\tby address"],
        ),
        (
            "tell me when b is idle",
            {"to": "lv-b", "message": "", "notify_when_idle": True},
            ["a", "b", "NOTIFY-WHEN-IDLE", "<no message: notify when idle>"],
        ),
    ]
    expected: list[list[str]] = []
    for prompt, tool_input, row in calls:
        standin.on(prompt, Reply(tool="SendMessage", input=tool_input), seat="a")
        since = standin.mark()
        seatkit.submit(tmux_server, a, prompt)
        standin.wait_for_request("a", prompt, 30, since=since)
        standin.wait_for_tool_result("a", "SendMessage", 30)
        expected.append(row)
        seatkit.wait_until(
            lambda: len(log_rows(team)) >= len(expected),
            30,
            describe=lambda: f"log: {log_rows(team)}\n{tmux_server.capture(a.pane)}",
            what=f"the log line for {prompt!r}",
        )
        seatkit.wait_until(
            lambda: seatkit.box_ready(tmux_server, a.pane, a.session),
            30,
            describe=lambda: tmux_server.capture(a.pane),
            what="seat a to be ready again",
        )
    assert log_rows(team) == expected
    if userenv.setting("FABRIKITO_RECORD_FIXTURES") == "1":
        save_fixtures(record)


def save_fixtures(record: Path) -> None:
    names = ["live-success", "live-unknown-recipient", "live-uds-address", "live-notify-when-idle"]
    payloads = [line for line in record.read_text(encoding="utf-8").splitlines() if line.strip()]
    for name, payload in zip(names, payloads, strict=False):
        json.loads(payload)
        (FIXTURES / f"{name}.json").write_text(payload + "\n", encoding="utf-8")
