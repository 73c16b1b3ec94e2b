"""The watcher as a process and its commands, with the team's tmux server down (every seat is gone):
``up``'s start of it, ``status``'s line, ``events``, ``notify --test``, a restart that tells nothing twice,
a damaged events file set aside, and ``down`` ending it."""

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

from fabrikito.launch import watcherproc
from fabrikito.log import events
from fabrikito.team import teamfile


@pytest.fixture
def team_path(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "team.toml"
    script = tmp_path / "notify.sh"
    script.write_text(f'#!/bin/sh\n{{ cat; echo; }} >> "{tmp_path / "told"}"\n')
    script.chmod(0o755)
    path.write_text(
        f'name = "wc"\ntmux_socket = "fab-none-{secrets.token_hex(4)}"\nnotify = ["./notify.sh"]\n'
        '[watch]\nround = 0.1\n[[seat]]\nrole = "dev"\nsession = "wc-dev"\n[[seat]]\nrole = "qa"\nsession = "wc-qa"\n',
        encoding="utf-8",
    )
    yield path
    watcherproc.stop(teamfile.load(path))


def run(team: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "TEAM_ROLE", "FABRIKITO"))}
    env["FABRIKITO_SERVER"] = "0"
    command, *rest = args
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", command, "--team", str(team), *rest],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def gone_events(team: Path) -> list[events.Event]:
    return [e for e in events.read(team.parent / ".state" / "wc" / events.NAME) if e.kind == "gone"]


def wait(check: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_watcher_tells_each_gone_seat_once_across_a_restart_and_down_ends_it(team_path: Path) -> None:
    team = teamfile.load(team_path)
    state = team_path.parent / ".state" / "wc"
    state.mkdir(parents=True, mode=0o700)
    (state / events.NAME).write_bytes(b"\x00\x01 not the events file\n")
    assert watcherproc.ensure_running(team)
    wait(lambda: len(gone_events(team_path)) == 2)
    assert any(p.name.startswith(events.NAME + ".damaged-") for p in state.iterdir())
    assert "set aside" in (state / watcherproc.ERR_NAME).read_text()
    wait(lambda: (team_path.parent / "told").exists() and len((team_path.parent / "told").read_text().split()) > 0)
    status = run(team_path, "status")
    pid = watcherproc.info(team).pid
    assert f"watcher: running (pid {pid})" in status.stdout, status.stdout
    assert json.loads(run(team_path, "status", "--json").stdout)["watcher"] == {
        "running": True,
        "pid": pid,
        "stale": False,
    }

    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait(lambda: not watcherproc.info(team).running)
    assert "watcher: not running" in run(team_path, "status").stdout
    assert watcherproc.ensure_running(team)
    time.sleep(1.5)  # many rounds of the new watcher
    assert len(gone_events(team_path)) == 2  # still true, already told: not told again
    told = [json.loads(line) for line in (team_path.parent / "told").read_text().splitlines() if line.strip()]
    assert sorted(t["seat"] for t in told) == ["dev", "qa"]

    shown = run(team_path, "events")
    assert shown.returncode == 0 and shown.stdout.count("gone  OPEN") == 2, shown.stdout
    as_json = json.loads(run(team_path, "events", "--json", "--since", "10m").stdout)
    assert [e["kind"] for e in as_json["events"]] == ["gone", "gone"]
    assert run(team_path, "events", "--open").stdout.count("  gone  OPEN") == 2
    down = run(team_path, "down")
    assert "stopped the watcher" in down.stdout, down.stdout
    assert not watcherproc.info(team).running


def test_notify_test_runs_the_command_and_says_how_it_went(team_path: Path, tmp_path: Path) -> None:
    done = run(team_path, "notify", "--test")
    assert done.returncode == 0 and "exit status 0" in done.stdout, done.stdout + done.stderr
    got = json.loads((tmp_path / "told").read_text().splitlines()[0])
    assert got["seat"] == "notify-test" and got["team"] == "wc"
    (tmp_path / "notify.sh").write_text("#!/bin/sh\necho broken >&2\nexit 7\n")
    failed = run(team_path, "notify", "--test")
    assert failed.returncode == 1 and "status 7" in failed.stdout and "broken" in failed.stdout
    team_path.write_text(team_path.read_text().replace('notify = ["./notify.sh"]\n', ""))
    none = run(team_path, "notify", "--test")
    assert none.returncode == 2 and "has no 'notify'" in none.stderr


def test_watch_once_prints_a_frame_and_says_when_no_watcher_runs(team_path: Path) -> None:
    frame = run(team_path, "watch", "--once")
    assert frame.returncode == 0 and "watcher: NOT RUNNING" in frame.stdout, frame.stdout
    assert watcherproc.ensure_running(teamfile.load(team_path))
    wait(lambda: "dev gone" in run(team_path, "watch", "--once").stdout)
    shown = run(team_path, "watch", "--once").stdout
    assert "NEEDS YOU (2)" in shown and "qa gone" in shown, shown


def test_the_watcher_ends_once_its_team_file_or_its_state_folder_is_gone_and_says_why(team_path: Path) -> None:
    team = teamfile.load(team_path)
    assert watcherproc.ensure_running(team)
    wait(lambda: len(gone_events(team_path)) == 2)
    moved = team_path.with_name("elsewhere.toml")
    team_path.rename(moved)
    wait(lambda: not watcherproc.info(team).running)
    err = (team.state_dir / watcherproc.ERR_NAME).read_text()
    assert f"the team file {team_path} is gone: the watcher ends" in err, err
    moved.rename(team_path)
    assert watcherproc.ensure_running(team)
    pid = watcherproc.info(team).pid
    assert pid is not None
    # Its state folder taken away under it (the team's files moved or deleted by hand): it ends, and does not
    # make the folder again. Moved in one step, as a removal that walks the folder races the watcher's writes.
    import shutil

    away = team.state_dir.with_name("wc-away")
    team.state_dir.rename(away)
    wait(lambda: not _alive(pid))
    assert not team.state_dir.exists()
    shutil.rmtree(away)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its parent has ended)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_the_watcher_ends_cleanly_on_sighup_and_sigterm(team_path: Path, signum: int) -> None:
    team = teamfile.load(team_path)
    assert watcherproc.ensure_running(team)
    wait(lambda: len(gone_events(team_path)) == 2)
    pid = watcherproc.info(team).pid
    assert pid is not None
    os.kill(pid, signum)
    wait(lambda: not watcherproc.info(team).running)
    assert "Traceback" not in (team.state_dir / watcherproc.ERR_NAME).read_text()


def test_a_changed_team_file_is_read_again_and_a_broken_one_is_said_and_not_taken(team_path: Path) -> None:
    team = teamfile.load(team_path)
    assert watcherproc.ensure_running(team)
    wait(lambda: len(gone_events(team_path)) == 2)
    told = team_path.parent / "told"
    wait(lambda: told.exists() and len(told.read_text().splitlines()) >= 2)
    err = team.state_dir / watcherproc.ERR_NAME
    good = team_path.read_text()
    team_path.write_text(good.replace("[watch]", "[watch\n"))  # not TOML
    wait(lambda: "the changed team file was not taken" in err.read_text())
    # A new seat in the file, and notify now writes elsewhere: the new seat's gone event goes to the new file.
    other = team_path.parent / "notify2.sh"
    other.write_text(f'#!/bin/sh\n{{ cat; echo; }} >> "{team_path.parent / "told2"}"\n')
    other.chmod(0o755)
    team_path.write_text(
        good.replace('["./notify.sh"]', '["./notify2.sh"]') + '[[seat]]\nrole = "ops"\nsession = "wc-ops"\n'
    )
    wait(lambda: "the team file changed: read again" in err.read_text())
    wait(lambda: (team_path.parent / "told2").exists() and "ops" in (team_path.parent / "told2").read_text())
    assert "ops" not in told.read_text()
    assert sorted(e.seat for e in gone_events(team_path)) == ["dev", "ops", "qa"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_events_follow_ends_on_a_signal_with_status_0_after_whole_lines(team_path: Path, signum: int) -> None:
    team = teamfile.load(team_path)
    assert watcherproc.ensure_running(team)
    wait(lambda: len(gone_events(team_path)) == 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "TEAM_ROLE", "FABRIKITO"))}
    follower = subprocess.Popen(
        [sys.executable, "-m", "fabrikito", "events", "--follow", "--team", str(team_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert follower.stdout is not None
    first = follower.stdout.readline()  # the history is printed: it is following now
    assert "gone  OPEN" in first, first
    follower.send_signal(signum)
    out, err = follower.communicate(timeout=20)
    assert follower.returncode == 0, (follower.returncode, err)
    assert "Traceback" not in err and (out == "" or out.endswith("\n")), (out, err)
