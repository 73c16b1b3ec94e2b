"""The watcher of a team across hosts, without ssh: what this machine makes of each host's reading (its seats
unreachable, unwatched, or shown as its watcher wrote them), events named with their host, and the
auto-restart taking its panes from the round's reading."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from fabrikito.base import statedir
from fabrikito.launch import autorestart, seatfiles
from fabrikito.launch.autorestart import Seen
from fabrikito.launch.status import SeatState, SeatStatus, Status
from fabrikito.log import events
from fabrikito.log.events import OPENED, Event
from fabrikito.team import teamfile
from fabrikito.team.teamfile import Team
from fabrikito.watch import layout, remote
from fabrikito.watch.remote import Reading
from fabrikito.watch.tracker import Tracker
from fabrikito.watch.watcher import write_state


def team_across(tmp_path: Path) -> Team:
    path = tmp_path / "team.toml"
    seats = [("em", None), ("api", "build-2"), ("web", "build-2")]
    text = 'name = "w"\norigin = "me"\n'
    for role, host in seats:
        text += f'\n[[seat]]\nrole = "{role}"\nsession = "s-{role}"\n' + (f'host = "{host}"\n' if host else "")
    path.write_text(text, encoding="utf-8")
    return teamfile.load(path)


def test_a_host_not_answering_makes_its_seats_unreachable_and_one_without_a_watcher_unwatched(tmp_path: Path) -> None:
    team = team_across(tmp_path)
    now = time.time()
    assert remote.conditions(team, {}) == {}  # not read yet: nothing said
    dark = remote.conditions(team, {"build-2": Reading("build-2", now, problem="Connection refused")})
    assert sorted(dark) == ["unreachable api", "unreachable web"]
    assert "build-2 does not answer (Connection refused)" in dark["unreachable api"].detail
    idle = remote.conditions(team, {"build-2": Reading("build-2", now, running=False)})
    assert sorted(idle) == ["unwatched api", "unwatched web"]
    assert idle["unwatched api"].after == remote.UNWATCHED_AFTER  # up starts it there a moment after here
    assert remote.conditions(team, {"build-2": Reading("build-2", now, running=True, state={})}) == {}
    stale = remote.conditions(team, {"build-2": Reading("build-2", now, running=True, stale=True)})
    assert "has not finished a round" in stale["unwatched web"].detail


def test_the_hosts_seats_and_open_items_go_into_watcher_json_named_with_their_host(tmp_path: Path) -> None:
    team = team_across(tmp_path)
    now = time.time()
    here = SeatStatus("em", "s-em", "%1", SeatState.IDLE, "", "prompting", None, None, conversation="0f3c" * 9)
    found = Status(team, (here,), (), 2, True, None, {})
    opened = {"seat": "api", "kind": "exited", "event": "opened", "detail": "its agent exited", "at": now - 5}
    given = {"seats": [{"role": "api", "state": "exited", "since": now - 5, "class": "prompting"}], "open": [opened]}
    readings = {"build-2": Reading("build-2", now, running=True, state=given)}
    statedir.ensure_state_dir(team.base_dir, team.name)
    tracker = Tracker({})
    tracker.step(remote.conditions(team, readings), now)
    write_state(team, found, tracker, now, readings)
    state = json.loads((team.state_dir / "watcher.json").read_text())
    assert [(s["role"], s["state"], s["host"]) for s in state["seats"]] == [
        ("em", "idle", None),
        ("api", "exited", "build-2"),
        ("web", "unknown", "build-2"),  # the host's watcher has no row for it
    ]
    assert [(i["seat"], i["host"]) for i in state["open"]] == [("api", "build-2")]
    frame = [r.text for r in layout.frame("w", state, [], width=80, height=24, now=now).lines]
    assert any(t.startswith("! api on build-2 exited (5s)") for t in frame), frame
    assert any("api" in t and t.rstrip().endswith("build-2") for t in frame if t.startswith("  api")), frame

    dark = {"build-2": Reading("build-2", now, problem="Connection refused")}
    write_state(team, found, tracker, now, dark)
    state = json.loads((team.state_dir / "watcher.json").read_text())
    assert [(s["role"], s["state"]) for s in state["seats"][1:]] == [("api", "unreachable"), ("web", "unreachable")]
    assert state["open"] == []  # the host's items are not shown as if read


def test_an_event_read_from_a_host_keeps_its_host_in_its_line_and_json(tmp_path: Path) -> None:
    event = Event(time.time(), "api", "exited", OPENED, "its agent exited", time.time(), "exited api", host="build-2")
    back = events.parse(event.line())
    assert back is not None and back.host == "build-2" and back.to_json()["host"] == "build-2"
    plain = Event(time.time(), "em", "exited", OPENED, "x", time.time(), "exited em")
    assert "host" not in plain.to_json()
    from fabrikito.watch.commands import event_line

    assert "  api on build-2  exited  OPEN  " in event_line(event)
    assert "  em  exited  OPEN  " in event_line(plain)
    assert [e.key for e in events.parse_all(event.line() + b"not json\n" + plain.line())] == ["exited api", "exited em"]


def test_the_auto_restart_takes_each_pane_from_the_rounds_reading(tmp_path: Path) -> None:
    team = team_across(tmp_path)

    def at(role: str, state: SeatState, host: str | None = None, pane: str | None = None) -> SeatStatus:
        return SeatStatus(role, f"s-{role}", pane, state, "", "prompting", None, None, host=host)

    found = Status(
        team,
        (at("em", SeatState.EXITED), at("api", SeatState.DOWN, "build-2"), at("web", SeatState.NOT_AGENT, None, "%3")),
        (),
        2,
        True,
        None,
    )
    # A seat on another host is never this machine's to restart.  A live pane with no agent (decision 0039):
    # what runs there is read from its process; a pane up did not start (no launch record of it) is left alone.
    assert autorestart.seen_in(found) == {"em": Seen.EXITED, "web": Seen.OCCUPIED}
    gone = Status(team, (at("em", SeatState.DOWN), at("web", SeatState.BUSY)), (), 1, False, None)
    assert autorestart.seen_in(gone) == {"em": Seen.GONE, "web": Seen.ALIVE}
    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(seatfiles.seats_dir(team))
    for argv, seen in ((["/bin/sh"], Seen.SHELL), (["/bin/sh", "-c", "sleep 1000; true"], Seen.OCCUPIED)):
        shell = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)
        try:
            seatfiles.write_launch(team, "web", seatfiles.LaunchRecord("%3", shell.pid, "delivered", time.time()))
            deadline = time.monotonic() + 10
            while autorestart.seen_in(found)["web"] is not seen:  # the shell has started its command
                assert time.monotonic() < deadline, argv
                time.sleep(0.05)
        finally:
            shell.kill()
            shell.wait(timeout=10)
