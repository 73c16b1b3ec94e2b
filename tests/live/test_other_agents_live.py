"""Codex CLI and Gemini CLI, offline against the stand-in: installed into ``.tools/``, started in a private
tmux server with their own HOME, one scripted turn each, a tool call through each one's approval."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline import api_gemini, api_openai, other_setup
from fabrikito.offline.other_setup import CODEX, GEMINI, OtherSeat
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import wait_until
from fabrikito.offline.standin import StandIn
from fabrikito.screen import BoxReading, ScreenState, recogniser_for

pytestmark = pytest.mark.live


class Bench:
    """One private tmux server, one stand-in, the seats started on them; all stopped at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = Server(socket_name=f"fab-oth-{secrets.token_hex(4)}", timeout=10.0)
        self.standin = StandIn().start()
        self.seats: list[OtherSeat] = []

    def start(self, agent: str, role: str = "dev", **options: object) -> OtherSeat:
        binary = other_setup.ensure_agent(agent)
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
