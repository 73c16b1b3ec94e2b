"""Codex CLI and Gemini CLI, offline against the stand-in: installed into ``.tools/``, started in a private
tmux server with their own HOME, one scripted turn each, a tool call through each one's approval."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import userenv

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline import api_gemini, api_openai, other_setup
from fabrikito.offline.other_setup import CODEX, GEMINI, OtherSeat
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import wait_until
from fabrikito.offline.standin import StandIn
from fabrikito.screen import BoxReading, ScreenState, recogniser_for

from .teamkit import clean_env

pytestmark = pytest.mark.live


class Bench:
    """One private tmux server, one stand-in, the seats started on them; all stopped at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = Server(socket_name=f"fab-oth-{secrets.token_hex(4)}", timeout=10.0)
        self.standin = StandIn().start()
        self.seats: list[OtherSeat] = []

    def start(self, agent: str, role: str = "dev", **options: object) -> OtherSeat:
        binary = other_setup.ensure_agent(agent, env=userenv.tooling_env())
        seat = other_setup.start_seat(
            self.server,
            agent,
            binary,
            role=role,
            root=self.root,
            base_url=self.standin.base_url(role),
            **options,  # type: ignore[arg-type]
        )
        self.seats.append(seat)
        return seat

    def close(self) -> None:
        try:
            self.server.kill_server()
        except TmuxError:
            pass
        other_setup.stop_seats(self.seats)
        self.standin.stop()


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path)
    yield b
    b.close()


def _submit(server: Server, pane: str, text: str) -> None:
    server.run("send-keys", "-t", pane, "-l", text)
    wait_until(lambda: text in server.capture(pane), 10, what=f"{text!r} in the box")
    time.sleep(0.5)  # Gemini CLI takes an Enter right after fast input for a newline in the text
    server.send_keys(pane, "Enter")


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_scripted_turn_through_the_standin(bench: Bench, agent: str) -> None:
    seat = bench.start(agent)
    bench.standin.on("say hello", Reply(text="hello from the stand-in"), seat="dev")
    mark = bench.standin.mark()
    _submit(bench.server, seat.pane, "please say hello")
    request = bench.standin.wait_for_request("dev", "please say hello", since=mark)
    assert request.is_main and request.api in ("responses", "gemini"), request.kind
    wait_until(
        lambda: "hello from the stand-in" in bench.server.capture(seat.pane),
        30,
        describe=lambda: bench.server.capture(seat.pane),
        what="the scripted reply on the screen",
    )
    # Each CLI also makes a side call per message (Codex: a title; Gemini: routing), never a turn.
    side = bench.standin.wait_for_request("dev", lambda r: r.is_model_call and not r.is_main, since=mark)
    assert "please say hello" in side.last_user_text, side


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_tool_call_through_the_approval_dialog(bench: Bench, agent: str) -> None:
    seat = bench.start(agent)
    then = Reply(text="the tool finished")
    if agent == CODEX:
        call, question, approve = api_openai.shell_reply("touch made.txt", then=then), "Would you like to run", "y"
    else:
        call, question, approve = api_gemini.shell_reply("touch made.txt", then=then), "Allow execution of", "Enter"
    bench.standin.on("run it", call, seat="dev")
    _submit(bench.server, seat.pane, "please run it")
    wait_until(
        lambda: question in bench.server.capture(seat.pane),
        30,
        describe=lambda: bench.server.capture(seat.pane),
        what="the approval dialog",
    )
    assert not (seat.workdir / "made.txt").exists()
    bench.server.send_keys(seat.pane, approve)
    result = bench.standin.wait_for_tool_result("dev", call.tool or "")
    assert result.input == dict(call.input), result
    assert (seat.workdir / "made.txt").exists()
    wait_until(lambda: "the tool finished" in bench.server.capture(seat.pane), 30, what="the follow-up reply")


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_no_process_outlives_the_bench(tmp_path: Path, agent: str) -> None:
    b = Bench(tmp_path)
    try:
        seat = b.start(agent)
        assert other_setup.pids_with_home(seat.home), "the seat's processes carry its HOME"
    finally:
        b.close()
    wait_until(lambda: not other_setup.pids_with_home(seat.home), 10, what="every process of the seat gone")


def _reading(bench: Bench, seat: OtherSeat, release: str) -> BoxReading:
    from fabrikito.delivery import seatpane

    look = seatpane.look(bench.server, seat.pane)
    return recogniser_for(seat.agent, release).recognise(look.snapshot)


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_the_recogniser_reads_a_live_seat_through_a_turn(bench: Bench, agent: str) -> None:
    """Ready when idle; never typable while a held reply or a streaming one keeps the turn running."""
    release = other_setup.PINNED[agent]
    seat = bench.start(agent)
    wait_until(lambda: _reading(bench, seat, release).state is ScreenState.READY, 20, what="a ready seat")
    bench.standin.on("hold on", Reply(text="held reply done", delay=6), seat="dev")
    bench.standin.on("stream it", Reply(text=" ".join(f"w{n}" for n in range(12)), trickle=0.5), seat="dev")
    for prompt in ("please hold on", "please stream it"):
        _submit(bench.server, seat.pane, prompt)
        bench.standin.wait_for_request("dev", prompt)
        seen = []
        while (reading := _reading(bench, seat, release)).state is not ScreenState.READY:
            seen.append(reading)
            time.sleep(0.2)
            assert len(seen) < 200, seen[-1]
        busy = [r for r in seen if r.busy]
        assert busy, f"{prompt}: never read as busy"
        assert all(r.state is ScreenState.NOT_RECOGNISED for r in busy)
        assert not any(r.state in (ScreenState.READY, ScreenState.BOX_TEXT) for r in seen)
        # Ready only once the reply is whole: the held one, or the last word of the streamed one.
        assert ("held reply done" if prompt == "please hold on" else "w11") in bench.server.capture(seat.pane)


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_what_an_enter_while_busy_does(bench: Bench, agent: str) -> None:
    """Codex sends it at once, into the running turn (a steer: both prompts in a new request, the first
    stream dropped); Gemini queues it and sends it as a turn of its own when the running one ends."""
    seat = bench.start(agent)
    bench.standin.on("hold on", Reply(text="the first reply", delay=8), seat="dev")
    bench.standin.on("meanwhile", "the second reply", seat="dev")
    _submit(bench.server, seat.pane, "please hold on")
    first = bench.standin.wait_for_request("dev", "please hold on")
    time.sleep(1.0)
    mark = bench.standin.mark()
    _submit(bench.server, seat.pane, "and meanwhile this")
    second = bench.standin.wait_for_request("dev", "and meanwhile this", timeout=30, since=mark)
    waited = second.at - first.at
    if agent == CODEX:
        assert waited < 5, f"Codex sent the second prompt {waited:.1f}s after the first (steer expected)"
        body = str(second.body)
        assert "please hold on" in body and "and meanwhile this" in body  # one request carries both
        wait_until(lambda: "the second reply" in bench.server.capture(seat.pane), 30, what="the steered reply")
    else:
        assert waited >= 7.5, f"Gemini sent the second prompt {waited:.1f}s after the first (queue expected)"
        assert "please hold on" not in second.last_user_text  # a turn of its own
        screen = bench.server.capture(seat.pane)
        assert "the first reply" in screen


# -- fabrikito qualify --agent PATH ------------------------------------------------------------------


def _qualify(program: Path, tmp_path: Path) -> tuple[int, str, Path]:
    config = tmp_path / "config"
    env = clean_env({"XDG_CONFIG_HOME": str(config), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    done = subprocess.run(
        [sys.executable, "-m", "fabrikito", "qualify", "--agent", str(program), "--out", str(tmp_path / "screens")],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, config / "fabrikito" / "qualified.json"


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_qualify_takes_a_codex_or_gemini_program_and_records_it(agent: str, tmp_path: Path) -> None:
    release = other_setup.PINNED[agent]
    program = other_setup.tools_dir_for(agent, release) / "node_modules" / ".bin" / agent  # what a user has on PATH
    other_setup.ensure_agent(agent, env=userenv.tooling_env())
    code, output, record = _qualify(program, tmp_path)
    assert code == 0, output
    name = "Codex CLI" if agent == CODEX else "Gemini CLI"
    assert f"{name} {release} qualified as dialect {agent}-" in output, output
    [entry] = json.loads(record.read_text(encoding="utf-8"))["qualified"]
    assert entry["agent"] == agent and entry["release"] == release
    # The program a seat runs: Codex's binary (not its JS shim), Gemini's bundle.
    assert entry["binary"] == str(other_setup.ensure_agent(agent, env=userenv.tooling_env()).resolve())
    saved = {p.name for p in (tmp_path / "screens").iterdir()}
    renderer = "fullscreen" if agent == CODEX else "inline"
    for case in ("empty-box-fresh-start", "busy", "busy-streaming", "approval-dialog", "copy-mode"):
        assert f"{renderer}-120x40-{case}.ansi" in saved


def test_qualify_fails_closed_on_a_codex_that_draws_something_else(tmp_path: Path) -> None:
    """A program inside an ``@openai/codex`` package that is no Codex we know: nothing qualifies, nothing
    is recorded, and the report says what could not be reached."""
    package = tmp_path / "node_modules" / "@openai" / "codex"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@openai/codex", "version": "2.1.999"}\n', encoding="utf-8")
    program = package / "codex-other"
    fake = Path(__file__).resolve().parent / "fake_agent.py"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {fake} "$@"\n', encoding="utf-8")
    program.chmod(0o755)
    code, output, record = _qualify(program, tmp_path)
    assert code == 1, output
    assert "Codex CLI 2.1.999 is NOT qualified" in output
    assert "empty input box" in output  # what could not be reached is named
    assert not record.exists()
