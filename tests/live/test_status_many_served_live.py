"""``status`` of many seats: served, every screen read through the command server's tmux control client
(written at once, read while ``/proc`` is read), it prints what it prints run by itself, and a pane whose
agent exited to a shell reads so at once, both ways.

The seats are replayed panes, as bench/bench_seats.py's: a screen recorded from Claude Code 2.1.316,
then a process named ``claude`` with a session registry entry.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from fabrikito.base.tmux import Server
from fabrikito.cli import serverctl
from fabrikito.delivery import seatpane
from fabrikito.team import teamfile

from .teamkit import clean_env, fabrikito, wait_for

pytestmark = pytest.mark.live

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "2.1.316"
SHOWN = ["inline-120x40-busy", "inline-120x40-typed-short-unsubmitted", "inline-120x40-bypass-dialog"]
#: The agent runs as a child of the pane's shell, which runs on once it ends (an agent exited to a shell).
SEAT = r"""cat "$1"; (mkdir -p "$CLAUDE_CONFIG_DIR/sessions"
printf '{"pid": %d, "version": "2.1.316", "sessionId": "s%d"}' $BASHPID $BASHPID \
  > "$CLAUDE_CONFIG_DIR/sessions/$BASHPID.json"; exec -a claude sleep 3600); exec sleep 3600"""


def statuses(team: Path, shim: Path) -> tuple[str, str]:
    """``status`` served and run by itself; each starts its tmux processes through a logging ``tmux``
    first on ``PATH``: served, the pane list and the screens go through the server's control client (no
    tmux process); by itself, both are tmux processes."""
    calls = shim / "calls"
    outs = []
    for env, tmux_processes in (({}, 0), ({"FABRIKITO_SERVER": "0"}, 2)):
        calls.write_text("")
        done = fabrikito("status", team=team, role=None, env={**env, "PATH": f"{shim}:{os.environ['PATH']}"})
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert len(calls.read_text().splitlines()) == tmux_processes, (env, calls.read_text())
        outs.append(done.stdout)
    return outs[0], outs[1]


def logging_tmux(folder: Path) -> Path:
    folder.mkdir()
    real = shutil.which("tmux")
    assert real is not None
    (folder / "tmux").write_text(f'#!/bin/sh\necho "$*" >> "{folder}/calls"\nexec {real} "$@"\n')
    (folder / "tmux").chmod(0o755)
    return folder


def test_status_of_many_seats_served_is_status_run_by_itself(tmux_server: Server, tmp_path: Path) -> None:
    count = 16
    path = tmp_path / "team" / "team.toml"
    path.parent.mkdir()
    seats = "".join(f'\n[[seat]]\nrole = "s{i:02d}"\nsession = "m-s{i:02d}"\n' for i in range(count))
    path.write_text(f'name = "many"\ntmux_socket = "{tmux_server.socket_name}"\n{seats}')
    team = teamfile.load(path)
    config = tmp_path / "claude-config"
    for i, seat in enumerate(team.seats):
        screen = SCREENS / f"{SHOWN[i % len(SHOWN)]}.ansi"
        tmux_server.run(
            "new-session", "-d", "-s", seat.session, "-x", "120", "-y", "40", "-e", f"CLAUDE_CONFIG_DIR={config}",
            "--", "bash", "-c", SEAT, "seat", str(screen),
        )  # fmt: skip
    wait_for(lambda: len(list((config / "sessions").glob("*.json"))) == count, 20, "every replayed agent")
    time.sleep(0.5)  # the screens drawn
    shim = logging_tmux(tmp_path / "bin")
    assert serverctl.ensure_running(team, env=clean_env())
    try:
        served, direct = statuses(path, shim)
        assert served == direct
        assert served.count("not running claude") == 0
        first = teamfile.load(path).seats[0]
        pane = tmux_server.run("list-panes", "-t", f"={first.session}", "-F", "#{pane_pid}").split()[0]
        agent = seatpane.foreground_agent(int(pane))
        assert agent is not None
        os.kill(agent.pid, signal.SIGKILL)  # the agent exits; its pane's shell runs on
        wait_for(lambda: seatpane.foreground_agent(int(pane)) is None, 10, "the agent gone")
        served, direct = statuses(path, shim)
        assert served == direct
        row = next(line for line in served.splitlines() if line.startswith(first.role + " "))
        assert "not running claude" in row
        assert serverctl.running_pid(path) is not None  # the server ran them, and runs still
    finally:
        serverctl.stop(team)
