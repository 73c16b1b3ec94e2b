"""``say --queue``, ``queue``, ``status`` and ``down`` from the command line, with the team's tmux server down.

No tmux server runs here (the team names a private socket nobody started), so
every seat is down: a message waits, and a real worker process is started,
looked at, killed and stopped.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.delivery import queue, worker, workerstate
from fabrikito.team import teamfile


@pytest.fixture
def team_path(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "team.toml"
    path.write_text(
        f'name = "cli"\ntmux_socket = "fab-none-{secrets.token_hex(4)}"\n'
        '[[seat]]\nrole = "dev"\nsession = "cli-dev"\n[[seat]]\nrole = "qa"\nsession = "cli-qa"\n',
        encoding="utf-8",
    )
    yield path
    worker.stop(teamfile.load(path), timeout=10)


def run(team: Path, *args: str, role: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "TEAM_ROLE", "FABRIKITO"))}
    if role is not None:
        env["TEAM_ROLE"] = role
    command, *rest = args
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", command, "--team", str(team), *rest],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def wait_until(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_message_to_a_down_seat_is_queued_and_the_worker_is_started_shown_and_stopped(team_path: Path) -> None:
    team = teamfile.load(team_path)
    done = run(team_path, "say", "--queue", "dev", "when you are back", role="qa")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("queued dev-") and "the seat is down" in done.stdout, done.stdout
    assert wait_until(lambda: workerstate.read_info(team).running, 10)
    listing = json.loads(run(team_path, "queue", "--json").stdout)
    assert listing["worker"]["running"] is True
    [msg] = listing["messages"]
    assert (msg["to"], msg["from"], msg["state"]) == ("dev", "qa", "pending")
    assert 1700 < msg["expires_in_seconds"] <= 1800
    assert wait_until(lambda: "not running" in run(team_path, "queue", "dev").stdout, 5)  # why it waits
    status = run(team_path, "status")
    assert "delivery worker: running" in status.stdout
    assert "queued for dev: 1 waiting" in status.stdout, status.stdout

    first = workerstate.read_info(team).pid
    assert first is not None
    os.kill(first, signal.SIGKILL)  # the worker dies; the next say --queue starts another
    assert wait_until(lambda: not workerstate.read_info(team).running, 5)
    again = run(team_path, "say", "--queue", "--expire", "90s", "dev", "second", role="qa")
    assert again.returncode == 0, again.stderr
    assert wait_until(lambda: workerstate.read_info(team).running, 10)
    assert workerstate.read_info(team).pid != first
    assert [m.text for m in queue.scan(team).waiting("dev")] == ["when you are back", "second"]

    down = run(team_path, "down")
    assert "stopped the delivery worker" in down.stdout, down.stdout + down.stderr
    assert not workerstate.read_info(team).running
    assert "delivery worker: not running" in run(team_path, "status").stdout
    assert len(queue.scan(team).waiting("dev")) == 2  # down keeps what waits


def test_refusals_about_the_message_or_the_sender_queue_nothing(team_path: Path) -> None:
    team = teamfile.load(team_path)
    empty = run(team_path, "say", "--queue", "dev", "   ", role="qa")
    assert empty.returncode == 3 and "empty" in empty.stderr
    unknown = run(team_path, "say", "--queue", "nosuch", "hi", role="qa")
    assert unknown.returncode == 2 and "no seat 'nosuch'" in unknown.stderr
    bad_role = run(team_path, "say", "--queue", "dev", "hi", role="launcher")
    assert bad_role.returncode == 3
    to_self = run(team_path, "say", "--queue", "qa", "hi", role="qa")
    assert to_self.returncode == 3
    assert queue.scan(team).messages == {}
    assert not workerstate.read_info(team).running


def test_expire_is_checked_and_goes_with_queue(team_path: Path) -> None:
    alone = run(team_path, "say", "--expire", "10m", "dev", "hi", role="qa")
    assert alone.returncode == 2 and "--expire goes with --queue" in alone.stderr
    too_long = run(team_path, "say", "--queue", "--expire", "25h", "dev", "hi", role="qa")
    assert too_long.returncode == 2 and "24 hours" in too_long.stderr
    without = run(team_path, "say", "dev", "hi", role="qa")
    assert without.returncode == 3 and "not running" in without.stderr  # plain say still refuses


def test_queue_drop_and_help(team_path: Path) -> None:
    team = teamfile.load(team_path)
    msg = queue.enqueue(team, "dev", "owner", "take me back", expire=60, reason="test")
    dropped = run(team_path, "queue", "drop", msg.id)
    assert dropped.returncode == 0 and f"dropped {msg.id}" in dropped.stdout
    missing = run(team_path, "queue", "drop", msg.id)
    assert missing.returncode == 2 and "no message" in missing.stderr
    helptext = subprocess.run(
        [sys.executable, "-m", "fabrikito", "say", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "queued is not delivered" in " ".join(helptext.split())
