"""The delivery engine's decisions, on recorded screens replayed by a fake tmux pane (tests/unit/replay.py)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.unit.replay import Pane, claude_process, delivering_pane, names, replay_server, screen, sent

from fabrikito.delivery import engine, flush, identity, say, seatlock
from fabrikito.log import msglog
from fabrikito.team import teamfile

MESSAGE = "please review the patch"  # what the recorded label-then-short screens hold after "[from em] "
FULL = "fullscreen-120x40"


@pytest.fixture
def claude_pid() -> Iterator[int]:
    with claude_process() as pid:
        yield pid


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RENDER_TIMEOUT", 0.2)
    monkeypatch.setattr(engine, "ENTER_TIMEOUT", 0.2)


def team_at(tmp_path: Path) -> teamfile.Team:
    path = tmp_path / "team.toml"
    path.write_text('name = "t"\n[[seat]]\nrole = "em"\nsession = "t-em"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n')
    return teamfile.load(path)


def log_lines(team: teamfile.Team) -> list[msglog.Record | msglog.Foreign]:
    if not team.log_path.exists():
        return []
    return [msglog.parse_line(raw) for raw in team.log_path.read_bytes().splitlines(keepends=True)]


def say_dev(tmp_path: Path, pane: Pane, text: str = MESSAGE) -> tuple[int, teamfile.Team, list[str]]:
    team = team_at(tmp_path)
    errors: list[str] = []
    code = say.run_say(
        team,
        replay_server(tmp_path, pane),
        "dev",
        text,
        env_role="em",
        caller_pid=os.getpid(),
        out=errors.append,
        err=errors.append,
    )
    return code, team, errors


def only_line(team: teamfile.Team) -> msglog.Record:
    (line,) = log_lines(team)
    assert isinstance(line, msglog.Record), line
    return line


@pytest.mark.parametrize("renderer", ["fullscreen", "inline"])
def test_a_ready_box_gets_the_label_then_the_message_then_one_enter(
    tmp_path: Path, claude_pid: int, renderer: str
) -> None:
    size = f"{renderer}-120x40"
    pane = Pane(
        screen(f"{size}-empty-box-fresh-start"),
        {"paste": names(f"{size}-label-alone", f"{size}-label-then-short"), "Enter": names(f"{size}-after-turn")},
        pid=claude_pid,
    )
    code, team, _ = say_dev(tmp_path, pane)
    assert code == engine.EXIT_DELIVERED
    assert pane.pastes == ["[from em] ", MESSAGE]
    assert sent(pane) == ["paste", "paste", "Enter"]
    line = only_line(team)
    assert (line.sender, line.recipient, line.outcome, line.message) == (b"em", b"dev", "delivered", MESSAGE.encode())
    assert not seatlock.paste_record_path(team, "dev").exists()


@pytest.mark.parametrize(
    ("start", "why"),
    [
        ("typed-short-unsubmitted", "already holds text"),
        ("permission-prompt-bash", ""),
        ("held-dialog", ""),
        ("copy-mode", ""),
    ],
)
def test_a_box_that_is_not_ready_is_refused_with_nothing_typed(
    tmp_path: Path, claude_pid: int, start: str, why: str
) -> None:
    pane = Pane(screen(f"{FULL}-{start}"), pid=claude_pid)
    code, team, errors = say_dev(tmp_path, pane)
    assert code == engine.EXIT_REFUSED
    assert sent(pane) == []
    assert only_line(team).outcome == "NOT-DELIVERED"
    assert why in " ".join(errors) and "Nothing was typed" in " ".join(errors)


def test_a_box_holding_more_than_the_label_gets_no_message(tmp_path: Path, claude_pid: int) -> None:
    pane = Pane(screen(f"{FULL}-empty-box-fresh-start"), {"paste": names(f"{FULL}-label-then-short")}, pid=claude_pid)
    code, team, errors = say_dev(tmp_path, pane)
    assert code == engine.EXIT_TYPED
    assert pane.pastes == ["[from em] "]  # the message was never pasted
    assert "Enter" not in pane.keys
    assert only_line(team).outcome == "NOT-DELIVERED"
    assert seatlock.paste_record_path(team, "dev").exists()  # so flush can submit the label
    assert "the box does not hold just the label" in " ".join(errors)


def test_no_enter_when_the_box_does_not_hold_just_the_message(tmp_path: Path, claude_pid: int) -> None:
    pane = Pane(
        screen(f"{FULL}-empty-box-fresh-start"),
        {"paste": names(f"{FULL}-label-alone", f"{FULL}-label-then-3lines")},
        pid=claude_pid,
    )
    code, team, _ = say_dev(tmp_path, pane)
    assert code == engine.EXIT_TYPED
    assert sent(pane) == ["paste", "paste"]
    assert only_line(team).outcome == "NOT-DELIVERED"


def test_the_first_look_is_taken_with_the_seats_lock_held_and_read_before_the_first_paste(
    tmp_path: Path, claude_pid: int
) -> None:
    """The first look's tmux call starts before the foreground check (they overlap), but after the lock is
    taken: a look taken before it could show the box as it was before another say typed into it."""
    held: list[bool] = []

    def on_call(_n: int, argv: list[str]) -> None:
        if argv[0] == "display-message" and not pane.pastes:
            lock = seatlock.say_dir(team_at(tmp_path)) / "dev.lock"
            if not lock.exists():
                held.append(False)
                return
            with lock.open("rb") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held.append(True)
                else:
                    held.append(False)

    pane = delivering_pane(claude_pid, on_call)
    code, _team, _ = say_dev(tmp_path, pane)
    assert code == engine.EXIT_DELIVERED
    assert held == [True]  # one look before the first paste, and the lock was held
    assert [c[0] for c in pane.calls][:3] == ["list-panes", "display-message", "load-buffer"]
    assert pane.started and all(call.read for call in pane.started)


def test_a_pane_without_an_agent_is_refused_and_its_started_look_is_still_read(tmp_path: Path) -> None:
    """The look started before the foreground check is waited for when that check refuses (no tmux
    process is left behind), and nothing is typed."""
    with subprocess.Popen(["sleep", "600"]) as shell:
        try:
            pane = Pane(screen(f"{FULL}-empty-box-fresh-start"), pid=shell.pid)
            code, team, errors = say_dev(tmp_path, pane)
        finally:
            shell.kill()
    assert code == engine.EXIT_REFUSED
    assert "not running an agent" in " ".join(errors)
    assert sent(pane) == []
    assert [call.argv[0] for call in pane.started] == ["display-message"]
    assert all(call.read for call in pane.started)
    assert only_line(team).outcome == "NOT-DELIVERED"


def test_a_paste_not_drawn_yet_is_read_again_after_a_pause_not_at_once(tmp_path: Path, claude_pid: int) -> None:
    """Each read is a tmux call on the CPUs the agent draws with: after a read that does not show the
    paste yet, the next waits engine.POLL (read at once, the screen has rarely changed)."""
    drawn = {"[from em] ": screen(f"{FULL}-label-alone"), MESSAGE: screen(f"{FULL}-label-then-short")}
    reads: list[tuple[float, str]] = []  # (when, the paste it followed)

    def on_call(_n: int, argv: list[str]) -> None:
        if argv[0] == "display-message" and pane.pastes:
            reads.append((time.monotonic(), pane.pastes[-1]))
            if sum(1 for _, p in reads if p == pane.pastes[-1]) == 2:  # drawn for the second read after it
                pane.now = drawn[pane.pastes[-1]]

    pane = Pane(
        screen(f"{FULL}-empty-box-fresh-start"),
        {"Enter": names(f"{FULL}-after-turn")},
        pid=claude_pid,
        on_call=on_call,
    )
    code, _team, _ = say_dev(tmp_path, pane)
    assert code == engine.EXIT_DELIVERED
    for text in drawn:
        (first, _), (second, _) = [r for r in reads if r[1] == text][:2]
        assert second - first >= engine.POLL * 0.9, text


def test_the_first_look_after_the_enter_waits_for_the_request_to_leave(tmp_path: Path, claude_pid: int) -> None:
    """A look right after the Enter takes CPU from the agent building its request: the first comes
    engine.ENTER_SETTLE after the Enter, and it still decides (the box seen empty: delivered)."""
    calls: list[tuple[float, str]] = []

    def on_call(_n: int, argv: list[str]) -> None:
        calls.append((time.monotonic(), "Enter" if argv[0] == "send-keys" else argv[0]))

    pane = delivering_pane(claude_pid, on_call)
    code, _team, _ = say_dev(tmp_path, pane)
    assert code == engine.EXIT_DELIVERED
    names_in_order = [name for _, name in calls]
    enter = names_in_order.index("Enter")
    assert names_in_order[enter + 1 :] == ["display-message"]  # one look after it, and it saw the box empty
    assert calls[enter + 1][0] - calls[enter][0] >= engine.ENTER_SETTLE * 0.9


def test_an_enter_that_does_not_land_is_reported_as_typed(tmp_path: Path, claude_pid: int) -> None:
    pane = Pane(
        screen(f"{FULL}-empty-box-fresh-start"),
        {"paste": names(f"{FULL}-label-alone", f"{FULL}-label-then-short")},  # Enter changes nothing
        pid=claude_pid,
    )
    code, team, errors = say_dev(tmp_path, pane)
    assert code == engine.EXIT_TYPED
    assert sent(pane) == ["paste", "paste", "Enter"]
    assert "not seen empty" in " ".join(errors)
    assert only_line(team).outcome == "NOT-DELIVERED"


@pytest.mark.parametrize("char", ["\x1b", "\x07", "\x00", "\r", "\x7f", "\x9b", "\x85"])
def test_control_characters_are_refused_before_anything_is_typed(tmp_path: Path, claude_pid: int, char: str) -> None:
    pane = Pane(screen(f"{FULL}-empty-box-fresh-start"), pid=claude_pid)
    code, team, errors = say_dev(tmp_path, pane, f"look{char}[31m here")
    assert code == engine.EXIT_REFUSED
    assert sent(pane) == []
    assert f"U+{ord(char):04X}" in " ".join(errors)
    line = only_line(team)
    assert line.outcome == "NOT-DELIVERED" and line.message == f"look{char}[31m here".encode()


def test_tab_and_newline_are_typed() -> None:
    assert engine.unsafe_characters("a\tb\nc") is None


def test_a_message_that_is_not_utf8_is_refused_and_logged_as_its_bytes(tmp_path: Path, claude_pid: int) -> None:
    latin1 = b"caf\xe9 cr\xe8me".decode("utf-8", "surrogateescape")  # as Python keeps such argv
    pane = Pane(screen(f"{FULL}-empty-box-fresh-start"), pid=claude_pid)
    code, team, errors = say_dev(tmp_path, pane, latin1)
    assert code == engine.EXIT_REFUSED
    assert sent(pane) == []
    assert "not valid UTF-8" in " ".join(errors)
    line = only_line(team)
    assert line.escaped[4] == "caf\\xE9 cr\\xE8me"
    assert line.message == b"caf\xe9 cr\xe8me"


def test_say_all_from_the_only_seat_reaches_nobody_and_says_so(tmp_path: Path, claude_pid: int) -> None:
    path = tmp_path / "team.toml"
    path.write_text('name = "t"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n')
    team = teamfile.load(path)
    pane = Pane(screen(f"{FULL}-empty-box-fresh-start"), pid=claude_pid)
    errors: list[str] = []
    code = say.run_say(
        team,
        replay_server(tmp_path, pane),
        "all",
        "hi",
        env_role="dev",
        caller_pid=os.getpid(),
        out=print,
        err=errors.append,
    )
    assert code == engine.EXIT_REFUSED
    assert "only seat" in " ".join(errors)
    assert only_line(team).outcome == "NOT-DELIVERED"


def test_the_owner_is_named_when_the_server_is_down(tmp_path: Path) -> None:
    from fabrikito.base.tmux import Server

    team = team_at(tmp_path)
    server = Server(socket_path=str(tmp_path / "no-such-server"))
    errors: list[str] = []
    code = say.run_say(team, server, "dev", "hi", env_role=None, caller_pid=os.getpid(), out=print, err=errors.append)
    assert code == engine.EXIT_REFUSED
    sender = only_line(team).sender
    try:
        expected = identity.sender_from_ancestry(team, [])
    except identity.IdentityRefused:  # this test runs in a pane of some tmux server: the walk refuses
        assert sender == b"?" and "another tmux server" in " ".join(errors)
    else:
        assert expected == "owner"
        assert sender == b"owner" and "not running" in " ".join(errors)


def test_flush_submits_a_tall_message_say_left_and_logs_one_line(tmp_path: Path, claude_pid: int) -> None:
    team = team_at(tmp_path)
    calls: list[tuple[float, str]] = []
    pane = Pane(
        screen("fullscreen-89x13-label-then-3lines"),
        {"Enter": names("fullscreen-89x13-after-turn")},
        pid=claude_pid,
        on_call=lambda _n, argv: calls.append((time.monotonic(), argv[0])),
    )
    from fabrikito.base import statedir

    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(seatlock.say_dir(team))
    seatlock.write_paste_record(team, "dev", "em", "[from em] ", "line one\nline two\nline three")
    out: list[str] = []
    code = flush.run_flush(
        team,
        replay_server(tmp_path, pane),
        "dev",
        env_role="em",
        caller_pid=os.getpid(),
        out=out.append,
        err=out.append,
    )
    assert code == flush.EXIT_FLUSHED, out
    assert pane.keys == ["Enter"] and pane.pastes == []
    line = only_line(team)
    assert (line.outcome, line.message) == ("FLUSHED", b"[flush]")
    enter = [name for _, name in calls].index("send-keys")  # its first look after the Enter waits, as say's does
    assert calls[enter + 1][0] - calls[enter][0] >= engine.ENTER_SETTLE * 0.9


def test_flush_refuses_a_box_it_did_not_leave_without_calling_it_a_draft(tmp_path: Path, claude_pid: int) -> None:
    team = team_at(tmp_path)
    pane = Pane(screen(f"{FULL}-typed-short-unsubmitted"), pid=claude_pid)
    from fabrikito.base import statedir

    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(seatlock.say_dir(team))
    seatlock.write_paste_record(team, "dev", "em", "[from em] ", MESSAGE)
    out: list[str] = []
    code = flush.run_flush(
        team,
        replay_server(tmp_path, pane),
        "dev",
        env_role="em",
        caller_pid=os.getpid(),
        out=out.append,
        err=out.append,
    )
    assert code == flush.EXIT_NOT_FLUSHED
    assert pane.keys == []
    assert "does not match what say left" in " ".join(out)
    assert only_line(team).outcome == "NOT-FLUSHED"


def test_flush_early_refusals_are_logged(tmp_path: Path) -> None:
    from fabrikito.base.tmux import Server

    team = team_at(tmp_path)
    out: list[str] = []
    server = Server(socket_path=str(tmp_path / "no-such-server"))
    assert (
        flush.run_flush(team, server, "dev", env_role="em", caller_pid=os.getpid(), out=out.append, err=out.append) == 3
    )
    assert (
        flush.run_flush(team, server, "dev", env_role="owner", caller_pid=os.getpid(), out=out.append, err=out.append)
        == 3
    )
    lines = log_lines(team)
    assert [(r.sender, r.outcome) for r in lines if isinstance(r, msglog.Record)] == [
        (b"em", "NOT-FLUSHED"),
        (b"owner", "NOT-FLUSHED"),
    ]
