"""The watcher's parts without tmux: conditions from recorded screens, the tracker's events (flapping,
thresholds, a restart), the events file (damaged, set aside), notify (a hang killed, a failure logged),
the team file's ``notify``/``[watch]`` and ``check``'s missing program."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from fabrikito.base.errors import TeamFileError
from fabrikito.launch.status import SeatState, SeatStatus, Status
from fabrikito.log import events
from fabrikito.log.events import OPENED, RESOLVED, Event
from fabrikito.team import check, teamfile
from fabrikito.team.teamfile import Team
from fabrikito.watch import conditions, notify
from fabrikito.watch.conditions import Condition
from fabrikito.watch.tracker import Tracker

REPO = Path(__file__).resolve().parents[2]
SCREENS = REPO / "tests" / "fixtures" / "screens" / "2.1.316"


def team_of(tmp_path: Path, text: str = "") -> Team:
    path = tmp_path / "team.toml"
    path.write_text(f'name = "w"\n{text}\n[[seat]]\nrole = "dev"\nsession = "s-dev"\n', encoding="utf-8")
    return teamfile.load(path)


def seat(state: SeatState, *, detail: str = "", since: float | None = None, pid: int | None = None) -> SeatStatus:
    return SeatStatus("dev", "s-dev", "%1", state, detail, "prompting", None, None, pid=pid, state_since=since)


def status_of(team: Team, *seats: SeatStatus, screens: dict[str, str] | None = None) -> Status:
    return Status(team, tuple(seats), (), 2, True, None, screens)


def screen(name: str) -> str:
    return (SCREENS / f"{name}.txt").read_text(encoding="utf-8")


# -- conditions --------------------------------------------------------------------------


def test_a_permission_prompt_says_what_it_asks(tmp_path: Path) -> None:
    team = team_of(tmp_path)
    found = status_of(
        team,
        seat(SeatState.WAITING, detail="permission prompt", since=100.0),
        screens={"dev": screen("fullscreen-120x40-permission-prompt-bash")},
    )
    (c,) = conditions.conditions(found, team.watch, 110.0).values()
    assert (c.key, c.kind, c.since) == ("permission dev", "permission", 100.0)
    assert "Bash command" in c.detail and "Do you want to proceed?" in c.detail and "attach" in c.detail


def test_a_held_dialog_says_the_time_left_before_it_is_lost(tmp_path: Path) -> None:
    team = team_of(tmp_path)
    found = status_of(
        team,
        seat(SeatState.WAITING, detail="permission prompt", since=1000.0),
        screens={"dev": screen("fullscreen-120x40-held-dialog")},
    )
    (c,) = conditions.conditions(found, team.watch, 1000.0 + 90).values()
    assert c.kind == "held-dialog" and "dropped in about 3m30s" in c.detail, c.detail


def test_a_held_dialog_counts_down_from_the_seats_own_dialog_expiry(tmp_path: Path) -> None:
    config = tmp_path / "claude-config"
    config.mkdir()
    team = team_of(tmp_path, "")
    path = team.path
    path.write_text(path.read_text() + f'env = {{ CLAUDE_CONFIG_DIR = "{config}" }}\n', encoding="utf-8")
    team = teamfile.load(path)
    held = screen("fullscreen-120x40-held-dialog")
    found = status_of(team, seat(SeatState.WAITING, detail="permission prompt", since=1000.0), screens={"dev": held})
    for value, said in (("10m", "dropped in about 8m30s (dialogExpiry 10m00s)"), ("60s", "dropped in about 0s")):
        (config / "settings.json").write_text(json.dumps({"dialogExpiry": value}), encoding="utf-8")
        (c,) = conditions.conditions(found, team.watch, 1000.0 + 90).values()
        assert said in c.detail, c.detail
    (config / "settings.json").write_text(json.dumps({"dialogExpiry": "never"}), encoding="utf-8")
    (c,) = conditions.conditions(found, team.watch, 1000.0 + 90).values()
    assert "never expires" in c.detail and "dropped" not in c.detail, c.detail
    (config / "settings.json").write_text(json.dumps({"dialogExpiry": "7m"}), encoding="utf-8")  # not a value it takes
    (c,) = conditions.conditions(found, team.watch, 1000.0 + 90).values()
    assert "dropped in about 3m30s (dialogExpiry 5m00s)" in c.detail, c.detail


def test_an_api_error_is_open_only_while_it_is_the_last_reply() -> None:
    box = "─" * 40 + " dev ─\n❯ \n" + "─" * 46
    failed = "❯ make it\n\n● API Error: 400 bad request\n\n✻ Churned for 0s\n\n" + box
    assert conditions.api_error(failed) == "API Error: 400 bad request"
    assert conditions.api_error(failed.replace(box, "❯ again\n\n● ok\n\n" + box)) is None
    assert conditions.api_error("● Reading the API Error docs\n" + box) is None


def test_each_state_that_needs_the_owner_is_a_condition_and_idle_is_none(tmp_path: Path) -> None:
    team = team_of(tmp_path)
    kinds = {
        SeatState.DOWN: "gone",
        SeatState.EXITED: "exited",
        SeatState.NOT_AGENT: "not-agent",
        SeatState.UNREACHABLE: "unreachable",
        SeatState.BUSY: "busy-long",
        SeatState.BOX_TEXT: "box-text",
        SeatState.WAITING: "dialog",
    }
    for state, kind in kinds.items():
        (c,) = conditions.conditions(status_of(team, seat(state)), team.watch, 0.0).values()
        assert c.kind == kind
    assert conditions.conditions(status_of(team, seat(SeatState.IDLE)), team.watch, 0.0) == {}


# -- the tracker -------------------------------------------------------------------------


def cond(key: str = "permission dev", *, after: float = 0.0, since: float | None = None) -> Condition:
    return Condition(key, key.split(maxsplit=1)[0], "dev", "what to do", since=since, after=after)


def test_a_condition_is_told_once_and_a_flap_is_not_told_again() -> None:
    t = Tracker({}, settle=3.0)
    c = cond()
    assert [e.event for e in t.step({c.key: c}, 0.0)] == [OPENED]
    assert t.step({c.key: c}, 0.5) == []
    assert t.step({}, 1.0) == []  # gone for one round: a flap
    assert t.step({c.key: c}, 1.5) == []
    assert t.step({}, 2.0) == []
    resolved = t.step({}, 5.5)
    assert [(e.event, e.key) for e in resolved] == [(RESOLVED, c.key)]
    assert [e.event for e in t.step({c.key: c}, 6.0)] == [OPENED]  # a new one, after it had cleared


def test_a_condition_that_turns_into_another_kind_is_told_again_as_it_once() -> None:
    t = Tracker({}, settle=3.0)
    shell = Condition("exited dev", "not-agent", "dev", "a shell")
    ended = Condition("exited dev", "exited", "dev", "its agent exited")
    (first,) = t.step({shell.key: shell}, 0.0)
    assert (first.kind, first.event) == ("not-agent", OPENED)
    (again,) = t.step({ended.key: ended}, 1.0)
    assert (again.kind, again.event, again.detail, again.since) == ("exited", OPENED, "its agent exited", 0.0)
    assert t.step({ended.key: ended}, 1.5) == []
    assert events.open_items([first, again]) == {"exited dev": again}
    assert t.step({}, 5.0) == []
    (gone,) = t.step({}, 8.5)
    assert (gone.kind, gone.event, gone.detail) == ("exited", RESOLVED, "cleared: its agent exited")


def test_a_threshold_counts_from_when_the_state_began() -> None:
    t = Tracker({})
    box = cond("box-text dev", after=2.0)
    assert t.step({box.key: box}, 10.0) == []
    assert t.step({box.key: box}, 11.5) == []
    (event,) = t.step({box.key: box}, 12.0)
    assert event.since == 10.0
    busy = cond("busy-long dev", after=60.0, since=100.0)  # the registry says since when
    assert [e.key for e in t.step({box.key: box, busy.key: busy}, 160.0)] == [busy.key]


def test_a_restarted_tracker_tells_nothing_still_open_and_resolves_what_cleared() -> None:
    told = {
        "permission dev": Event(1.0, "dev", "permission", OPENED, "d", 1.0, "permission dev"),
        "exited ops": Event(1.0, "ops", "exited", OPENED, "d", 1.0, "exited ops"),
    }
    t = Tracker(told, settle=3.0)
    c, new = cond(), cond("box-text dev")
    assert [e.key for e in t.step({c.key: c, new.key: new}, 10.0)] == ["box-text dev"]
    assert [(e.key, e.event) for e in t.step({c.key: c, new.key: new}, 13.0)] == [("exited ops", RESOLVED)]


# -- the events file ---------------------------------------------------------------------


def test_events_are_appended_one_line_each_0600_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / events.NAME
    first = Event(time.time(), "dev", "permission", OPENED, "a «dialog»", time.time(), "permission dev")
    events.append(path, first)
    path.open("ab").write(b"not json\n")
    events.append(path, Event(first.at + 1, "dev", "permission", RESOLVED, "cleared", first.since, first.key))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    found = events.read(path)
    assert [e.event for e in found] == [OPENED, RESOLVED] and found[0].detail == "a «dialog»"
    assert events.open_items(found) == {}
    assert events.open_items(found[:1]) == {first.key: found[0]}
    assert json.loads(path.read_bytes().splitlines()[0])["time"] == events.local_time(first.at)


def test_the_events_file_rotates_and_the_new_file_starts_with_what_is_open(tmp_path: Path) -> None:
    """Past its size the file is events.jsonl.1, and the new one holds a carried copy of each open
    condition: a watcher started again reads what is open from the current file, the history counts each
    opened line once, a follower is not told it again."""
    path = tmp_path / events.NAME
    t = time.time()
    prompt = Event(t, "dev", "permission", OPENED, "asks", t, "permission dev")
    dialog = Event(t + 1, "qa", "dialog", OPENED, "held", t + 1, "dialog qa")
    for event in (prompt, dialog, Event(t + 2, "qa", "dialog", RESOLVED, "cleared", t + 1, "dialog qa")):
        events.append(path, event)
    assert not events.rotate_carrying(path, max_size=1 << 20, keep=2)  # not due
    start = events.size(path)
    assert events.rotate_carrying(path, max_size=10, keep=2)
    assert (tmp_path / f"{events.NAME}.1").exists()
    current = [events.parse(line) for line in path.read_bytes().splitlines()]
    assert [(e.key, e.carried) for e in current if e is not None] == [("permission dev", True)]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    history = events.read(path)
    assert [(e.key, e.event) for e in history] == [(prompt.key, OPENED), (dialog.key, OPENED), (dialog.key, RESOLVED)]
    assert set(events.open_items(events.read(path))) == {prompt.key}
    events.append(path, Event(t + 3, "dev", "permission", RESOLVED, "answered", t, prompt.key))
    followed = events.follow(path, start=start)  # the file shrank: read again from its top
    assert next(followed).event == RESOLVED  # the carried copy is not told again
    assert events.open_items(events.read(path)) == {}


def test_a_damaged_events_file_is_set_aside_with_a_line(tmp_path: Path) -> None:
    path = tmp_path / events.NAME
    path.write_bytes(b"\xff\xfe garbage\n")
    why = events.damaged(path)
    assert why == "it is not UTF-8 text"
    said = events.set_aside(path, why)
    assert "set aside as" in said and not path.exists()
    assert [p.name.startswith(events.NAME + ".damaged-") for p in tmp_path.iterdir()] == [True]
    target = tmp_path / "elsewhere"
    target.write_text("")
    os.symlink(target, path)
    assert events.damaged(path) is not None and "symlink" in str(events.damaged(path))
    with pytest.raises(Exception, match="symlink"):
        events.append(path, Event(0.0, "dev", "gone", OPENED, "", 0.0, "gone dev"))


# -- notify ------------------------------------------------------------------------------


def sample() -> Event:
    return Event(time.time(), "dev", "permission", OPENED, "a prompt", time.time(), "permission dev")


def test_notify_gets_the_event_on_stdin_and_in_its_environment(tmp_path: Path) -> None:
    out = tmp_path / "got"
    script = f"import os,sys; open({str(out)!r},'w').write(sys.stdin.read()+'|'+os.environ['FABRIKITO_KIND'])"
    team = team_of(tmp_path, f"notify = {json.dumps([sys.executable, '-c', script])}")
    done = notify.run_one(team, team.watch.notify or (), sample(), 10)
    assert done.ok, done.what
    payload, kind = out.read_text().split("|")
    assert kind == "permission" and json.loads(payload)["seat"] == "dev" and json.loads(payload)["team"] == "w"


def test_a_hanging_notify_is_killed_at_its_timeout_and_a_failing_one_is_reported(tmp_path: Path) -> None:
    hang = team_of(tmp_path, f'notify = ["{sys.executable}", "-c", "import time; time.sleep(60)"]')
    done = notify.run_one(hang, hang.watch.notify or (), sample(), 0.5)
    assert not done.ok and "killed" in done.what
    failing = team_of(tmp_path, f'notify = ["{sys.executable}", "-c", "import sys; sys.exit(\'no way\')"]')
    done = notify.run_one(failing, failing.watch.notify or (), sample(), 5)
    assert not done.ok and "exited with status 1" in done.what and "no way" in done.what
    missing = team_of(tmp_path, 'notify = ["/nonexistent/notifier"]')
    done = notify.run_one(missing, missing.watch.notify or (), sample(), 5)
    assert not done.ok and "could not be started" in done.what


def test_the_notifier_never_holds_up_the_caller_and_reports_failures(tmp_path: Path) -> None:
    team = team_of(tmp_path, f'notify = ["{sys.executable}", "-c", "import time; time.sleep(1); exit(3)"]')
    said: list[str] = []
    n = notify.Notifier(team, said.append)
    started = time.monotonic()
    for _ in range(3):
        n.submit(sample())
    assert time.monotonic() - started < 0.5  # queued, not run here
    deadline = time.monotonic() + 20
    while len(said) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    n.close()
    assert len(said) == 3 and all("exited with status 3" in line for line in said), said


def test_only_the_chosen_kinds_are_notified(tmp_path: Path) -> None:
    team = team_of(tmp_path, 'notify = ["true"]\n[watch]\nkinds = ["held-dialog"]\nresolved = true\n')
    held = Event(0.0, "dev", "held-dialog", OPENED, "", 0.0, "held-dialog dev")
    assert notify.wanted(team, held) and not notify.wanted(team, sample())
    assert notify.wanted(team, Event(0.0, "dev", "held-dialog", RESOLVED, "", 0.0, "held-dialog dev"))


# -- the team file and check -------------------------------------------------------------


def test_bad_notify_and_watch_keys_are_team_file_errors(tmp_path: Path) -> None:
    with pytest.raises(TeamFileError) as caught:
        team_of(tmp_path, 'notify = "notify-send"\n[watch]\nbox_after = -1\nkinds = ["nope"]\ncolour = 1\n')
    text = str(caught.value)
    assert "'notify' must be a list" in text and "'box_after' must be a number" in text
    assert "unknown event kind(s) nope" in text and "unknown key 'colour'" in text


def test_check_says_when_the_notify_program_is_missing(tmp_path: Path) -> None:
    team = team_of(tmp_path, 'notify = ["no-such-notifier-here", "x"]')
    report = check.run(team, env={"PATH": str(tmp_path)})
    assert [w.kind for w in report.warnings if w.error] == ["notify-missing"]
    assert report.exit_code == 2  # an error: the watcher could tell nobody
    assert "ERROR: notify program 'no-such-notifier-here' is not found" in check.render(report)
    assert check.to_json(report)["exit_code"] == 2
    ok = team_of(tmp_path, f'notify = ["{sys.executable}"]')
    assert not [w for w in check.run(ok, env={"PATH": ""}).warnings if w.kind == "notify-missing"]


# -- the view's layout ------------------------------------------------------------------


def watcher_state(now: float, seats: int = 12) -> dict[str, object]:
    return {
        "at": now,
        "open": [
            {"key": "queued-expired dev-1a", "seat": "s00", "kind": "queued-expired", "detail": "d " * 80, "at": now}
        ],
        "seats": [
            {"role": f"s{i:02d}", "state": "idle", "since": now - 65, "class": "prompting", "queued": i % 3}
            for i in range(seats)
        ],
        "queued": [{"id": "dev-1a", "role": "s00"}],
    }


def test_the_view_fits_80x24_and_a_narrow_pane_and_marks_what_can_be_chosen() -> None:
    from fabrikito.watch import layout

    now = time.time()
    for width, height in ((80, 23), (42, 30)):
        shown = layout.frame("t", watcher_state(now), ["12:00:00  a -> b  delivered"] * 50, width=width, height=height)
        assert len(shown.lines) <= height and all(len(r.text) < width for r in shown.lines)
        texts = [r.text for r in shown.lines]
        assert texts[1] == "NEEDS YOU (1)" and "s00 queued-expired" in texts[2]
        assert shown.lines[shown.choices[0]].message == "dev-1a"  # r and d act on it
        assert any("s11" in t and "idle 1m05s" in t for t in texts)
    assert len(layout.frame("t", watcher_state(now), [], width=80, height=23).choices) == 13


def test_the_view_says_when_the_terminal_is_too_small_or_the_watcher_is_stale() -> None:
    from fabrikito.watch import layout

    now = time.time()
    small = layout.frame("t", watcher_state(now), [], width=39, height=20)
    assert " ".join(r.text for r in small.lines) == "terminal too small (39x20): make it at least 40x12"
    assert small.choices == () and all(len(r.text) < 39 for r in small.lines)
    tiny = layout.frame("t", watcher_state(now), [], width=12, height=3)
    assert len(tiny.lines) <= 2 and all(len(r.text) < 12 for r in tiny.lines)
    stale = layout.frame("t", watcher_state(now - 30), [], width=80, height=23, now=now)
    assert "NO ROUND FOR 30s" in stale.lines[0].text
    assert "NOT RUNNING" in layout.frame("t", None, [], width=80, height=23).lines[0].text


def test_a_seat_row_shows_its_release_conversation_and_restarts_in_columns_or_on_its_detail_line() -> None:
    from fabrikito.watch import layout

    now = time.time()
    state = watcher_state(now, seats=2)
    seats = state["seats"]
    assert isinstance(seats, list)
    seats[0].update(release="2.1.316", conversation="1a2b3c4d-0000-4000-8000-000000000000", restarts=2)
    wide = layout.frame("t", state, [], width=100, height=23)
    row = next(r for r in wide.lines if r.text.startswith("  s00"))
    assert "RELEASE" in "".join(r.text for r in wide.lines) and "2.1.316" in row.text and "1a2b3c4d " in row.text
    assert row.text.rstrip().endswith(" 2")
    narrow = layout.frame("t", state, [], width=80, height=23)
    row = next(r for r in narrow.lines if r.text.startswith("  s00"))
    assert "2.1.316" not in row.text and len(row.text) < 80
    assert row.detail == "s00: release 2.1.316  conversation 1a2b3c4d-0000-4000-8000-000000000000  restarted 2 times"
    other = next(r for r in narrow.lines if r.text.startswith("  s01"))
    assert other.detail == "s01: release -  conversation -  restarted 0 times"
