"""The delivery engine's rules for agents that are not Claude Code, on a replayed pane (tests/unit/replay.py)
whose process is a Codex or Gemini CLI by its npm package, read by a recogniser stand-in: never an Enter
while the agent is busy, and the agent's pause between the paste and the Enter."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.unit.replay import Pane, Screen, replay_server, sent

from fabrikito.delivery import engine, seatlock, seatpane
from fabrikito.screen import BoxReading, PaneSnapshot, ScreenState, StandardChecks
from fabrikito.team import agents, teamfile

LABEL = "[from em] "
MESSAGE = "please review the patch"
META = {"pane_width": "120", "pane_height": "40"}


class Reader(StandardChecks):
    """Reads the replayed screens below: ``<box text>|busy`` or ``<box text>|idle``."""

    def __init__(self, agent: str) -> None:
        super().__init__(agent, "test")

    def recognise(self, snapshot: PaneSnapshot) -> BoxReading:
        """As the Codex and Gemini recognisers do: a busy screen is never typable (not recognised, busy)."""
        text, _, state = snapshot.ansi.rstrip("\n").rpartition("|")
        if state == "busy":
            return BoxReading(ScreenState.NOT_RECOGNISED, "inline", reason="busy", busy=True, box_text=text)
        return BoxReading(
            state=ScreenState.READY if not text else ScreenState.BOX_TEXT,
            renderer="inline",
            reason="" if not text else "holds text",
            busy=state == "busy",
            box_text=text,
            box_rows=1,
            top_visible=True,
            max_rows=8,
            ends_screen=True,
        )


def shown(text: str, busy: bool = False) -> Screen:
    return Screen(f"{text}|{busy}", f"{text}|{'busy' if busy else 'idle'}\n", META)


@pytest.fixture(params=["codex", "gemini"])
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A process that is Codex or Gemini CLI by the npm package its program lies in."""
    kind = str(request.param)
    package = agents.kind(kind).package
    root = tmp_path / "node_modules" / package
    (root / "bin").mkdir(parents=True)
    (root / "package.json").write_text(json.dumps({"name": package, "version": "9.9.9"}), encoding="utf-8")
    program = root / "bin" / kind
    shutil.copy(shutil.which("sleep") or "/bin/sleep", program)
    proc = subprocess.Popen([str(program), "600"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while seatpane.agent_at(proc.pid) is None:
            assert time.monotonic() < deadline, "the stand-in agent process did not start"
            time.sleep(0.01)
        yield kind, proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RENDER_TIMEOUT", 0.2)
    monkeypatch.setattr(engine, "ENTER_TIMEOUT", 0.2)


def deliver(tmp_path: Path, kind: str, pane: Pane) -> engine.Delivery:
    path = tmp_path / "team.toml"
    path.write_text(f'name = "t"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\nagent = "{kind}"\n', encoding="utf-8")
    team = teamfile.load(path)
    server = replay_server(tmp_path, pane)
    ctx = engine.Context(team=team, server=server, panes=seatpane.list_panes(server), recogniser=Reader(kind))
    seat = team.seat("dev")
    assert seat is not None
    return engine.deliver(ctx, seat, "em", MESSAGE)


def test_a_busy_seat_is_refused_with_nothing_typed(tmp_path: Path, agent: tuple[str, int]) -> None:
    kind, pid = agent
    pane = Pane(shown("", busy=True), pid=pid)
    result = deliver(tmp_path, kind, pane)
    assert result.result is engine.Result.REFUSED and result.waitable  # say --queue waits it out
    assert "busy with a turn" in result.reason and agents.kind(kind).display in result.reason
    assert sent(pane) == []


def test_the_enter_waits_the_agents_pause_after_the_paste(tmp_path: Path, agent: tuple[str, int]) -> None:
    kind, pid = agent
    times: dict[str, float] = {}

    def clock(n: int, argv: list[str]) -> None:
        if argv[0] in ("load-buffer", "send-keys"):
            times[argv[0]] = time.monotonic()

    pane = Pane(
        shown(""),
        {"paste": [shown(LABEL), shown(LABEL + MESSAGE)], "Enter": [shown("", busy=True)]},
        pid=pid,
        on_call=clock,
    )
    result = deliver(tmp_path, kind, pane)
    assert result.result is engine.Result.DELIVERED, result.reason  # the turn it started: busy, the box empty
    assert sent(pane) == ["paste", "paste", "Enter"]
    assert times["send-keys"] - times["load-buffer"] >= agents.kind(kind).enter_delay


def test_no_enter_when_the_seat_turned_busy_after_the_paste(tmp_path: Path, agent: tuple[str, int]) -> None:
    kind, pid = agent
    pane = Pane(shown(""), {"paste": [shown(LABEL), shown(LABEL + MESSAGE, busy=True)]}, pid=pid)
    result = deliver(tmp_path, kind, pane)
    assert result.result is engine.Result.TYPED
    assert sent(pane) == ["paste", "paste"]  # the text waits in the box for flush; no Enter into the turn


def test_no_enter_when_the_seat_turned_busy_during_the_pause(tmp_path: Path, agent: tuple[str, int]) -> None:
    kind, pid = agent
    looks_after_paste: list[int] = []

    def turn_busy(n: int, argv: list[str]) -> None:
        if argv[0] == "load-buffer":
            looks_after_paste.clear()
        elif argv[0] == "display-message" and pane.pastes == [LABEL, MESSAGE]:
            looks_after_paste.append(n)
            if len(looks_after_paste) == 2:  # the look after the pause, not the check right after the paste
                pane.now = shown(LABEL + MESSAGE, busy=True)

    pane = Pane(shown(""), {"paste": [shown(LABEL), shown(LABEL + MESSAGE)]}, pid=pid, on_call=turn_busy)
    result = deliver(tmp_path, kind, pane)
    assert result.result is engine.Result.TYPED
    assert "busy with a turn" in result.reason
    assert sent(pane) == ["paste", "paste"]


def test_claude_code_still_takes_a_message_while_busy() -> None:
    assert agents.CLAUDE.deliver_while_busy and not agents.CODEX.deliver_while_busy
    assert agents.GEMINI.enter_delay >= 0.5 > agents.CODEX.enter_delay > 0


def test_flush_sends_no_enter_into_a_busy_seat(tmp_path: Path, agent: tuple[str, int]) -> None:
    from fabrikito.delivery import flush

    kind, pid = agent
    pane = Pane(shown(LABEL + "please rev", busy=True), pid=pid)
    path = tmp_path / "team.toml"
    path.write_text(f'name = "t"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\nagent = "{kind}"\n', encoding="utf-8")
    team = teamfile.load(path)
    record = seatlock.paste_record_path(team, "dev")
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"sender": "em", "label": LABEL, "body": MESSAGE, "time": 0}), encoding="utf-8")
    server = replay_server(tmp_path, pane)
    ctx = engine.Context(team=team, server=server, panes=seatpane.list_panes(server), recogniser=Reader(kind))
    seat = team.seat("dev")
    assert seat is not None
    result = flush.flush_seat(ctx, seat)
    assert result.outcome.value == "NOT-FLUSHED" and "busy with a turn" in result.reason
    assert sent(pane) == []
    pane.now = shown(LABEL + "please rev")  # idle again: flush submits what say left, with one Enter
    pane.script["Enter"] = [shown("")]
    assert flush.flush_seat(ctx, seat).outcome.value == "FLUSHED"
    assert sent(pane) == ["Enter"]
