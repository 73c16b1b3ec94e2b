"""Smoke tests of the live bench: seats start, SendMessage and inbox posts reach the stand-in."""

from __future__ import annotations

import json
import time

import pytest

from fabrikito.base.tmux import Server
from fabrikito.offline import seatkit
from fabrikito.offline.claude_setup import Renderer
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import SeatFactory
from fabrikito.offline.standin import StandIn

pytestmark = pytest.mark.live


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_seat_shows_empty_box(seat_factory: SeatFactory, tmux_server: Server, renderer: Renderer) -> None:
    seat = seat_factory.start("solo", session="fab-solo", renderer=renderer, width=120, height=40)
    screen = tmux_server.capture(seat.pane)
    assert seatkit.box_row(screen, "fab-solo") is not None, f"no input box named fab-solo on screen:\n{screen}"
    assert screen.split("\n")[seatkit.box_row(screen, "fab-solo") or 0].rstrip(" ") == seatkit.PROMPT, screen
    alternate = tmux_server.display(seat.pane, "#{alternate_on}")
    assert alternate == ("1" if renderer == "fullscreen" else "0"), f"{renderer} renderer, alternate_on={alternate}"
    entry = seat.registry_entry()
    assert entry.get("name") == "fab-solo", entry
    assert entry.get("messagingSocketPath") == seat.socket_path, entry
    assert seat.peer_token(), f"no peerToken in {seat.key_file()}"
    print(f"{renderer} seat ready in {seat.started_in:.2f}s")


def test_sendmessage_reaches_other_seat(seat_factory: SeatFactory, tmux_server: Server, standin: StandIn) -> None:
    sender, receiver = seat_factory.start_many(["a", "b"])
    text = f"hello b, this is a ({time.monotonic_ns()})"
    standin.on(
        "please send the greeting", Reply(tool="SendMessage", input={"to": receiver.session, "message": text}), seat="a"
    )
    since = standin.mark()
    seatkit.submit(tmux_server, sender, "please send the greeting")
    standin.wait_for_request("a", "please send the greeting", 30, since=since)
    result = standin.wait_for_tool_result("a", "SendMessage", 30)
    outcome = result.json()
    assert outcome.get("success") is True, f"SendMessage from a failed: {outcome}"
    got = standin.wait_for_request("b", text, 30, since=since)
    assert f'from-name="{sender.session}"' in got.last_user_text, got.last_user_text


def test_inbox_post_reaches_seat(seat_factory: SeatFactory, standin: StandIn) -> None:
    seat = seat_factory.start("b")
    text = f"external hello ({time.monotonic_ns()})"
    since = standin.mark()
    seatkit.post_inbox(seat, text)
    got = standin.wait_for_request("b", text, 30, since=since)
    assert "Another Claude session sent a message" in got.last_user_text, got.last_user_text


def test_standin_records_prompt_and_reply(seat_factory: SeatFactory, tmux_server: Server, standin: StandIn) -> None:
    seat = seat_factory.start("a")
    standin.on("what is the word", "the word is pelican", seat="a")
    since = standin.mark()
    seatkit.submit(tmux_server, seat, "what is the word")
    request = standin.wait_for_request("a", "what is the word", 30, since=since)
    assert request.streamed and request.is_main, request
    seatkit.wait_until(
        lambda: "the word is pelican" in tmux_server.capture(seat.pane),
        30,
        describe=lambda: tmux_server.capture(seat.pane),
        what="the reply on screen",
    )
    assert json.dumps(request.body)  # the body parsed as JSON


def test_bypass_seat_starts_without_dialog(seat_factory: SeatFactory, tmux_server: Server) -> None:
    seat = seat_factory.start("by", permission_mode="bypassPermissions", width=80, height=24)
    screen = tmux_server.capture(seat.pane)
    assert "bypass permissions on" in screen, f"no bypass footer on screen:\n{screen}"


def test_slow_reply_keeps_seat_busy(seat_factory: SeatFactory, tmux_server: Server, standin: StandIn) -> None:
    seat = seat_factory.start("a", width=80, height=24)
    standin.on("take your time", Reply(text="slow reply done", delay=4), seat="a")
    seatkit.submit(tmux_server, seat, "take your time")
    seatkit.wait_until(
        lambda: seat.registry_entry().get("status") == "busy",
        10,
        describe=lambda: json.dumps(seat.registry_entry()),
        what="the registry to say busy",
    )
    screen = tmux_server.capture(seat.pane)
    assert "slow reply done" not in screen, f"the slow reply showed before its delay:\n{screen}"
    seatkit.wait_until(
        lambda: "slow reply done" in tmux_server.capture(seat.pane) and seat.registry_entry().get("status") == "idle",
        20,
        describe=lambda: tmux_server.capture(seat.pane),
        what="the slow reply and an idle seat",
    )
