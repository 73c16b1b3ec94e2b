"""One line per say and flush, and refusals of bad input, against real Claude Code 2.1.316 seats."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabrikito.base.tmux import Server
from fabrikito.delivery import seatpane
from fabrikito.offline.seatkit import SeatFactory
from fabrikito.offline.standin import StandIn
from fabrikito.screen import ScreenState, recogniser_for

from .teamkit import clean_env, fabrikito, log_lines, start_fabrikito, wait_for, write_team

pytestmark = pytest.mark.live

EXIT_REFUSED = 3
EXIT_TYPED = 4


def box_state(server: Server, pane: str) -> ScreenState:
    return recogniser_for("claude", "2.1.316").recognise(seatpane.look(server, pane).snapshot).state


def test_control_characters_and_bytes_that_are_not_utf8_are_refused_and_the_seat_is_not_blocked(
    seat_factory: SeatFactory, standin: StandIn, tmux_server: Server, tmp_path: Path
) -> None:
    seat = seat_factory.start("dev")
    team = write_team(tmp_path / "team" / "team.toml", tmux_server, [seat])
    done = fabrikito("say", "dev", "colour \x1b[31mred\x1b[0m and a bell \x07", team=team)
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert "U+001B" in done.stderr and "Nothing was typed" in done.stderr
    assert log_lines(team)[-1][1:] == [
        "live-test",
        "dev",
        "NOT-DELIVERED",
        "colour \\x1B[31mred\\x1B[0m and a bell \\x07",
    ]
    latin1 = subprocess.run(
        [sys.executable, "-m", "fabrikito", "say", "--team", str(team), "dev"],
        input=b"caf\xe9 cr\xe8me\n",
        capture_output=True,
        env=clean_env({"TEAM_ROLE": "live-test"}),
        timeout=60,
        check=False,
    )
    assert latin1.returncode == EXIT_REFUSED, latin1.stderr
    assert b"not valid UTF-8" in latin1.stderr
    assert log_lines(team)[-1][1:] == ["live-test", "dev", "NOT-DELIVERED", "caf\\xE9 cr\\xE8me"]
    assert box_state(tmux_server, seat.pane) is ScreenState.READY  # nothing was left in the box
    mark = standin.mark()
    ok = fabrikito("say", "dev", "the next message goes through", team=team)
    assert ok.returncode == 0, ok.stderr
    assert (
        "[from live-test] the next message goes through"
        in standin.wait_for_request("dev", "the next message goes through", since=mark).last_user_text
    )


def test_a_say_stopped_while_it_waits_for_the_lock_is_logged(
    seat_factory: SeatFactory, tmux_server: Server, tmp_path: Path
) -> None:
    seat = seat_factory.start("dev")
    team = write_team(tmp_path / "team" / "team.toml", tmux_server, [seat])
    say_dir = team.parent / ".state" / "live" / "say"
    say_dir.mkdir(parents=True, mode=0o700)
    fd = os.open(say_dir / "dev.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another say is typing into the seat
        for sig in (signal.SIGTERM, signal.SIGINT):
            before = len(log_lines(team))
            proc = start_fabrikito("say", "dev", "waiting for the lock", team=team)
            time.sleep(2)  # inside the 8 seconds say waits for the lock
            proc.send_signal(sig)
            assert proc.wait(timeout=20) == EXIT_REFUSED
            assert proc.stderr is not None
            assert f"say was stopped by {sig.name}" in proc.stderr.read()
            new = log_lines(team)[before:]
            assert [line[1:] for line in new] == [["live-test", "dev", "NOT-DELIVERED", "waiting for the lock"]]
    finally:
        os.close(fd)
    assert box_state(tmux_server, seat.pane) is ScreenState.READY


def test_flush_submits_a_tall_message_say_left_in_a_short_pane(
    seat_factory: SeatFactory, standin: StandIn, tmux_server: Server, tmp_path: Path
) -> None:
    seat = seat_factory.start("dev", width=89, height=13, renderer="fullscreen")
    team = write_team(tmp_path / "team" / "team.toml", tmux_server, [seat])
    # A tmux on PATH that swallows say's Enter, as an Enter lost on the way would be.
    wrapper_dir = tmp_path / "bin"
    wrapper_dir.mkdir()
    wrapper = wrapper_dir / "tmux"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *send-keys*Enter*) exit 0;; esac\nexec {shutil.which("tmux")} "$@"\n')
    wrapper.chmod(0o755)
    message = "first line of three\nsecond line of three\nthird line, the end of the message"
    done = fabrikito("say", "dev", message, team=team, env={"PATH": f"{wrapper_dir}:{os.environ['PATH']}"})
    assert done.returncode == EXIT_TYPED, done.stderr
    assert log_lines(team)[-1][3] == "NOT-DELIVERED"
    wait_for(lambda: "the end of the message" in tmux_server.capture(seat.pane), 10, "the message in the box")
    mark = standin.mark()
    flushed = fabrikito("flush", "dev", team=team)
    assert flushed.returncode == 0, flushed.stderr
    assert "flushed dev" in flushed.stdout
    request = standin.wait_for_request("dev", "the end of the message", since=mark)
    assert "[from live-test] first line of three" in request.last_user_text
    assert log_lines(team)[-1][1:] == ["live-test", "dev", "FLUSHED", "[flush]"]
