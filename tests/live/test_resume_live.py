"""A team that comes back: real Claude Code seats killed, resumed each with its own conversation, offline.

* a seat with two turns of history is SIGKILLed; ``up --resume`` brings it back (both renderers), the
  stand-in's next request for it carries the earlier turns, the other seat is not touched;
* a simulated reboot (the tmux server and every helper killed by pid): ``up --resume`` brings every seat
  back, three messages queued before the crash arrive once each, in order; an uncertain one stays so;
* ``restart = "on-exit"``: a SIGKILLed seat comes back by itself, resumed; a seat that exits at once on
  every start is restarted with a doubling back-off up to the cap, then left with an event;
* a seat whose program is a wrapper that stays in a shell when Claude Code ends (decision 0039): killed, it
  is left alone while the owner runs a command in that shell (``up --resume`` and ``restart`` refuse), then
  ``up --resume`` replaces the idle shell and brings it back on its own conversation.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabrikito.base.tmux import Server
from fabrikito.cli import serverctl
from fabrikito.delivery import queue, worker, workerstate
from fabrikito.launch import autorestart, resume, seatevents, watcherproc
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile

from .teamkit import fabrikito, log_lines, wait_for
from .test_up_live import KICKOFF, status_json, write_up_team

pytestmark = pytest.mark.live

SECOND = "second turn: remember the word pelican"


@pytest.fixture(autouse=True)
def helpers_stopped(tmp_path: Path) -> Iterator[None]:
    """Whatever a test leaves running for its team (auto-restart, worker, command server) is stopped."""
    yield
    team_path = tmp_path / "team" / "team.toml"
    if team_path.exists():
        team = teamfile.load(team_path)
        watcherproc.stop(team)
        worker.stop(team, timeout=10)
        serverctl.stop(team)


def seat_json(team: Path, role: str) -> dict[str, Any]:
    return next(s for s in status_json(team)["seats"] if s["role"] == role)


def texts_of(body: Any) -> str:
    """Everything the request's messages say, as one string (the earlier turns ride in them)."""
    return json.dumps(body.get("messages") if isinstance(body, dict) else None)


def two_turns(team: Path, standin: StandIn, role: str, home: Path) -> None:
    """The kickoff (turn one), then a second turn from the owner, each answered, and the answer to the second
    in the seat's transcript (Claude Code writes it after its registry says idle: killed before, the turn is
    not in the conversation it resumes, and that is Claude Code's, not what these tests show)."""
    standin.wait_for_request(role, f"[from launcher] {KICKOFF}", 60)
    done = fabrikito("say", role, SECOND, team=team, role=None, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    standin.wait_for_request(role, SECOND, 60)
    wait_for(lambda: seat_json(team, role)["state"] == "idle", 60, f"{role} idle after its second turn")
    conversation = seat_json(team, role)["conversation"]

    def answered() -> bool:
        for path in (home / ".claude" / "projects").glob(f"*/{conversation}.jsonl"):
            after = path.read_text(encoding="utf-8", errors="replace").partition(SECOND)[2]
            if '"type":"assistant"' in after.replace('": "', '":"'):
                return True
        return False

    wait_for(answered, 30, f"the answer to {role}'s second turn in its transcript")


def kill_agent(team: Path, role: str) -> int:
    pid = seat_json(team, role)["pid"]
    assert isinstance(pid, int) and pid > 0
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: seat_json(team, role)["state"] in ("exited", "down"), 30, f"{role} seen exited")
    return pid


def assert_resumed(standin: StandIn, role: str, since: int) -> Any:
    """The seat's first request after ``since``: the restart notice, with both earlier turns in it."""
    request = standin.wait_for_request(role, "[from launcher] You were restarted at", 90, since=since)
    said = texts_of(request.body)
    assert KICKOFF in said and SECOND in said, said[:2000]  # the conversation was resumed, not begun again
    return request


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_a_killed_seat_comes_back_with_its_conversation_and_the_other_is_untouched(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path, renderer: str
) -> None:
    team_path = tmp_path / "team" / "team.toml"
    extra = {"CLAUDE_CODE_NO_FLICKER": "1"} if renderer == "fullscreen" else {}
    write_up_team(
        team_path,
        tmux_server,
        claude_binary,
        standin,
        [(r, "acceptEdits", extra) for r in ("api", "web")],
        home=claude_home,
    )
    done = fabrikito("up", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    two_turns(team_path, standin, "api", claude_home)
    before = {r: seat_json(team_path, r) for r in ("api", "web")}
    conversation = before["api"]["conversation"]
    assert resume.UUID_RE.match(conversation) and before["api"]["restarts"] == 0
    # fixed in advance, and the one Claude Code runs (its registry, its transcript)
    assert conversation in (claude_home / ".claude" / "sessions" / f"{before['api']['pid']}.json").read_text()
    assert list((claude_home / ".claude" / "projects").glob(f"*/{conversation}.jsonl"))

    kill_agent(team_path, "api")
    mark = standin.mark()
    done = fabrikito("up", "--resume", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"api: resuming its conversation {conversation} (restart 1)" in done.stdout, done.stdout
    assert "web: already up" in done.stdout
    assert "restart notice delivered" in done.stdout
    request = assert_resumed(standin, "api", mark)
    assert f"[from launcher] {KICKOFF}" not in request.last_user_text  # no kickoff again

    after = {r: seat_json(team_path, r) for r in ("api", "web")}
    assert (after["api"]["conversation"], after["api"]["restarts"]) == (conversation, 1)
    assert after["api"]["pid"] != before["api"]["pid"]
    assert (after["web"]["pane"], after["web"]["pid"]) == (before["web"]["pane"], before["web"]["pid"])
    assert not [r for r in standin.requests("web") if r.index >= mark and r.is_main]  # web was not touched
    assert any(line[2] == "api" and line[1] == "launcher" and "restarted" in line[-1] for line in log_lines(team_path))
    table = fabrikito("status", team=team_path, role=None).stdout
    assert f"{conversation[:8]} (1 restart)" in table, table
    events = [e for e in seatevents.read(teamfile.load(team_path)) if e["seat"] == "api"]
    assert [e["kind"] for e in events] == ["resumed"]

    # An up --resume with the seat alive leaves it alone; down then up --resume resumes it again.
    again = fabrikito("up", "--resume", team=team_path, role=None, timeout=120)
    assert "api: already up" in again.stdout and again.returncode == 0
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0
    plain_mark = standin.mark()
    done = fabrikito("up", "--resume", "api", team=team_path, role=None, timeout=240)
    assert f"api: resuming its conversation {conversation} (restart 2)" in done.stdout, done.stdout
    assert_resumed(standin, "api", plain_mark)
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0


def test_a_reboot_brings_every_seat_back_and_three_queued_messages_arrive_once_each_in_order(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    team_path = tmp_path / "team" / "team.toml"
    write_up_team(
        team_path,
        tmux_server,
        claude_binary,
        standin,
        [(r, "acceptEdits", {}) for r in ("api", "web")],
        home=claude_home,
    )
    done = fabrikito("up", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    two_turns(team_path, standin, "api", claude_home)
    standin.wait_for_request("web", f"[from launcher] {KICKOFF}", 60)
    ids = {r: seat_json(team_path, r)["conversation"] for r in ("api", "web")}
    assert ids["api"] != ids["web"]

    # A draft of the owner's in api's box: three messages queue behind it; one more is marked uncertain by hand.
    pane = seat_json(team_path, "api")["pane"]
    tmux_server.send_keys(pane, "the owner's half-written draft", literal=True)
    wait_for(lambda: "half-written draft" in tmux_server.capture(pane), 10, "the draft to show")
    for i in range(3):
        queued = fabrikito("say", "--queue", "api", f"queued message {i}", team=team_path, timeout=60)
        assert queued.returncode == 0 and queued.stdout.startswith("queued"), queued.stdout + queued.stderr
    team = teamfile.load(team_path)
    unsure = queue.enqueue(team, "api", "live-test", "the unsure one", expire=3600, reason="queued by the test")
    queue.write(unsure.moved(queue.State.UNCERTAIN, "typed, not submitted (set by the test)"))
    time.sleep(1.0)
    assert not any("queued message" in t for t in standin.last_user_texts("api"))

    # The reboot: the tmux server, every seat's agent and every helper of the team killed outright.
    watcher = watcherproc.info(team).pid
    assert watcher, "the watcher up started"
    helpers = [workerstate.read_info(team).pid, serverctl.running_pid(team_path), watcher]
    agents = [seat_json(team_path, r)["pid"] for r in ("api", "web")]
    tmux_pid = int(tmux_server.run("display-message", "-p", "#{pid}").strip())
    for pid in [tmux_pid, *agents, *helpers]:
        if pid:
            os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not workerstate.read_info(team).running, 10, "the worker gone")
    wait_for(lambda: not watcherproc.info(team).running, 10, "the watcher gone")
    wait_for(lambda: not tmux_server.alive(), 10, "the tmux server gone")

    mark = standin.mark()
    done = fabrikito("up", "--resume", team=team_path, role=None, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for role in ("api", "web"):
        assert f"{role}: resuming its conversation {ids[role]} (restart 1)" in done.stdout, done.stdout
    assert_resumed(standin, "api", mark)
    web_back = standin.wait_for_request("web", "[from launcher] You were restarted at", 90, since=mark)
    assert KICKOFF in texts_of(web_back.body)

    wait_for(
        lambda: all(any(f"queued message {i}" in t for t in standin.last_user_texts("api")) for i in range(3)),
        120,
        "the three queued messages",
        describe=lambda: "\n".join(standin.last_user_texts("api")[-6:]),
    )
    texts = standin.last_user_texts("api")
    turns = [[j for j, t in enumerate(texts) if f"queued message {i}" in t] for i in range(3)]
    assert all(len(t) == 1 for t in turns), turns  # once each
    assert turns[0][0] < turns[1][0] < turns[2][0]  # in order
    notice = max(j for j, t in enumerate(texts[: turns[0][0]]) if "You were restarted at" in t)
    assert not any("queued message" in t for t in texts[:notice])  # nothing typed before the seat was back and told
    assert not any("the unsure one" in t for t in texts)
    assert "watcher: started" in done.stdout, done.stdout  # the watcher killed with the rest runs again
    back = watcherproc.info(team)
    assert back.running and back.pid not in (None, watcher), back
    shown = fabrikito("status", team=team_path, role=None).stdout
    assert f"NOTICE api: queued message {unsure.id} from live-test was pasted but its fate is unknown" in shown, shown
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0


def test_two_ups_at_once_one_starts_the_other_says_the_team_is_starting(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    from .teamkit import start_fabrikito

    team_path = tmp_path / "team" / "team.toml"
    write_up_team(team_path, tmux_server, claude_binary, standin, [("api", "acceptEdits", {})], home=claude_home)
    first = start_fabrikito("up", "--resume", team=team_path)
    wait_for(lambda: tmux_server.has_session("live-api"), 60, "the first up to start its seat")
    second = fabrikito("up", "--resume", team=team_path, role=None, timeout=120)
    out, err = first.communicate(timeout=240)
    assert first.returncode == 0, out + err
    assert second.returncode == 1 and "team live is starting" in second.stderr, second.stdout + second.stderr
    assert out.count("api: started") == 1 and "api: started" not in second.stdout
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0


def test_on_exit_a_killed_seat_comes_back_by_itself_resumed(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    team_path = tmp_path / "team" / "team.toml"
    write_up_team(
        team_path,
        tmux_server,
        claude_binary,
        standin,
        [(r, "acceptEdits", {}) for r in ("api", "web")],
        home=claude_home,
    )
    team_path.write_text('restart = "on-exit"\n' + team_path.read_text(encoding="utf-8"), encoding="utf-8")
    done = fabrikito("up", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "watcher: running" in done.stdout  # the watcher runs the auto-restart policy
    two_turns(team_path, standin, "api", claude_home)
    conversation = seat_json(team_path, "api")["conversation"]
    web = seat_json(team_path, "web")
    mark = standin.mark()
    kill_agent(team_path, "api")
    assert_resumed(standin, "api", mark)
    wait_for(lambda: seat_json(team_path, "api")["restarts"] == 1, 60, "the restart counted")
    assert seat_json(team_path, "api")["conversation"] == conversation
    assert (seat_json(team_path, "web")["pane"], seat_json(team_path, "web")["pid"]) == (web["pane"], web["pid"])

    def kinds() -> list[str]:
        return [str(e["kind"]) for e in seatevents.read(teamfile.load(team_path)) if e["seat"] == "api"]

    # The record counts the restart while it is made; its "restarted" event is written once it is done.
    wait_for(lambda: "restarted" in kinds(), 30, "api's restarted event")
    assert kinds()[:4] == ["exited", "restarting", "resumed", "restarted"], kinds()

    # down stops the watcher (which restarts) first; a seat stopped on purpose is never started again.
    down = fabrikito("down", team=team_path, role=None, timeout=120)
    assert "stopped the watcher" in down.stdout, down.stdout
    time.sleep(3)
    assert not tmux_server.alive() or not tmux_server.has_session("live-api")


def test_a_seat_that_exits_at_once_is_restarted_with_back_off_up_to_the_cap(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    team_path = tmp_path / "team" / "team.toml"
    write_up_team(
        team_path,
        tmux_server,
        claude_binary,
        standin,
        [(r, "acceptEdits", {}) for r in ("api", "web")],
        home=claude_home,
    )
    text = team_path.read_text(encoding="utf-8")
    crashing = '[[seat]]\nrole = "api"\n'
    text = text.replace(
        crashing, crashing + 'command = ["/bin/sh", "-c", "echo crashing; exit 3"]\nrestart = "on-exit"\n'
    )
    team_path.write_text(text, encoding="utf-8")
    done = fabrikito("up", team=team_path, role=None, timeout=240)
    assert done.returncode == 1 and "api did not come up" in done.stdout, done.stdout
    assert "watcher: running" in done.stdout  # the watcher runs the auto-restart policy
    team = teamfile.load(team_path)
    web = seat_json(team_path, "web")

    def capped() -> bool:
        return any(e["kind"] == "restart-capped" for e in seatevents.read(team))

    wait_for(capped, 180, "the cap", describe=lambda: "\n".join(map(str, seatevents.read(team))))
    events = [e for e in seatevents.read(team) if e["seat"] == "api"]
    restarts = [float(e["at"]) for e in events if e["kind"] == "restarting"]  # type: ignore[arg-type]
    assert len(restarts) == autorestart.CAP, events
    first_exit = next(float(e["at"]) for e in events if e["kind"] == "exited")  # type: ignore[arg-type]
    gaps = [b - a for a, b in zip([first_exit, *restarts], restarts, strict=False)]
    for k, gap in enumerate(gaps):  # each back-off at least the policy's, and each longer than the one before
        assert gap >= autorestart.BACKOFF_FIRST * 2**k - 0.05, gaps
    assert all(later > earlier for earlier, later in itertools.pairwise(gaps)), gaps
    time.sleep(3)
    assert len([e for e in seatevents.read(team) if e["seat"] == "api" and e["kind"] == "restarted"]) == autorestart.CAP
    assert "left down" in events[-1]["detail"]  # type: ignore[operator]
    assert seat_json(team_path, "web")["pid"] == web["pid"]  # the healthy seat was never touched
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0


def test_restart_brings_a_running_seat_back_resumed_and_an_unknown_role_is_refused(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    team_path = tmp_path / "team" / "team.toml"
    write_up_team(
        team_path,
        tmux_server,
        claude_binary,
        standin,
        [(r, "acceptEdits", {}) for r in ("api", "web")],
        home=claude_home,
    )
    assert fabrikito("up", team=team_path, role=None, timeout=240).returncode == 0
    two_turns(team_path, standin, "api", claude_home)
    before = {r: seat_json(team_path, r) for r in ("api", "web")}
    wrong = fabrikito("restart", "nope", team=team_path, role=None)
    assert wrong.returncode == 2 and "no seat nope in team live" in wrong.stderr, wrong.stderr
    assert seat_json(team_path, "api")["pid"] == before["api"]["pid"]  # nothing stopped
    mark = standin.mark()
    done = fabrikito("restart", "api", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "api: stopped" in done.stdout and f"resuming its conversation {before['api']['conversation']}" in done.stdout
    assert_resumed(standin, "api", mark)
    after = {r: seat_json(team_path, r) for r in ("api", "web")}
    assert after["api"]["pid"] != before["api"]["pid"] and after["api"]["restarts"] == 1
    assert (after["web"]["pane"], after["web"]["pid"]) == (before["web"]["pane"], before["web"]["pid"])
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0


#: What a wrapper does once Claude Code ends.  Claude Code killed leaves its terminal raw: the wrapper puts it
#: back before its shell, as one would.
SHELL_AFTER = "stty sane\nexec /bin/sh"


def wrapper_of(folder: Path, binary: Path, after: str) -> Path:
    """A seat program that runs Claude Code, then ``after`` (decision 0039's wrapper that outlives its agent)."""
    path = folder / f"claude-then-{len(list(folder.glob('claude-then-*')))}"
    path.write_text(f'#!/bin/sh\n"{binary}" "$@"\n{after}\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def test_a_wrapper_left_in_a_shell_comes_back_resumed_but_not_while_a_command_runs_there(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    from fabrikito.base import procs

    wrapper = wrapper_of(tmp_path, claude_binary, SHELL_AFTER)
    team_path = tmp_path / "team" / "team.toml"
    write_up_team(
        team_path,
        tmux_server,
        claude_binary,
        standin,
        [("api", "acceptEdits", {})],
        home=claude_home,
        agent=[str(wrapper)],
    )
    done = fabrikito("up", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    two_turns(team_path, standin, "api", claude_home)
    before = seat_json(team_path, "api")
    conversation, pane = before["conversation"], before["pane"]
    shell = int(tmux_server.run("display-message", "-p", "-t", pane, "#{pane_pid}").strip())
    os.kill(before["pid"], signal.SIGKILL)
    wait_for(lambda: seat_json(team_path, "api")["state"] == "not running claude", 30, "api's agent gone, its pane not")

    # The owner runs a command in the shell left there (once it is the wrapper's shell, the terminal sane again).
    wait_for(lambda: procs.cmdline(shell) == ["/bin/sh"], 10, "the wrapper's shell", lambda: tmux_server.capture(pane))
    tmux_server.send_keys(pane, "sleep 1000", literal=True)
    tmux_server.send_keys(pane, "Enter")

    def sleeping() -> list[int]:
        return [k for k in procs.children_of(shell) if procs.cmdline(k) == ["sleep", "1000"]]

    wait_for(lambda: bool(sleeping()), 10, "the owner's command to run", describe=lambda: tmux_server.capture(pane))
    sleeper = sleeping()[0]
    refused = fabrikito("up", "--resume", team=team_path, role=None, timeout=120)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"`sleep 1000` (pid {sleeper}) runs in its pane: left alone" in refused.stdout, refused.stdout
    again = fabrikito("restart", "api", team=team_path, role=None, timeout=120)
    assert again.returncode == 1 and "`sleep 1000`" in again.stdout and "stopped" not in again.stdout, again.stdout
    assert procs.alive(sleeper) and seat_json(team_path, "api")["pane"] == pane  # left alone, twice

    # The command ends: the shell at its prompt is replaced, and the seat resumes its own conversation.
    os.kill(sleeper, signal.SIGTERM)
    wait_for(lambda: not procs.children_of(shell), 10, "the shell back at its prompt")
    mark = standin.mark()
    done = fabrikito("up", "--resume", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"a shell is left in its pane (/bin/sh, pid {shell}): starting it again" in done.stdout, done.stdout
    assert f"api: resuming its conversation {conversation} (restart 1)" in done.stdout, done.stdout
    assert "restart notice delivered" in done.stdout
    assert_resumed(standin, "api", mark)
    after = seat_json(team_path, "api")
    assert (after["conversation"], after["restarts"]) == (conversation, 1)
    assert after["pid"] != before["pid"] and not procs.alive(shell)
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0


def test_on_exit_a_wrapper_left_in_a_shell_comes_back_by_itself_and_one_left_running_a_program_does_not(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    team_path = tmp_path / "team" / "team.toml"
    shell_after = wrapper_of(tmp_path, claude_binary, SHELL_AFTER)
    sleep_after = wrapper_of(tmp_path, claude_binary, "exec sleep 1000")  # a program of the owner's, in effect
    seats: list[tuple[str, str, dict[str, str]]] = [(r, "acceptEdits", {}) for r in ("api", "web")]
    write_up_team(team_path, tmux_server, claude_binary, standin, seats, home=claude_home, agent=[str(shell_after)])
    web_seat = '[[seat]]\nrole = "web"\n'
    text = team_path.read_text(encoding="utf-8").replace(
        web_seat, web_seat + f"command = {json.dumps([str(sleep_after)])}\n"
    )
    team_path.write_text('restart = "on-exit"\n' + text, encoding="utf-8")
    done = fabrikito("up", team=team_path, role=None, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "watcher: running" in done.stdout
    two_turns(team_path, standin, "api", claude_home)
    standin.wait_for_request("web", f"[from launcher] {KICKOFF}", 60)
    before = {r: seat_json(team_path, r) for r in ("api", "web")}
    mark = standin.mark()
    for role in ("api", "web"):
        os.kill(before[role]["pid"], signal.SIGKILL)

    assert_resumed(standin, "api", mark)  # its idle shell replaced after the grace rounds, resumed
    wait_for(lambda: seat_json(team_path, "api")["restarts"] == 1, 60, "api's restart counted")
    assert seat_json(team_path, "api")["conversation"] == before["api"]["conversation"]
    team = teamfile.load(team_path)

    def of(role: str) -> list[dict[str, Any]]:
        return [e for e in seatevents.read(team) if e["seat"] == role]

    # The record counts the restart while it is made; its "restarted" event is written once it is done.
    wait_for(lambda: any(e["kind"] == "restarted" for e in of("api")), 30, "api's restarted event")
    assert [e["kind"] for e in of("api")][:4] == ["exited", "restarting", "resumed", "restarted"], of("api")
    assert "its agent left a shell" in str(of("api")[0]["detail"])
    wait_for(lambda: any(e["kind"] == "not-restarted" for e in of("web")), 30, "web told not restarted")
    time.sleep(2 * autorestart.BACKOFF_FIRST)
    web = seat_json(team_path, "web")
    assert (web["state"], web["pane"], web["restarts"]) == ("not running claude", before["web"]["pane"], 0), web
    assert [e["kind"] for e in of("web")] == ["not-restarted"]  # told once, never restarted
    assert not [r for r in standin.requests("web") if r.index >= mark and r.is_main]
    assert fabrikito("down", team=team_path, role=None, timeout=120).returncode == 0
