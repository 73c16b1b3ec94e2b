"""``status``: the state of a seat from what was read, the log's last times, the table and the JSON."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabrikito.base.tmux import Server
from fabrikito.delivery import seatpane
from fabrikito.launch import status
from fabrikito.launch.status import SeatState
from fabrikito.log import msglog
from fabrikito.screen import PaneSnapshot, startup
from fabrikito.team import teamfile

REPO = Path(__file__).resolve().parents[2]
SCREENS = REPO / "tests" / "fixtures" / "screens" / "2.1.316"
ROLES = ("em", "sec", "api")


def look_of(name: str, *, pane: str = "%1", dead: bool = False) -> seatpane.Look:
    meta = json.loads((SCREENS / f"{name}.json").read_text(encoding="utf-8"))
    snap = PaneSnapshot(
        ansi=(SCREENS / f"{name}.ansi").read_text(encoding="utf-8"),
        width=int(meta["pane_width"]),
        height=int(meta["pane_height"]),
        alternate_on=meta["alternate_on"] == "1",
        in_mode=meta["pane_in_mode"] == "1",
        cursor_x=int(meta["cursor_x"]),
        cursor_y=int(meta["cursor_y"]),
    )
    return seatpane.Look(pane, dead, snap, snap.width, snap.height, 100)


ROW = seatpane.PaneRow(pane_id="%1", pane_pid=os.getpid(), session="acme-em", dead=False, server_pid=1, window_id="@1")
AGENT = seatpane.Agent(pid=100, name="claude", version="2.1.316", registry=None)


# -- a seat's state ---------------------------------------------------------------------


def test_down_exited_and_not_an_agent() -> None:
    assert status.seat_state(None, None, None, None) == (SeatState.DOWN, "")
    dead = seatpane.PaneRow("%1", 100, "acme-em", True, 1, "@1")
    assert status.seat_state(dead, None, None, None)[0] is SeatState.EXITED
    assert status.seat_state(ROW, None, None, None)[0] is SeatState.NOT_AGENT


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_live_pane_whose_process_ended_is_exited_before_tmux_marks_it_dead() -> None:
    """Between its process's end and tmux's reaping it, a pane is listed alive: read as a shell left there,
    the watcher opened the seat's condition as `not-agent` and kept that kind once the pane was dead."""
    ended = subprocess.Popen(["/bin/true"])
    wait_for_exit(ended.pid)  # a zombie: ended, not yet reaped (as tmux has not yet)
    zombie = seatpane.PaneRow("%1", ended.pid, "acme-em", False, 1, "@1")
    assert status.seat_state(zombie, None, None, None)[0] is SeatState.EXITED
    ended.wait()
    assert status.seat_state(zombie, None, None, None)[0] is SeatState.EXITED  # reaped: no such process


def wait_for_exit(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text():
        assert time.monotonic() < deadline, f"process {pid} did not end"
        time.sleep(0.01)


def test_registry_status_decides_busy_and_waiting() -> None:
    assert status.seat_state(ROW, AGENT, {"status": "busy"}, None) == (SeatState.BUSY, "")
    waiting = {"status": "waiting", "waitingFor": "permission prompt"}
    assert status.seat_state(ROW, AGENT, waiting, None) == (SeatState.WAITING, "permission prompt")
    assert status.seat_state(ROW, AGENT, {"status": "idle"}, None) == (SeatState.IDLE, "")


def test_the_screen_refines_an_idle_seat() -> None:
    idle = {"status": "idle"}
    empty = look_of("inline-120x40-empty-box-fresh-start")
    typed = look_of("inline-120x40-typed-short-unsubmitted")
    assert status.seat_state(ROW, AGENT, idle, empty) == (SeatState.IDLE, "")
    assert status.seat_state(ROW, AGENT, idle, typed) == (SeatState.BOX_TEXT, "")


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_a_startup_dialog_before_the_registry_is_waiting(renderer: str) -> None:
    state, detail = status.seat_state(ROW, AGENT, None, look_of(f"{renderer}-120x40-bypass-dialog"))
    assert state is SeatState.WAITING
    assert "bypass" in detail


def test_no_registry_and_no_dialog_is_starting() -> None:
    assert status.seat_state(ROW, AGENT, None, look_of("inline-120x40-empty-box-fresh-start"))[0] is SeatState.STARTING
    assert status.seat_state(ROW, AGENT, None, None)[0] is SeatState.STARTING


def test_startup_dialog_texts() -> None:
    assert startup.startup_dialog("  WARNING: Claude Code running in Bypass Permissions mode\n") is not None
    trust = startup.startup_dialog(" ❯ 1. Yes, I trust this folder")
    assert trust is not None and "trust" in trust[0]
    assert startup.startup_dialog("❯\u00a0") is None


# -- reading many panes in one call ----------------------------------------------------------


def test_parse_looks_splits_by_marker_and_keeps_only_asked_panes() -> None:
    marker = "@fabrikito-look-abc"
    sep = seatpane.SEP

    def head(pane: str, dead: str = "0") -> str:
        values = {
            "pane_id": pane,
            "pane_dead": dead,
            "pane_in_mode": "0",
            "alternate_on": "0",
            "pane_width": "80",
            "pane_height": "3",
            "cursor_x": "0",
            "cursor_y": "0",
            "window_width": "80",
            "window_height": "3",
            "pane_pid": "7",
        }
        return marker + sep + sep.join(values[f] for f in seatpane.SNAP_FIELDS)

    out = "\n".join([head("%1"), "row a1", "", "row a3", head("%2", "1"), "b", "", "", head("%9"), "x", ""]) + "\n"
    looks = seatpane.parse_looks(out, marker, ["%1", "%2"])
    assert set(looks) == {"%1", "%2"}
    assert looks["%1"].snapshot.ansi == "row a1\n\nrow a3\n"
    assert looks["%2"].dead is True
    assert looks["%2"].snapshot.ansi == "b\n\n\n"


# -- the log ---------------------------------------------------------------------------


def write_log(path: Path, lines: list[tuple[float, str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        for when, sender, recipient in lines:
            f.write(msglog.format_line(when, sender, recipient, msglog.Outcome.DELIVERED, "m\tx"))


def naive(lines: list[tuple[float, str, str]]) -> dict[str, tuple[str | None, str | None]]:
    out: dict[str, tuple[str | None, str | None]] = {}
    for role in ROLES:
        to = [w for w, s, r in lines if r == role or (r == "all" and s != role)]
        sent = [w for w, s, _ in lines if s == role]
        out[role] = (
            msglog.local_time(to[-1]) if to else None,
            msglog.local_time(sent[-1]) if sent else None,
        )
    return out


def test_last_times_to_and_from_with_say_all(tmp_path: Path) -> None:
    log = tmp_path / "messages.log"
    base = 1_800_000_000.0
    lines = [(base, "owner", "em"), (base + 60, "api", "all"), (base + 120, "launcher", "sec")]
    write_log(log, lines)
    with log.open("ab") as f:
        f.write(b"garbage that is not a log line\n")
    times = status.last_message_times(log, ROLES)
    assert times == naive(lines)
    assert times["api"] == (None, msglog.local_time(base + 60))
    assert times["em"][0] == msglog.local_time(base + 60)


def test_missing_log_has_no_times(tmp_path: Path) -> None:
    assert status.last_message_times(tmp_path / "nope.log", ROLES) == {r: (None, None) for r in ROLES}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([*ROLES, "owner", "launcher"]), st.sampled_from([*ROLES, "all", "acme-x"])),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=200),
)
def test_reading_backwards_in_blocks_equals_reading_it_all(pairs: list[tuple[str, str]], block: int) -> None:
    import tempfile

    lines = [(1_800_000_000.0 + i, s, r) for i, (s, r) in enumerate(pairs)]
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "messages.log"
        write_log(log, lines)
        from fabrikito.log import seek

        old = seek.BLOCK
        seek.BLOCK = block  # status reads back with the log's reader, a block at a time
        try:
            assert status.last_message_times(log, ROLES) == naive(lines)
        finally:
            seek.BLOCK = old


# -- output -------------------------------------------------------------------------------


def make_team(tmp_path: Path) -> teamfile.Team:
    path = tmp_path / "team.toml"
    path.write_text(
        f'name = "acme"\ntmux_socket = "fab-none-{secrets.token_hex(4)}"\n'
        '[[seat]]\nrole = "em"\nsession = "acme-em"\npermission_mode = "acceptEdits"\n'
        '[[seat]]\nrole = "sec"\nsession = "acme-sec"\npermission_mode = "bypassPermissions"\n',
        encoding="utf-8",
    )
    return teamfile.load(path)


def test_table_json_and_notice(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    seats = (
        status.SeatStatus(
            "em", "acme-em", "%1", SeatState.IDLE, "", "prompting", "2026-11-30T10:00:00", None, 41, "2.1.332", True
        ),
        status.SeatStatus(
            "sec", "acme-sec", "%2", SeatState.WAITING, "permission prompt", "bypass", None, "2026-11-29T09:00:00"
        ),
        status.SeatStatus("qa", "acme-qa", "%3", SeatState.IDLE, "", "prompting", None, None, 43, "2.1.999", False),
    )
    found = status.Status(team, seats, (status.Notice("sec", 3, 1_800_000_000.0),), tmux_calls=2, server_running=True)
    text = status.render(found, today="2026-11-30")
    lines = text.split("\n")
    header = ["ROLE", "SESSION", "PANE", "STATE", "CLASS", "RELEASE", "LAST", "TO", "LAST", "FROM", "CONVERSATION"]
    assert lines[1].split() == header
    assert lines[2].split() == ["em", "acme-em", "%1", "idle", "prompting", "2.1.332", "10:00:00", "-", "-"]
    assert "waiting at a dialog (permission prompt)" in lines[3]
    assert "2026-11-29T09:00:00" in lines[3]
    assert "2.1.999 (not qualified: run fabrikito qualify)" in lines[4]
    lines.pop(4)
    assert lines[4].startswith("NOTICE sec: 3 sends to it were refused because its input box holds text; the last at ")
    assert msglog.local_time(1_800_000_000.0) in lines[4]
    data = status.to_json(found)
    assert data["version"] == 1 and data["team"] == "acme"
    assert data["seats"][1] == {
        "role": "sec",
        "session": "acme-sec",
        "pane": "%2",
        "state": "waiting at a dialog",
        "detail": "permission prompt",
        "class": "bypass",
        "last_to": None,
        "last_from": "2026-11-29T09:00:00",
        "pid": None,
        "release": None,
        "qualified": None,
        "host": None,
        "conversation": None,
        "restarts": 0,
    }
    assert (data["seats"][2]["release"], data["seats"][2]["qualified"]) == ("2.1.999", False)
    assert data["notices"] == [{"role": "sec", "count": 3, "last": msglog.local_time(1_800_000_000.0)}]


def test_collect_with_no_server_running_is_every_seat_down(tmp_path: Path) -> None:
    team = make_team(tmp_path)
    assert not Server(socket_name=team.tmux_socket).alive()
    found = status.collect(team)
    assert found.server_running is False
    assert [s.state for s in found.seats] == [SeatState.DOWN, SeatState.DOWN]
    assert found.tmux_calls == 1
    assert "not running" in status.render(found)


def test_collect_overlaps_its_tmux_calls_with_its_own_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The screens' call is started before /proc is read, and read after; a pane list started
    earlier (cmd_status starts it before importing this module) gives what status reads itself."""
    team = make_team(tmp_path)
    server = team.server()
    try:
        server.new_session("acme-em", ["sleep", "30"], cwd="/")
        server.new_session("acme-sec", ["sleep", "30"], cwd="/")
        events: list[str] = []
        started, finished = Server.start, seatpane.Looking.looks

        def start(self: Server, *args: str, **kw: object) -> object:
            events.append(f"start {args[0]}")
            return started(self, *args, **kw)  # type: ignore[arg-type]

        def looks(self: seatpane.Looking) -> dict[str, seatpane.Look]:
            events.append("read screens")
            return finished(self)

        def agent(pane_pid: int) -> None:
            events.append("proc")

        monkeypatch.setattr(Server, "start", start)
        monkeypatch.setattr(seatpane.Looking, "looks", looks)
        monkeypatch.setattr(seatpane, "foreground_agent", agent)
        early = status.collect(team, listing=server.start_list_panes())
        assert events == ["start list-panes", "start display-message", "proc", "proc", "read screens"]
        assert early.tmux_calls == 2 and [s.state for s in early.seats] == [SeatState.NOT_AGENT] * 2
        events.clear()
        assert status.collect(team) == early  # the same answer when status makes the list itself
        assert events[:2] == ["start list-panes", "start display-message"] and events[-1] == "read screens"
    finally:
        server.kill_server()
