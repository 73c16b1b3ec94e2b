"""Who is at the other end of an inbox connection, told from real processes in real tmux panes.

The Claude Code session itself (a ``claude`` process with its registry entry) is the live tier's
(tests/live/test_inbox_live.py); here: a process in a seat's pane and below it, a pane that is no seat's,
a pane of another tmux server named like a seat, a process that writes a registry entry for itself
without being Claude Code, and a process that is gone.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fabrikito.base import procs
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.delivery import seatpane
from fabrikito.inbox.peer import UNVERIFIED_KEY, identify
from fabrikito.team import teamfile


@pytest.fixture
def team(tmp_path: Path) -> Iterator[teamfile.Team]:
    path = tmp_path / "team.toml"
    path.write_text(
        f'name = "t"\ntmux_socket = "fab-peer-{secrets.token_hex(4)}"\n'
        '[[seat]]\nrole = "em"\nsession = "t-em"\npermission_mode = "acceptEdits"\n'
        '[[seat]]\nrole = "cx"\nsession = "t-cx"\nagent = "codex"\n',
        encoding="utf-8",
    )
    loaded = teamfile.load(path)
    yield loaded
    with contextlib.suppress(TmuxError):
        loaded.server().kill_server()


def _panes(team: teamfile.Team) -> Callable[[bool], list[seatpane.PaneRow]]:
    return lambda fresh: seatpane.list_panes(team.server())


def _child_of(pid: int) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        kids = procs.children_of(pid)
        if kids:
            return kids[0]
        time.sleep(0.02)
    raise AssertionError(f"process {pid} started no child")


def _pane_pid(server: Server, session: str, argv: list[str], cwd: Path) -> int:
    pane = server.new_session(session, argv, cwd=str(cwd))
    return int(server.display(pane, "#{pane_pid}"))


def test_a_process_in_a_seats_pane_and_one_below_it_are_that_seat(team: teamfile.Team, tmp_path: Path) -> None:
    pane_pid = _pane_pid(team.server(), "t-em", ["sh", "-c", "sleep 60; :"], tmp_path)
    below = _child_of(pane_pid)  # the sleep the pane's shell started
    for pid in (pane_pid, below):
        peer = identify(pid, team, _panes(team))
        assert (peer.role, peer.key, peer.sender(team), peer.is_session) == ("em", "seat:em", "em", False)
        assert peer.what.startswith("seat em: process ")


def test_a_pane_that_is_no_seats_is_unverified(team: teamfile.Team, tmp_path: Path) -> None:
    pid = _pane_pid(team.server(), "owners-shell", ["sleep", "60"], tmp_path)
    peer = identify(pid, team, _panes(team))
    assert (peer.role, peer.key, peer.sender(team)) == (None, UNVERIFIED_KEY, "unverified-sender")


def test_a_pane_of_another_tmux_server_named_like_a_seat_is_unverified(team: teamfile.Team, tmp_path: Path) -> None:
    other = Server(socket_name=f"fab-peer-other-{secrets.token_hex(4)}")
    try:
        pid = _pane_pid(other, "t-em", ["sleep", "60"], tmp_path)
        team.server().new_session("keep", ["sleep", "60"], cwd=str(tmp_path))  # the team's server runs too
        listed: list[bool] = []

        def panes(fresh: bool) -> list[seatpane.PaneRow]:
            listed.append(fresh)
            return seatpane.list_panes(team.server())

        peer = identify(pid, team, panes)
        assert (peer.role, peer.sender(team)) == (None, "unverified-sender")
        assert listed == [False, True]  # a tmux server the listing did not know: listed again, still not ours
    finally:
        with contextlib.suppress(TmuxError):
            other.kill_server()


@pytest.mark.parametrize("server_known", [False, True])
def test_a_seat_started_after_the_listing_was_kept_is_seen(
    team: teamfile.Team, tmp_path: Path, server_known: bool
) -> None:
    """The kept listing is from before the seat's pane: empty (no server yet), or of the same server's other
    panes (the inbox saw another seat a moment ago); either way the walk lists the panes again."""
    kept: list[seatpane.PaneRow] = []
    if server_known:
        _pane_pid(team.server(), "t-em", ["sleep", "60"], tmp_path)
        kept = seatpane.list_panes(team.server())
    pid = _pane_pid(team.server(), "t-cx", ["sleep", "60"], tmp_path)
    peer = identify(pid, team, lambda fresh: seatpane.list_panes(team.server()) if fresh else kept)
    assert peer.role == "cx"


def test_a_registry_entry_is_no_evidence_from_a_process_that_is_not_claude_code(
    team: teamfile.Team, tmp_path: Path
) -> None:
    """A script that writes ``sessions/<its pid>.json`` for itself (name, start time and all) is no session."""
    home = tmp_path / "home"
    (home / ".claude" / "sessions").mkdir(parents=True)
    script = (
        "import json, os, sys, time\n"
        "from fabrikito.base import procs\n"
        "pid = os.getpid()\n"
        "entry = {'pid': pid, 'procStart': str(procs.info(pid).start_ticks), 'name': 'fab-em',\n"
        "         'messagingSocketPath': '/tmp/x.sock'}\n"
        "open(os.path.join(sys.argv[1], f'{pid}.json'), 'w').write(json.dumps(entry))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {"HOME": str(home), "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(home / ".claude" / "sessions")], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert json.loads((home / ".claude" / "sessions" / f"{proc.pid}.json").read_text())["name"] == "fab-em"
        peer = identify(proc.pid, team, lambda fresh: [])
        assert (peer.session, peer.is_session, peer.sender(team)) == (None, False, "unverified-sender")
    finally:
        proc.kill()
        proc.wait()


def test_no_pid_or_a_process_gone_is_unverified(team: teamfile.Team) -> None:
    assert identify(None, team, lambda fresh: []).sender(team) == "unverified-sender"
    gone = subprocess.Popen(["true"])
    gone.wait()
    peer = identify(gone.pid, team, lambda fresh: [])
    assert peer.sender(team) == "unverified-sender" and "could not be read" in peer.what
