"""``say`` run by the team's command server, its tmux commands through the server's tmux control-mode
client (base/tmuxcontrol.py), against real Claude Code seats: the rules that hold for ``say`` run by
itself (test_say_live.py) hold here, read and typed through the control client."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from fabrikito.base import procs, tmuxwire
from fabrikito.base.tmux import Server
from fabrikito.cli import serverctl
from fabrikito.offline.seatkit import LiveSeat, SeatFactory
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile

from .teamkit import (
    clean_env,
    fabrikito,
    log_lines,
    open_permission_prompt,
    say_cut_between_pastes,
    start_fabrikito,
    wait_for,
    write_team,
)

pytestmark = [pytest.mark.live, pytest.mark.tmux_releases]

EXIT_REFUSED = 3
THROUGH_CONTROL = "read through the command server's tmux control client"


class Served:
    """A team file whose command server runs and holds the tmux control client."""

    def __init__(self, tmux: Server, tmp_path: Path) -> None:
        self.tmux = tmux
        self.tmp_path = tmp_path
        self.team: teamfile.Team | None = None

    def start(self, seats: Sequence[LiveSeat]) -> Path:
        path = write_team(self.tmp_path / "team" / "team.toml", self.tmux, seats)
        self.team = teamfile.load(path)
        assert serverctl.ensure_running(self.team, env=clean_env())
        server_pid = serverctl.running_pid(path)
        wait_for(lambda: self.tmux.run("list-clients").strip() != "", 10, "the server's control client")
        (client,) = self.tmux.run("list-clients", "-F", "#{client_pid} #{client_control_mode}").splitlines()
        pid, control = client.split()
        assert control == "1" and procs.info(int(pid)).ppid == server_pid
        return path

    def stop(self) -> None:
        if self.team is not None:
            serverctl.stop(self.team)


@pytest.fixture
def served(tmux_server: Server, tmp_path: Path) -> Iterator[Served]:
    team = Served(tmux_server, tmp_path)
    yield team
    team.stop()


def test_served_say_delivers_short_multi_line_and_long_messages(
    seat_factory: SeatFactory, standin: StandIn, served: Served
) -> None:
    team = served.start([seat_factory.start("dev")])
    mark = standin.mark()
    done = fabrikito("say", "-v", "dev", "please review the patch", team=team)
    assert done.returncode == 0, done.stderr
    assert THROUGH_CONTROL in done.stderr
    assert (
        "[from live-test] please review the patch"
        in standin.wait_for_request("dev", "review the", since=mark).last_user_text
    )
    three = "line one\nline two\nline three"
    mark = standin.mark()
    done = fabrikito("say", "dev", team=team, stdin=three + "\n")
    assert done.returncode == 0, done.stderr
    assert "[from live-test] " + three in standin.wait_for_request("dev", "line three", since=mark).last_user_text
    # Over one write to the client: loaded into its buffer in pieces; a placeholder in the box.
    long = "".join(f'{i:04d} é 漢 $HOME ~/x "q" \\ ; #{{pane_id}} ' for i in range(200)) + "the end"
    assert len(tmuxwire.pieces(long)) >= 3
    mark = standin.mark()
    done = fabrikito("say", "dev", long, team=team)
    assert done.returncode == 0, done.stderr
    request = standin.wait_for_request("dev", "the end", since=mark)
    assert "[from live-test] " + long in request.last_user_text
    assert [line[3] for line in log_lines(team)] == ["delivered"] * 3
    assert served.tmux.run("list-buffers", "-F", "#{buffer_name}").strip() == ""


def test_served_say_refuses_a_draft_copy_mode_and_a_dialog_with_nothing_typed(
    seat_factory: SeatFactory, standin: StandIn, served: Served
) -> None:
    seat = seat_factory.start("dev", permission_mode="default")
    team = served.start([seat])
    tmux = served.tmux
    tmux.send_keys(seat.pane, "half-written draft", literal=True)
    wait_for(lambda: "half-written draft" in tmux.capture(seat.pane), 10, "the draft to show")
    done = fabrikito("say", "-v", "dev", "are you there", team=team)
    assert done.returncode == EXIT_REFUSED and "already holds text" in done.stderr, done.stderr
    assert THROUGH_CONTROL in done.stderr
    assert "half-written draft" in tmux.capture(seat.pane) and "[from" not in tmux.capture(seat.pane)
    tmux.send_keys(seat.pane, "C-u")
    wait_for(lambda: "half-written draft" not in tmux.capture(seat.pane), 10, "the draft to go")

    tmux.run("copy-mode", "-t", seat.pane)
    done = fabrikito("say", "dev", "hello", team=team)
    assert done.returncode == EXIT_REFUSED and "copy mode" in done.stderr, done.stderr
    tmux.run("send-keys", "-t", seat.pane, "-X", "cancel")

    open_permission_prompt(tmux, seat.pane, standin)
    before = tmux.capture(seat.pane)
    done = fabrikito("say", "dev", "1", team=team)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    time.sleep(0.5)
    assert tmux.capture(seat.pane) == before
    assert [line[3] for line in log_lines(team)] == ["NOT-DELIVERED"] * 3


def test_served_concurrent_senders_are_each_delivered_once_and_unmixed(
    seat_factory: SeatFactory, standin: StandIn, served: Served
) -> None:
    team = served.start([seat_factory.start("dev", renderer="fullscreen")])
    messages = [f"served message {i} " + chr(ord("a") + i) * 30 for i in range(6)]
    senders = [start_fabrikito("say", "dev", m, team=team) for m in messages]
    codes = [p.wait(timeout=120) for p in senders]
    assert all(code in (0, EXIT_REFUSED) for code in codes), codes
    delivered = [line[4] for line in log_lines(team) if line[3] == "delivered"]
    assert sorted(delivered) == sorted(m for m, c in zip(messages, codes, strict=True) if c == 0) and delivered

    def all_arrived() -> bool:
        seen = "\n".join(standin.last_user_texts("dev"))
        return all(f"[from live-test] {m}" in seen for m in delivered)

    wait_for(all_arrived, 60, "every delivered message at the model", lambda: "\n".join(standin.last_user_texts("dev")))
    texts = standin.last_user_texts("dev")
    for m in delivered:
        assert len([t for t in texts if m in t]) == 1, texts
    assert served.tmux.alive()


def test_served_flush_submits_what_say_left_and_never_a_persons_draft(
    seat_factory: SeatFactory, standin: StandIn, served: Served, tmp_path: Path
) -> None:
    seat = seat_factory.start("dev")
    team = served.start([seat])
    tmux = served.tmux
    record = team.parent / ".state" / "live" / "say" / "paste-dev"
    say_cut_between_pastes(team, "dev", "the message that was cut short", tmp_path)
    wait_for(lambda: "[from live-test]" in tmux.capture(seat.pane), 20, "the label in the box")
    assert record.exists()
    mark = standin.mark()
    done = fabrikito("flush", "dev", team=team)  # served: through the control client
    assert done.returncode == 0 and "flushed dev" in done.stdout, done.stdout + done.stderr
    assert "[from live-test]" in standin.wait_for_request("dev", "[from live-test]", since=mark).last_user_text
    assert not record.exists()
    wait_for(lambda: "[from live-test]" not in tmux.capture(seat.pane).split("❯")[-1], 20, "the box empty again")
    tmux.send_keys(seat.pane, "my own draft", literal=True)
    wait_for(lambda: "my own draft" in tmux.capture(seat.pane), 10, "the draft")
    done = fabrikito("flush", "dev", team=team)
    assert done.returncode == EXIT_REFUSED and "left as it is" in done.stderr, done.stderr
    time.sleep(0.3)
    assert "my own draft" in tmux.capture(seat.pane)
    assert [line[3] for line in log_lines(team)][-2:] == ["FLUSHED", "NOT-FLUSHED"]
