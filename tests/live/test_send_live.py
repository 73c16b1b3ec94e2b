"""``fabrikito send`` against real Claude Code 2.1.316 seats (the stand-in model sees what arrives).

Every send here runs the command itself (``python -m fabrikito send``) in a
clean environment whose HOME is the seats' HOME, as a hook or a script
outside the seats would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from fabrikito.base import procs
from fabrikito.base.tmux import Server
from fabrikito.inbox import sessions
from fabrikito.offline import seatkit
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import SeatFactory
from fabrikito.offline.standin import StandIn

pytestmark = pytest.mark.live

HELD_TITLE = "Held message from another session"
KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")


def run_cli(
    home: Path, *args: str, cwd: Path, stdin: str | None = None, extra: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.update(HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    env.update(extra or {})
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _nothing_arrived(standin: StandIn, seat: str, text: str, since: int, wait: float = 3.0) -> bool:
    time.sleep(wait)
    return not any(text in t for t in [r.last_user_text for r in standin.requests(seat)[since:] if r.is_messages])


def test_send_by_name_delivers(seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path) -> None:
    seat = seat_factory.start("a", session="fab-send-a")
    text = f"owner script: build 41 is green ({time.monotonic_ns()})"
    since = standin.mark()
    done = run_cli(claude_home, "send", "--to", "fab-send-a", text, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("written:"), done.stdout
    assert f"pid {seat.pid}" in done.stdout and seat.socket_path in done.stdout
    assert "auth: peer token" in done.stdout
    got = standin.wait_for_request("a", text, 30, since=since)
    assert "Another Claude session sent a message" in got.last_user_text, got.last_user_text


def test_send_by_uds_and_from_stdin(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat = seat_factory.start("u", session="fab-send-u")
    text = f"via uds and stdin ({time.monotonic_ns()})"
    since = standin.mark()
    done = run_cli(claude_home, "send", "--to", f"uds:{seat.socket_path}", cwd=tmp_path, stdin=text + "\n")
    assert done.returncode == 0, done.stderr
    assert "auth: peer token" in done.stdout  # the registry knows this socket, so its key file is used
    standin.wait_for_request("u", text, 30, since=since)


def test_text_arrives_intact(seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path) -> None:
    seat_factory.start("t", session="fab-send-t")
    text = (
        "quotes \"double\" 'single'\nsecond line\\with\\backslashes\\n not a newline\ttab 🎉 ✓ é "
        f"({time.monotonic_ns()})"
    )
    since = standin.mark()
    done = run_cli(claude_home, "send", "--to", "fab-send-t", text, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = standin.wait_for_request("t", text, 30, since=since)
    assert text in got.last_user_text


def test_same_name_is_ambiguous_and_cwd_picks(
    tmux_server: Server, seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    """Two live sessions answering to one name are refused, candidates listed; --cwd picks one.

    Claude Code 2.1.316 renames a second session started with a name a live
    one holds (``fab-dup-wise-allen``, ``nameSource: "collision"``), so two
    sessions share a name only when they start at the same moment (both
    check before either registers).  Both seats are started at once; when
    the second was renamed all the same, its registry entry is given the
    shared name back, the state such a race leaves.
    """
    seats = [
        seatkit.start_seat(
            tmux_server,
            binary=seat_factory.binary,
            role=role,
            session="fab-dup",
            tmux_session=f"fab-dup-{role}",
            home=claude_home,
            cwd=seat_factory.root / "work" / role,
            base_url=standin.base_url(role),
            wait=False,
        )
        for role in ("x1", "x2")
    ]
    seat_factory.seats.extend(seats)

    def registered(seat: seatkit.LiveSeat) -> dict[str, Any] | None:
        entry = seatkit.read_registry(seat.registry)
        if not entry or entry.get("nameSource") not in ("user", "collision"):
            return None  # the first write holds a derived name; -n is applied just after
        sock = entry.get("messagingSocketPath")
        return entry if isinstance(sock, str) and os.path.exists(sock) else None

    for seat in seats:
        seatkit.wait_until(partial(registered, seat), 60, what=f"{seat.role} to register")
    # Let both settle first: Claude Code rewrites its entry on every status change, which
    # would put the collision name back over the shared one.
    time.sleep(3)
    entries = [registered(seat) or {} for seat in seats]
    renamed = [e for e in entries if e.get("name") != "fab-dup"]
    for entry, seat in zip(entries, seats, strict=True):
        if entry.get("name") != "fab-dup":
            assert entry.get("nameSource") == "collision", entry
            scratch = seat.registry.with_name(seat.registry.name + ".tmp")
            scratch.write_text(json.dumps({**entry, "name": "fab-dup"}), encoding="utf-8")
            scratch.replace(seat.registry)
    print(f"renamed by Claude Code on the collision: {[e.get('name') for e in renamed]}")
    text = f"to one of two ({time.monotonic_ns()})"
    since = standin.mark()
    done = run_cli(claude_home, "send", "--to", "fab-dup", text, cwd=tmp_path)
    assert done.returncode == sessions.EXIT_AMBIGUOUS, done
    for seat in seats:
        assert f"pid {seat.pid}" in done.stderr and str(seat.cwd) in done.stderr, done.stderr
    assert "--cwd" in done.stderr
    assert _nothing_arrived(standin, "x1", text, since, wait=0.5)
    assert _nothing_arrived(standin, "x2", text, since, wait=0.0)
    done = run_cli(claude_home, "send", "--to", "fab-dup", "--cwd", str(seats[1].cwd), text, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    standin.wait_for_request("x2", text, 30, since=since)
    assert _nothing_arrived(standin, "x1", text, since, wait=1.0)


def test_killed_session_is_stale(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat = seat_factory.start("k", session="fab-killed")
    # The first registry write holds a derived name; wait for the -n name before the kill.
    seatkit.wait_until(
        lambda: (seatkit.read_registry(seat.registry) or {}).get("name") == "fab-killed",
        10,
        what="the registry to hold the session name",
    )
    os.kill(seat.pid, signal.SIGKILL)
    seatkit.wait_until(lambda: not procs.alive(seat.pid), 10, what="the killed seat to be gone")
    assert seat.registry.exists(), "kill -9 should leave the registry file behind"
    done = run_cli(claude_home, "send", "--to", "fab-killed", "anyone there?", cwd=tmp_path)
    assert done.returncode == sessions.EXIT_STALE, done
    assert "stale" in done.stderr and f"pid {seat.pid}" in done.stderr and "process dead" in done.stderr
    done = run_cli(claude_home, "send", "--to", f"uds:{seat.socket_path}", "anyone there?", cwd=tmp_path)
    assert done.returncode == sessions.EXIT_CONNECT_FAILED, done
    assert "refused" in done.stderr or "no such socket" in done.stderr, done.stderr
    listing = run_cli(claude_home, "sessions", "--all", "--json", cwd=tmp_path)
    (entry,) = [s for s in json.loads(listing.stdout)["sessions"] if s["pid"] == seat.pid]
    assert entry["stale"] is True


def test_too_large_refused_before_connecting(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat_factory.start("big", session="fab-big")
    # A listener of our own stands in for the socket, to see that no connection is made.
    probe_path = tmp_path / "probe.sock"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.bind(str(probe_path))
    probe.listen(1)
    probe.settimeout(0.5)
    try:
        big = "b" * 1_000_001
        done = run_cli(claude_home, "send", "--to", f"uds:{probe_path}", "-", cwd=tmp_path, stdin=big)
        assert done.returncode == sessions.EXIT_TOO_LARGE, done.stderr
        assert "1,000,001" in done.stderr and "nothing was sent" in done.stderr
        with pytest.raises(TimeoutError):
            probe.accept()
    finally:
        probe.close()
    since = standin.mark()
    done = run_cli(claude_home, "send", "--to", "fab-big", "-", cwd=tmp_path, stdin="c" * 1_000_001)
    assert done.returncode == sessions.EXIT_TOO_LARGE
    assert _nothing_arrived(standin, "big", "c" * 1000, since, wait=2.0)
    # Exactly at the limit (the label counts, so without it): sent, and Claude Code takes it.
    marker = f"limit ({time.monotonic_ns()}) "
    at_limit = marker + "d" * (1_000_000 - len(marker))
    done = run_cli(claude_home, "send", "--to", "fab-big", "--no-label", "-", cwd=tmp_path, stdin=at_limit)
    assert done.returncode == 0, done.stderr
    standin.wait_for_request("big", marker, 60, since=since)


def test_bypass_receiver_holds_and_command_says_so(
    tmux_server: Server, seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat = seat_factory.start("byp", session="fab-byp", permission_mode="bypassPermissions")
    team_dir = tmp_path / "team"
    team_dir.mkdir()
    (team_dir / "team.toml").write_text(
        f'name = "live"\ntmux_socket = "{tmux_server.socket_name}"\n\n'
        '[[seat]]\nrole = "byp"\nsession = "fab-byp"\npermission_mode = "bypassPermissions"\n',
        encoding="utf-8",
    )
    # The dialog shows a sanitized preview (it dropped the parentheses of "(123)"): plain words and digits only.
    text = f"held please {time.monotonic_ns()}"
    since = standin.mark()
    done = run_cli(claude_home, "send", "--to", "byp", text, cwd=team_dir, extra={"TEAM_ROLE": "live-test"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("written:"), done.stdout
    assert "bypassPermissions" in done.stdout and "HOLDS" in done.stdout, done.stdout

    def held() -> str | None:
        screen = tmux_server.capture(seat.pane)
        return screen if HELD_TITLE in screen and text in screen else None

    screen = seatkit.wait_until(
        held, 30, what="the held-message dialog", describe=lambda: tmux_server.capture(seat.pane)
    )
    assert text in screen
    assert "did not attest its permission mode" in screen
    assert _nothing_arrived(standin, "byp", text, since, wait=1.0)
    entry = json.loads(seat.registry.read_text())
    assert entry.get("status") == "waiting" and entry.get("waitingFor") == "permission prompt", entry
    (line,) = (team_dir / ".state" / "live" / "messages.log").read_text(encoding="utf-8").splitlines()
    assert line.split("\t")[1:] == ["live-test", "byp", "sent", text]
    # While the message is held, status shows the seat waiting at the dialog, and say types nothing
    # into it (an Enter there would pick "Deny").
    status = run_cli(claude_home, "status", cwd=team_dir)
    assert "waiting at a dialog" in status.stdout, status.stdout + status.stderr
    said = run_cli(claude_home, "say", "byp", "typed into the dialog?", cwd=team_dir, extra={"TEAM_ROLE": "live-test"})
    assert said.returncode == 3, said.stdout + said.stderr
    assert "held-message dialog" in said.stderr
    assert HELD_TITLE in tmux_server.capture(seat.pane)  # the dialog is still open: nothing was chosen
    assert "typed into the dialog?" not in tmux_server.capture(seat.pane)


def test_wait_idle(seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path) -> None:
    seat_factory.start("w", session="fab-wait")
    done = run_cli(claude_home, "wait-idle", "fab-wait", "--timeout", "10", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = f"take your time ({time.monotonic_ns()})"
    standin.on(text, Reply(text="done thinking", delay=4.0), seat="w")
    since = standin.mark()
    sent = run_cli(claude_home, "send", "--to", "fab-wait", text, cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    standin.wait_for_request("w", text, 30, since=since)
    t0 = time.monotonic()
    quick = run_cli(claude_home, "wait-idle", "fab-wait", "--timeout", "1", cwd=tmp_path)
    assert quick.returncode == sessions.EXIT_WAIT_TIMEOUT, quick
    assert "busy" in quick.stderr
    done = run_cli(claude_home, "wait-idle", "fab-wait", "--timeout", "30", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - t0 < 15


# -- the label, the timeout, the hook's default target, an unrelated team file, repeats, wait-idle ----------


def _arrived(standin: StandIn, seat: str, needle: str, since: int) -> list[str]:
    return [r.last_user_text for r in standin.requests(seat)[since:] if r.is_messages and needle in r.last_user_text]


def test_send_labels_the_sender_by_say_rules_and_no_label_sends_raw(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat_factory.start("l", session="fab-send-l")
    text = f"labelled ({time.monotonic_ns()})"
    since = standin.mark()
    done = run_cli(claude_home, "send", "--to", "fab-send-l", text, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"[from owner] {text}" in standin.wait_for_request("l", text, 30, since=since).last_user_text
    as_test = f"as live-test ({time.monotonic_ns()})"
    done = run_cli(claude_home, "send", "--to", "fab-send-l", as_test, cwd=tmp_path, extra={"TEAM_ROLE": "live-test"})
    assert done.returncode == 0, done.stderr
    assert f"[from live-test] {as_test}" in standin.wait_for_request("l", as_test, 30, since=since).last_user_text
    raw = f"raw ({time.monotonic_ns()})"
    done = run_cli(claude_home, "send", "--to", "fab-send-l", "--no-label", raw, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = standin.wait_for_request("l", raw, 30, since=since).last_user_text
    assert "[from" not in got.split(raw)[0].rsplit("\n", 1)[-1], got
    refused = f"refused ({time.monotonic_ns()})"
    done = run_cli(claude_home, "send", "--to", "fab-send-l", refused, cwd=tmp_path, extra={"TEAM_ROLE": "owner"})
    assert done.returncode == 2 and "Nothing was sent" in done.stderr, done
    assert _nothing_arrived(standin, "l", refused, since)


def test_send_timeout_over_the_line_limit_is_a_usage_error(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat_factory.start("o", session="fab-send-o")
    since = standin.mark()
    for value in ("16", "0", "nan", "x"):
        text = f"timeout {value} ({time.monotonic_ns()})"
        done = run_cli(claude_home, "send", "--to", "fab-send-o", "--timeout", value, text, cwd=tmp_path)
        assert done.returncode == 2, done
        assert "--timeout" in done.stderr and "Traceback" not in done.stderr
    assert _nothing_arrived(standin, "o", "timeout ", since)
    ok = f"timeout 15 ({time.monotonic_ns()})"
    assert run_cli(claude_home, "send", "--to", "fab-send-o", "--timeout", "15", ok, cwd=tmp_path).returncode == 0
    standin.wait_for_request("o", ok, 30, since=since)


def test_inside_a_session_send_defaults_to_that_session(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat_factory.start("h", session="fab-send-h", settings={"permissions": {"allow": ["Bash"]}})
    back = f"from my own Bash ({time.monotonic_ns()})"
    src = Path(__file__).resolve().parents[2] / "src"
    out = tmp_path / "bash-send.out"
    command = f"PYTHONPATH={src} {sys.executable} -m fabrikito send {back!r} >{out} 2>&1; echo rc=$? >>{out}"
    trigger = f"run the send ({time.monotonic_ns()})"
    standin.on(trigger, Reply(text="sending", tool="Bash", input={"command": command, "description": "send"}), seat="h")
    since = standin.mark()
    assert run_cli(claude_home, "send", "--to", "fab-send-h", trigger, cwd=tmp_path).returncode == 0
    # The Bash command had no --to: it went to $CLAUDE_CODE_MESSAGING_SOCKET, this very session.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "rc=" not in (out.read_text() if out.exists() else ""):
        time.sleep(0.2)
    assert "rc=0" in out.read_text(), out.read_text() if out.exists() else "the Bash command did not run"
    # It arrives between tool calls: in the body of a later request of the same turn, or as a new turn.
    got = standin.wait_for_request("h", lambda r: back in json.dumps(r.body, ensure_ascii=False), 60, since=since)
    assert f"[from owner] {back}" in json.dumps(got.body, ensure_ascii=False)


def test_an_unrelated_team_file_here_never_breaks_a_uds_send(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat = seat_factory.start("x", session="fab-send-x")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "team.toml").write_text("name = [not a team\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "team.toml").write_text(
        'name = "other"\ntmux_socket = "fab-none"\n[[seat]]\nrole = "em"\nsession = "o-em"\n'
    )
    (other / ".state").write_text("a file where the state folder would go\n")  # its log cannot be written
    since = standin.mark()
    for where in (broken, other):
        text = f"uds from {where.name} ({time.monotonic_ns()})"
        done = run_cli(claude_home, "send", "--to", f"uds:{seat.socket_path}", text, cwd=where)
        assert done.returncode == 0, done.stderr
        assert "[from owner] " + text in standin.wait_for_request("x", text, 30, since=since).last_user_text
    # by name, the broken team file still counts: roles cannot be resolved without it
    named = run_cli(claude_home, "send", "--to", "fab-send-x", "by name", cwd=broken)
    assert named.returncode == 2 and "not valid TOML" in named.stderr


def test_identical_text_again_is_warned_about(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    """Measured with 2.1.316: repeats 0.3 s to 60 s apart through the command arrive; of two posts a few
    milliseconds apart one arrives.  ``send`` warns inside ``recent.DUPLICATE_WINDOW``."""
    from fabrikito.inbox import client, recent

    seat = seat_factory.start("r", session="fab-send-r")
    text = f"the same text ({time.monotonic_ns()})"
    since = standin.mark()
    first = run_cli(claude_home, "send", "--to", "fab-send-r", text, cwd=tmp_path)
    assert first.returncode == 0 and "warning" not in first.stderr, first.stderr
    again = run_cli(claude_home, "send", "--to", "fab-send-r", text, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "same text went to this session" in again.stderr and "may drop" in again.stderr
    other = run_cli(claude_home, "send", "--to", "fab-send-r", text + " (changed)", cwd=tmp_path)
    assert "warning" not in other.stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(t.count(text) for t in _arrived(standin, "r", text, since)) < 3:
        time.sleep(0.2)
    assert sum(t.count(text) for t in _arrived(standin, "r", text, since)) == 3  # both repeats arrived
    # Two posts milliseconds apart, below what two commands can do.
    burst = f"[from owner] burst ({time.monotonic_ns()})"
    payload = client.build_payload(burst, None)
    since = standin.mark()
    client.post(seat.socket_path, payload)
    client.post(seat.socket_path, payload)
    time.sleep(8)
    arrived = sum(t.count(burst) for t in _arrived(standin, "r", burst, since))
    assert arrived == 1  # the receiver's duplicate window, as measured: the second post was dropped
    assert recent.DUPLICATE_WINDOW > 0


def test_wait_idle_right_after_send_waits_for_the_turn_it_started(
    seat_factory: SeatFactory, standin: StandIn, claude_home: Path, tmp_path: Path
) -> None:
    seat_factory.start("i", session="fab-send-i")
    assert run_cli(claude_home, "wait-idle", "fab-send-i", "--timeout", "10", cwd=tmp_path).returncode == 0
    text = f"slow answer please ({time.monotonic_ns()})"
    answer = f"answered after a while ({time.monotonic_ns()})"
    standin.on(text, Reply(text=answer, delay=3.0), seat="i")
    since = standin.mark()
    sent = run_cli(claude_home, "send", "--to", "fab-send-i", text, cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    waited = run_cli(claude_home, "wait-idle", "fab-send-i", "--timeout", "40", cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    # It returned only once the turn the message started was over: the request was made and answered.
    assert standin.requests("i")[since:], "wait-idle returned before the message started a turn"
    (entry,) = [e for e in sessions.list_sessions({"HOME": str(claude_home)}) if e.name == "fab-send-i"]
    assert entry.status == "idle" and entry.status_updated_at is not None
    assert "no turn began" not in waited.stdout
