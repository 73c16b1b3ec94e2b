"""The watcher against real Claude Code seats: each state that needs the owner gives its event line,
one ``notify`` call, and its resolved line when it clears; killed and started again, it tells nothing
twice.  (How soon each event comes is a bench: bench/bench_watch.py.)"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.base.tmux import Server
from fabrikito.delivery import worker
from fabrikito.launch import watcherproc
from fabrikito.log import events
from fabrikito.offline import claude_setup
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import LiveSeat, SeatFactory
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile
from fabrikito.watch import notify

from .teamkit import clean_env, fabrikito, open_permission_prompt, wait_for

pytestmark = pytest.mark.live

HELD_TITLE = "Held message from another session"


def write_watched_team(path: Path, server: Server, seats: list[LiveSeat], notified: Path, **watch: float) -> Path:
    """A team file for the bench seats with a ``notify`` that appends each event it gets to ``notified``."""
    script = path.parent / "notify.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\n{{ cat; echo; }} >> "{notified}"\n', encoding="utf-8")
    script.chmod(0o755)
    lines = [
        'name = "live"',
        f'tmux_socket = "{server.socket_name}"',
        f'notify = ["{script}"]',
        "",
        "[watch]",
        *(f"{key} = {value}" for key, value in watch.items()),
        "",
    ]
    for s in seats:
        lines += [
            "[[seat]]",
            f'role = "{s.role}"',
            f'session = "{s.session}"',
            f'permission_mode = "{s.permission_mode}"',
        ]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def watched() -> Iterator[list[Path]]:
    """Team files whose watcher (and delivery worker) a test started: stopped at the end."""
    teams: list[Path] = []
    yield teams
    for path in teams:
        team = teamfile.load(path)
        watcherproc.stop(team)
        worker.stop(team, timeout=10)


def start_watcher(team_path: Path) -> int:
    team = teamfile.load(team_path)
    assert watcherproc.ensure_running(team, env=clean_env())
    pid = watcherproc.info(team).pid
    assert pid is not None
    return pid


def read_events(team_path: Path) -> list[events.Event]:
    return events.read(team_path.parent / ".state" / "live" / events.NAME)


def notified(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def wait_event(
    team_path: Path, kind: str, seat: str, what: str = events.OPENED, timeout: float = 20, server: Server | None = None
) -> events.Event:
    found: list[events.Event] = []

    def seen() -> bool:
        found[:] = [e for e in read_events(team_path) if (e.kind, e.seat, e.event) == (kind, seat, what)]
        return bool(found)

    wait_for(seen, timeout, f"a {what} {kind} event for {seat}", lambda: _describe(team_path, server))
    return found[0]


def _describe(team_path: Path, server: Server | None = None) -> str:
    state = team_path.parent / ".state" / "live"
    screens = ""
    if server is not None:
        for pane in server.run("list-panes", "-a", "-F", "#{pane_id}").splitlines():
            screens += f"\n--- {pane}:\n{server.capture(pane)}"
    lines = [e.line().decode() for e in read_events(team_path)]
    err = state / watcherproc.ERR_NAME
    return "events:\n" + "".join(lines) + ("\nwatcher.err:\n" + err.read_text() if err.exists() else "") + screens


def answer(server: Server, pane: str, key: str, dialog: str) -> None:
    """Press ``key`` as the owner would, once a second until the dialog is gone (a release can ignore
    a key pressed the moment its dialog is drawn)."""
    deadline = time.monotonic() + 20
    while dialog in server.capture(pane):
        assert time.monotonic() < deadline, server.capture(pane)
        server.send_keys(pane, key)
        time.sleep(1)


def told_once(team_path: Path, notify_file: Path, key: str) -> None:
    opened = [e for e in read_events(team_path) if e.key == key and e.event == events.OPENED]
    assert len(opened) == 1, _describe(team_path)
    wait_for(lambda: any(n.get("key") == key for n in notified(notify_file)), 10, f"the notify call for {key}")
    calls = [n for n in notified(notify_file) if n.get("key") == key]
    assert len(calls) == 1, calls
    assert calls[0]["event"] == events.OPENED and calls[0]["team"] == "live"


def test_permission_prompt_held_dialog_and_api_error_are_told_once_and_resolved(
    seat_factory: SeatFactory, standin: StandIn, tmux_server: Server, tmp_path: Path, watched: list[Path]
) -> None:
    for role in ("ask", "byp", "edit"):  # trusted before any starts: a running seat rewrites .claude.json
        (seat_factory.root / "work" / role).mkdir(parents=True, exist_ok=True)
        claude_setup.trust_dir(seat_factory.home, seat_factory.root / "work" / role)
    ask = seat_factory.start("ask", permission_mode="default")
    byp = seat_factory.start("byp", permission_mode="bypassPermissions")
    edit = seat_factory.start("edit", permission_mode="acceptEdits")
    notify_file = tmp_path / "notified.jsonl"
    team = write_watched_team(tmp_path / "team" / "team.toml", tmux_server, [ask, byp, edit], notify_file)
    watched.append(team)
    first = start_watcher(team)
    time.sleep(2)  # some rounds of a quiet team
    assert read_events(team) == [], _describe(team)

    # -- a permission prompt: told; the watcher killed and started again tells it no second time ---
    open_permission_prompt(tmux_server, ask.pane, standin)
    event = wait_event(team, "permission", "ask")
    assert "Do you want to proceed?" in event.detail and "attach" in event.detail, event.detail
    told_once(team, notify_file, "permission ask")
    # Killed once its notify has finished and been recorded (killed between the two, the next watcher tells
    # it again: docs/watch.md)
    loaded = teamfile.load(team)
    wait_for(lambda: (notify.read_cursor(loaded) or (0, ""))[1] == "permission ask", 10, "the told cursor")
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not watcherproc.info(teamfile.load(team)).running, 10, "the killed watcher's lock to go")
    start_watcher(team)
    time.sleep(2)
    told_once(team, notify_file, "permission ask")  # still one line, one call
    answer(tmux_server, ask.pane, "Escape", "Do you want to proceed?")  # the owner declines it
    wait_event(team, "permission", "ask", events.RESOLVED)

    # -- a held-message dialog: bypass byp's SendMessage to prompting edit is held at edit ----------
    standin.on("send it", Reply(tool="SendMessage", input={"to": edit.session, "message": "a held hello"}), seat="byp")
    tmux_server.paste(byp.pane, "send it")
    tmux_server.send_keys(byp.pane, "Enter")
    wait_for(lambda: HELD_TITLE in tmux_server.capture(edit.pane), 30, "the held-message dialog")
    event = wait_event(team, "held-dialog", "edit")
    assert "dropped in about 4m" in event.detail and "from byp" in event.detail, event.detail
    told_once(team, notify_file, "held-dialog edit")
    answer(tmux_server, edit.pane, "Enter", HELD_TITLE)  # Deny, the default row
    wait_event(team, "held-dialog", "edit", events.RESOLVED, server=tmux_server)

    # -- an API error served by the stand-in: told while it is the seat's last word, resolved after --
    failing = standin.on("break now", Reply(text="the stand-in refuses this request", error=400), once=False)
    tmux_server.paste(byp.pane, "break now")
    tmux_server.send_keys(byp.pane, "Enter")
    event = wait_event(team, "api-error", "byp", server=tmux_server)
    assert "API Error: 400" in event.detail, event.detail
    told_once(team, notify_file, "api-error byp")
    standin.remove_rule(failing)
    tmux_server.paste(byp.pane, "and now a good turn")
    tmux_server.send_keys(byp.pane, "Enter")
    wait_event(team, "api-error", "byp", events.RESOLVED)

    # nothing was told twice, and the resolved lines were not notified (resolved = false)
    keys = [str(n["key"]) for n in notified(notify_file)]
    assert sorted(keys) == sorted(set(keys)) and all(n["event"] == events.OPENED for n in notified(notify_file))
    assert not (team.parent / ".state" / "live" / watcherproc.ERR_NAME).read_text().strip(), _describe(team)


def test_box_fragment_expired_queued_message_and_killed_agent_are_told_once_and_resolved(
    seat_factory: SeatFactory, tmux_server: Server, tmp_path: Path, watched: list[Path]
) -> None:
    dev, ops = seat_factory.start_many(["dev", "ops"])
    notify_file = tmp_path / "notified.jsonl"
    team = write_watched_team(tmp_path / "team" / "team.toml", tmux_server, [dev, ops], notify_file, box_after=2)
    watched.append(team)
    start_watcher(team)

    # -- a fragment left in dev's box: told once it has stayed box_after seconds -------------------
    tmux_server.send_keys(dev.pane, "half a fragment", literal=True)
    wait_for(lambda: "half a fragment" in tmux_server.capture(dev.pane), 10, "the fragment to show")
    shown = time.monotonic()
    event = wait_event(team, "box-text", "dev")
    assert time.monotonic() - shown >= 2 - 0.5, "told before box_after"
    assert "flush dev" in event.detail, event.detail
    told_once(team, notify_file, "box-text dev")

    # -- a queued message that expires behind the fragment: told; dropped, resolved -----------------
    done = fabrikito("say", "--queue", "--expire", "1s", "dev", "too late", team=team)
    assert done.returncode == 0 and done.stdout.startswith("queued "), done.stdout + done.stderr
    msg_id = done.stdout.split()[1]
    event = wait_event(team, "queued-expired", "dev")
    assert msg_id in event.detail and f"queue drop {msg_id}" in event.detail, event.detail
    told_once(team, notify_file, f"queued-expired {msg_id}")
    assert fabrikito("queue", "drop", msg_id, team=team).returncode == 0
    wait_event(team, "queued-expired", "dev", events.RESOLVED)
    tmux_server.send_keys(dev.pane, "C-u")
    wait_event(team, "box-text", "dev", events.RESOLVED)

    # -- ops's agent killed (its pane kept, as up keeps it): told; the session closed, resolved, gone told --
    tmux_server.run("set-option", "-t", ops.pane, "remain-on-exit", "on")
    os.kill(ops.pid, signal.SIGKILL)
    event = wait_event(team, "exited", "ops")
    assert "attach" in event.detail, event.detail
    told_once(team, notify_file, "exited ops")
    tmux_server.kill_session(ops.session)
    wait_event(team, "exited", "ops", events.RESOLVED)
    wait_event(team, "gone", "ops")
    assert not (team.parent / ".state" / "live" / watcherproc.ERR_NAME).read_text().strip(), _describe(team)
