"""Exactly one log line per say, flush and hook invocation, whatever the input or the interruption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.replay import Pane, claude_process, delivering_pane, replay_server, screen

from fabrikito.base import statedir
from fabrikito.base.errors import FabrikitoError
from fabrikito.delivery import engine, flush, say, seatlock
from fabrikito.log import hook, msglog
from fabrikito.team import teamfile

FULL = "fullscreen-120x40"
TEAM = 'name = "t"\n[[seat]]\nrole = "em"\nsession = "t-em"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n'
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]

texts = st.one_of(
    st.text(),
    st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")),  # argv that is not UTF-8
    st.just("please review the patch"),
)
interruptions = st.one_of(st.none(), st.tuples(st.integers(1, 10), st.sampled_from(SIGNALS)))


@pytest.fixture(scope="module")
def claude_pid() -> Iterator[int]:
    with claude_process() as pid:
        yield pid


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RENDER_TIMEOUT", 0.05)
    monkeypatch.setattr(engine, "ENTER_TIMEOUT", 0.05)


def _pane(pid: int, interruption: tuple[int, signal.Signals] | None) -> Pane:
    pane = delivering_pane(pid)
    if interruption is not None:
        at, sig = interruption

        def kill(n: int, argv: list[str]) -> None:
            if n == at:
                os.kill(os.getpid(), sig)

        pane.on_call = kill
    return pane


def _lines(team: teamfile.Team) -> list[bytes]:
    return team.log_path.read_bytes().splitlines(keepends=True) if team.log_path.exists() else []


def _run(call: object) -> int:
    try:
        return int(call())  # type: ignore[operator]
    except FabrikitoError as exc:
        return exc.exit_code


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=texts,
    target=st.sampled_from(["dev", "em", "all", "nobody", ""]),
    role=st.sampled_from(["em", "dev", "owner", "launcher", "live-test", "x y", ""]),
    interruption=interruptions,
)
def test_say_writes_exactly_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    claude_pid: int,
    text: str,
    target: str,
    role: str,
    interruption: tuple[int, signal.Signals] | None,
) -> None:
    tmp = tmp_path_factory.mktemp("say")
    (tmp / "team.toml").write_text(TEAM)
    team = teamfile.load(tmp / "team.toml")
    server = replay_server(tmp, _pane(claude_pid, interruption))
    code = _run(
        lambda: say.run_say(
            team,
            server,
            target,
            text,
            env_role=role or None,
            caller_pid=os.getpid(),
            out=lambda s: None,
            err=lambda s: None,
        )
    )
    assert code in (0, 1, 2, 3, 4)
    (line,) = _lines(team)
    record = msglog.parse_line(line)
    assert isinstance(record, msglog.Record), record
    assert record.outcome == ("delivered" if code == 0 else "NOT-DELIVERED")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.sampled_from(["dev", "em", "nobody"]),
    role=st.sampled_from(["em", "owner", "bogus", ""]),
    record=st.one_of(st.none(), st.binary(max_size=40), st.just(b'{"label": "[from em] ", "body": "line one"}')),
    interruption=interruptions,
)
def test_flush_writes_exactly_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    claude_pid: int,
    target: str,
    role: str,
    record: bytes | None,
    interruption: tuple[int, signal.Signals] | None,
) -> None:
    tmp = tmp_path_factory.mktemp("flush")
    (tmp / "team.toml").write_text(TEAM)
    team = teamfile.load(tmp / "team.toml")
    if record is not None:
        statedir.ensure_state_dir(team.base_dir, team.name)
        statedir.ensure_dir(seatlock.say_dir(team))
        statedir.write_atomic(seatlock.paste_record_path(team, "dev"), record)
    pane = _pane(claude_pid, interruption)
    pane.now = screen(f"{FULL}-typed-short-unsubmitted")
    server = replay_server(tmp, pane)
    code = _run(
        lambda: flush.run_flush(
            team, server, target, env_role=role or None, caller_pid=os.getpid(), out=lambda s: None, err=lambda s: None
        )
    )
    assert code in (0, 1, 2, 3)
    (line,) = _lines(team)
    parsed = msglog.parse_line(line)
    assert isinstance(parsed, msglog.Record) and parsed.message == b"[flush]"


HOOK_TEAM = 'name = "t"\n[[seat]]\nrole = "em"\nsession = "t-em"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n'
payloads = st.one_of(
    st.binary(max_size=200),
    st.builds(
        lambda to, message, ok: (
            b'{"tool_name": "SendMessage", "tool_input": {"to": '
            + to.encode()
            + b', "message": '
            + message.encode()
            + b'}, "tool_response": {"success": '
            + ok.encode()
            + b"}}"
        ),
        st.sampled_from(['"t-dev"', '"t-dev [3fa9c1]"', '"other"', "null", "7", '"uds:/nowhere.sock"']),
        st.sampled_from(['"hi"', '"\\ud800"', "null", "[1, 2]", '"a\\u001bb"']),
        st.sampled_from(["true", "false"]),
    ),
)
team_files = st.sampled_from(
    [HOOK_TEAM, 'name = "t"\n[[seat]\nrole = ', "", "\x00\xff", 'name = "t"\n' + "a = [" * 600 + "]" * 600]
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=payloads, team_text=team_files, role=st.sampled_from(["em", "", "x\ty"]), parsed_before=st.booleans())
def test_the_hook_writes_exactly_one_line_for_a_send_message_call(
    tmp_path_factory: pytest.TempPathFactory, payload: bytes, team_text: str, role: str, parsed_before: bool
) -> None:
    tmp = tmp_path_factory.mktemp("hook")
    team_path = tmp / "team.toml"
    if parsed_before:  # a roster that parsed earlier, then a half-saved edit
        team_path.write_text(HOOK_TEAM)
        hook.load_roster(str(team_path))
    team_path.write_text(team_text)
    argv = ["--team", str(team_path)] + (["--role", role] if role else [])
    assert hook.main(argv, stdin=payload) == 0
    log = tmp / ".state" / "t" / "messages.log"
    lines = log.read_bytes().splitlines(keepends=True) if log.exists() else []
    other_tool = b'"tool_name"' in payload and b'"SendMessage"' not in payload
    if other_tool:
        assert len(lines) <= 1
        return
    if not parsed_before and 'name = "t"' not in team_text:
        assert lines == []  # no roster ever parsed and no name: there is no log to write to
        return
    assert len(lines) == 1, (payload, team_text)
    assert isinstance(msglog.parse_line(lines[0]), msglog.Record)


def test_a_say_stopped_while_it_waits_for_the_seat_lock_is_logged(tmp_path: Path) -> None:
    socket = tmp_path / "sock"
    socket.touch()  # the "server" is up as far as say can tell without running tmux
    (tmp_path / "team.toml").write_text(f'tmux_socket_path = "{socket}"\n' + TEAM)
    team = teamfile.load(tmp_path / "team.toml")
    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(seatlock.say_dir(team))
    lock = seatlock.say_dir(team) / "dev.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for sig in (signal.SIGTERM, signal.SIGINT):
            before = len(_lines(team))
            proc = subprocess.Popen(
                [sys.executable, "-m", "fabrikito", "say", "--team", str(tmp_path / "team.toml"), "dev", "hi"],
                env={**os.environ, "TEAM_ROLE": "em"},
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(1.5)  # well inside the 8 s the lock is waited for
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=10)
            assert proc.returncode == engine.EXIT_REFUSED, err
            assert f"stopped by {sig.name}" in err and "Traceback" not in err
            new = _lines(team)[before:]
            assert len(new) == 1
            record = msglog.parse_line(new[0])
            assert isinstance(record, msglog.Record) and record.outcome == "NOT-DELIVERED"
    finally:
        holder.kill()
        holder.wait()


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""
