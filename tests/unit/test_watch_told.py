"""No event's notify is lost when the watcher stops: the cursor of what was told, the events owed at start,
each told exactly once; the restart notes handed to notify like the watcher's own, of the kinds chosen."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from fabrikito.base import statedir
from fabrikito.launch import seatevents
from fabrikito.log import events
from fabrikito.log.events import NOTED, OPENED, Event
from fabrikito.team import teamfile
from fabrikito.team.teamfile import Team
from fabrikito.watch import notify
from fabrikito.watch.watcher import Watcher, default_consumers

SLOW = "import sys, time; data = sys.stdin.read(); time.sleep({delay}); open({out!r}, 'a').write(data + '\\n')"


def team_with(tmp_path: Path, *, delay: float = 0.0, watch: str = "") -> tuple[Team, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "told.jsonl"
    argv = json.dumps([sys.executable, "-c", SLOW.format(delay=delay, out=str(out))])
    path = tmp_path / "team.toml"
    text = f'name = "w"\nnotify = {argv}\n{watch}\n[[seat]]\nrole = "dev"\nsession = "s-dev"\n'
    path.write_text(text, encoding="utf-8")
    team = teamfile.load(path)
    statedir.ensure_state_dir(team.base_dir, team.name)
    return team, out


def told(out: Path) -> list[str]:
    if not out.exists():
        return []
    return [json.loads(line)["key"] for line in out.read_text(encoding="utf-8").splitlines() if line]


def wait(check: object, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.02)


def opened(n: int) -> Event:
    now = time.time()
    return Event(now, "dev", "permission", OPENED, f"prompt {n}", now, f"permission dev {n}")


def test_a_watcher_stopped_while_notify_is_slow_leaves_the_rest_to_the_next_which_tells_each_once(
    tmp_path: Path,
) -> None:
    team, out = team_with(tmp_path, delay=0.8)
    path = events.path_for(team.state_dir)
    first = Watcher(team)  # the team's first watcher: nothing owed, the cursor set at the file's start
    assert notify.read_cursor(team) is not None
    for n in range(3):
        events.append(path, opened(n))
    assert first.tell_new()  # handed to notify in the file's order
    wait(lambda: len(told(out)) == 1)
    first.notifier.close(wait=0.1)  # the second is running: killed, not told; the third still queued
    time.sleep(1.0)  # a killed command would have written by now
    assert told(out) == ["permission dev 0"]
    assert [e.key for e in notify.owed(team, events.read(path))] == ["permission dev 1", "permission dev 2"]

    second = Watcher(team)  # tells what was written and not told, first
    wait(lambda: len(told(out)) == 3)
    second.close()
    assert told(out) == ["permission dev 0", "permission dev 1", "permission dev 2"]  # each exactly once
    assert notify.owed(team, events.read(path)) == []
    third = Watcher(team)
    time.sleep(1.0)
    third.close()
    assert told(out) == ["permission dev 0", "permission dev 1", "permission dev 2"]  # nothing told again


def test_a_cursor_whose_event_is_gone_tells_what_came_after_its_time(tmp_path: Path) -> None:
    team, _ = team_with(tmp_path)
    path = events.path_for(team.state_dir)
    for at, n in ((1000.0, 0), (2000.0, 1)):
        events.append(path, Event(at, "dev", "permission", OPENED, "", at, f"permission dev {n}"))
    notify.write_cursor(team, Event(1500.0, "dev", "permission", OPENED, "", 1500.0, "a key rotated away"))
    assert [e.key for e in notify.owed(team, events.read(path))] == ["permission dev 1"]
    notify.write_cursor(team, Event(1000.0, "dev", "permission", OPENED, "", 1000.0, "permission dev 0"))
    assert [e.key for e in notify.owed(team, events.read(path))] == ["permission dev 1"]
    (team.state_dir / notify.CURSOR_NAME).write_text("not json", encoding="utf-8")  # damaged: as none, reset
    assert notify.owed(team, events.read(path)) == [] and notify.read_cursor(team) == (2000.0, "permission dev 1")


def test_restart_notes_reach_notify_in_the_kinds_chosen_and_an_exit_is_told_once(tmp_path: Path) -> None:
    team, out = team_with(tmp_path)
    watcher = Watcher(team)
    for kind in ("exited", "restarting", "restarted", "restart-capped", "fresh-start", "resumed"):
        seatevents.emit(team, "dev", kind, f"a {kind} note")
    assert watcher.tell_new()
    wait(lambda: len(told(out)) == 3)
    time.sleep(0.3)
    watcher.close()
    kinds = [k.split(":")[1] for k in told(out)]
    # the default: restarts, the cap and a fresh start; not the exit note (the exited condition tells it), not
    # a restart decided (restarted follows) nor a seat up resumed (the owner's own doing)
    assert kinds == ["restarted", "restart-capped", "fresh-start"]

    chosen, out2 = team_with(tmp_path / "b", watch='[watch]\nkinds = ["resumed", "restarting"]\n')
    watcher = Watcher(chosen)
    for kind in ("restarted", "resumed", "restarting"):
        seatevents.emit(chosen, "dev", kind, f"a {kind} note")
    watcher.tell_new()
    wait(lambda: len(told(out2)) == 2)
    watcher.close()
    assert [k.split(":")[1] for k in told(out2)] == ["resumed", "restarting"]
    assert all(e.event == NOTED for e in events.read(events.path_for(chosen.state_dir)))


def test_a_watcher_ends_once_its_server_has_been_gone_a_while_unless_a_seat_restarts_on_exit(tmp_path: Path) -> None:
    from fabrikito.watch.watcher import TEAM_GONE_AFTER

    team, _ = team_with(tmp_path / "plain", watch='tmux_socket = "fab-none-ended"')
    watcher = Watcher(team)
    try:
        start = time.time()
        watcher.round(now=start)
        assert watcher.ended(start + TEAM_GONE_AFTER - 1) is None  # gone, but only just: the seats are told
        assert "tmux server has been gone" in (watcher.ended(start + TEAM_GONE_AFTER + 1) or "")
    finally:
        watcher.close()
    kept, _ = team_with(tmp_path / "kept", watch='tmux_socket = "fab-none-kept"\nrestart = "on-exit"')
    restarting = Watcher(kept, default_consumers(kept))
    try:
        start = time.time()
        restarting.round(now=start)  # no record of a start by up: nothing is restarted, the server stays gone
        assert restarting.server_gone_since == start
        assert restarting.ended(start + 10 * TEAM_GONE_AFTER) is None  # its restarts would bring the seats back
    finally:
        restarting.close()


def test_a_team_file_gone_for_a_moment_as_an_editor_saves_it_does_not_end_the_watcher(tmp_path: Path) -> None:
    from fabrikito.watch.watcher import FILE_GONE_AFTER

    team, _ = team_with(tmp_path)
    watcher = Watcher(team)
    try:
        start = time.time()
        aside = team.path.with_name("team.toml~")
        team.path.rename(aside)
        assert watcher.ended(start) is None and watcher.ended(start + FILE_GONE_AFTER / 2) is None
        aside.rename(team.path)  # written again
        assert watcher.ended(start + 2 * FILE_GONE_AFTER) is None
        team.path.unlink()
        assert watcher.ended(start + 3 * FILE_GONE_AFTER) is None
        assert "is gone: the watcher ends" in (watcher.ended(start + 4 * FILE_GONE_AFTER + 0.1) or "")
    finally:
        watcher.close()
