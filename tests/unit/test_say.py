from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabrikito.base import statedir
from fabrikito.delivery import engine, say, seatlock
from fabrikito.team import teamfile


def test_crlf_becomes_lf_and_one_trailing_newline_from_stdin_is_dropped() -> None:
    assert say.prepare_text("a\r\nb\r\n", from_stdin=True) == "a\nb"
    assert say.prepare_text("a\n\n", from_stdin=True) == "a\n"
    assert say.prepare_text("a\n", from_stdin=False) == "a\n"


def test_the_label_is_its_own_paste_with_a_space() -> None:
    assert engine.label_for("em") == "[from em] "
    assert engine.label_for("live-test") == "[from live-test] "


def test_say_imports_no_heavy_modules() -> None:
    code = (
        "import sys; import fabrikito.cli, fabrikito.cli.commands, fabrikito.delivery.say, fabrikito.team.teamfile;"
        "heavy = {'psutil', 'asyncio', 'fabrikito.inbox.client', 'fabrikito.inbox.sessions', 'fabrikito.launch',"
        " 'fabrikito.offline', 'tomllib'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _team(tmp_path: Path) -> teamfile.Team:
    path = tmp_path / "team.toml"
    path.write_text('name = "t"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n')
    team = teamfile.load(path)
    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(seatlock.say_dir(team))
    return team


def test_one_say_at_a_time_and_a_held_lock_is_refused_after_the_timeout(tmp_path: Path) -> None:
    team = _team(tmp_path)
    lock = seatlock.say_dir(team) / "dev.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with (
            pytest.raises(seatlock.SeatRefusal, match=r"has not finished within 0\.5 seconds"),
            seatlock.seat_lock(team, "dev", timeout=0.5),
        ):
            pass
        assert time.monotonic() - started >= 0.5
    finally:
        holder.kill()
        holder.wait()
    with seatlock.seat_lock(team, "dev", timeout=0.5):  # released when its holder died
        pass


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("kind", ["fifo", "symlink", "hardlink"])
def test_a_lock_path_that_is_not_a_plain_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    team = _team(tmp_path)
    lock = seatlock.say_dir(team) / "dev.lock"
    other = tmp_path / "other"
    other.write_text("")
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "symlink":
        lock.symlink_to(other)
    else:
        os.link(other, lock)
    started = time.monotonic()
    with pytest.raises(seatlock.SeatRefusal, match="remove it"), seatlock.seat_lock(team, "dev", timeout=5):
        pass
    assert time.monotonic() - started < 1
