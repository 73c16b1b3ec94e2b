"""What a test starts gets a user's environment, never this machine's (tests/userenv.py).

Each case starts something the way the kits start it (a command, the command
server, the tmux server and a pane, a seat's command line) and reads the
environment it really got from ``/proc``: nothing but the allow-list, the test
runner's own variable, and what the kit sets on purpose.  The last case shows
the check catching a variable that does leak.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests import userenv
from tests.live import teamkit
from tests.unit import serverkit

from fabrikito.cli import serverctl
from fabrikito.offline import claude_setup, seatkit
from fabrikito.team import teamfile

TMUX_OWN = frozenset(
    {"TMUX", "TMUX_PANE", "PWD", "SHELL", "TERM_PROGRAM", "TERM_PROGRAM_VERSION"}
)  # tmux sets them in every pane, a user's too


def test_the_tests_run_in_a_users_environment() -> None:
    assert userenv.leaks(os.environ) == []
    assert userenv.leaks(dict.fromkeys(userenv._c_environ(), "")) == []  # what a program started inherits
    for name in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "IS_SANDBOX", "CI"):
        assert name not in os.environ
    assert "PATH" in os.environ and "HOME" in os.environ


def test_the_kits_build_commands_an_environment_from_the_allow_list() -> None:
    on_purpose = frozenset({"PYTHONPATH", "TEAM_ROLE", "FABRIKITO_SERVER"})
    assert userenv.leaks(serverkit.environ(FABRIKITO_SERVER="0"), on_purpose) == []
    assert userenv.leaks(teamkit.clean_env({"TEAM_ROLE": "live-test"}), on_purpose) == []
    assert "NODE_EXTRA_CA_CERTS" not in teamkit.clean_env() or "NODE_EXTRA_CA_CERTS" in userenv.ALLOWED


def test_a_command_the_command_server_and_the_tmux_server_get_no_more(team: teamfile.Team) -> None:
    """The command server is started in this process, without an environment of its own (it inherits
    this one); the tmux server by the fixture's first session; a command by the kit."""
    assert serverctl.ensure_running(team)
    server = serverctl.running_pid(team.path)
    assert server is not None
    assert userenv.leaks(userenv.environ_of(server)) == []
    tmux = int(team.server().run("display-message", "-p", "#{pid}"))
    assert userenv.leaks(userenv.environ_of(tmux)) == []
    pane = int(team.server().run("display-message", "-p", "-t", "acme-em", "#{pane_pid}"))
    assert userenv.leaks(userenv.environ_of(pane), TMUX_OWN) == []
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabrikito", "say", "em"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=team.base_dir,
        env=serverkit.environ(),
    )
    try:
        assert userenv.leaks(userenv.environ_of(proc.pid), frozenset({"PYTHONPATH"})) == []
    finally:
        proc.communicate(b"x\n", timeout=30)


def test_a_seat_gets_its_own_variables_and_a_users(team: teamfile.Team, tmp_path: Path) -> None:
    """A seat as the live kit starts one (seatkit.start_seat), with a stand-in for the agent's binary."""
    binary = tmp_path / "agent"
    binary.write_text("#!/bin/sh\nexec sleep 60\n")
    binary.chmod(0o755)
    home = claude_setup.make_home(tmp_path / "home")
    seat = seatkit.start_seat(
        team.server(), binary=binary, role="dev", home=home, cwd=tmp_path / "work", base_url="http://x", wait=False
    )
    own = claude_setup.seat_env(home=home, base_url="http://x")
    assert userenv.leaks(userenv.environ_of(seat.pid), frozenset(own) | TMUX_OWN) == []


def test_a_leak_is_caught() -> None:
    proc = subprocess.Popen(["sleep", "30"], env=userenv.user_env(PYTHONUNBUFFERED="1", IS_SANDBOX="yes"))
    try:
        # Popen can return before the child's exec is visible in /proc (seen in CI: the environment read was
        # still the parent's): wait until the process is sleep itself.
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/cmdline").read_bytes() != b"sleep\x0030\x00" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert userenv.leaks(userenv.environ_of(proc.pid)) == ["IS_SANDBOX", "PYTHONUNBUFFERED"]
    finally:
        proc.kill()
        proc.wait()
