"""``fabrikito watch`` in a tmux pane, read with capture-pane as a person would see it: what needs the
owner on top, its keys flush and attach (each asking first), too small a terminal said so, and the
terminal left as it was after Ctrl-C and SIGTERM."""

from __future__ import annotations

import secrets
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline.seatkit import SeatFactory

from .teamkit import REPO, clean_env, say_cut_between_pastes, wait_for
from .test_watch_live import start_watcher, wait_event, watched, write_watched_team

pytestmark = pytest.mark.live
__all__ = ["watched"]  # the fixture, used by name


@pytest.fixture
def viewer() -> Iterator[Server]:
    """A tmux server of its own for the terminal the person runs watch in."""
    server = Server(socket_name=f"fab-view-{secrets.token_hex(4)}", timeout=10.0)
    yield server
    try:
        server.kill_server()
    except TmuxError:
        pass


def run_watch(viewer: Server, team: Path, tmp_path: Path, name: str, *, width: int = 80, height: int = 24) -> str:
    """``fabrikito watch`` in a new pane; after it ends, the terminal's modes are written to ``name``.stty."""
    env = clean_env({"TERM": "tmux-256color"})
    env.pop("TMUX", None)
    command = (  # the shell outlives a Ctrl-C (a handler, not an ignore: watch gets the signal as usual)
        "trap true INT; "
        f"{shlex.quote(sys.executable)} -m fabrikito watch --team {shlex.quote(str(team))}; "
        f"stty -a > {shlex.quote(str(tmp_path / (name + '.stty')))}; echo watch-ended; sleep 60"
    )
    return viewer.new_session(name, ["sh", "-c", command], cwd=str(REPO), width=width, height=height, env=env)


def shows(viewer: Server, pane: str, *texts: str) -> bool:
    screen = viewer.capture(pane)
    return all(t in screen for t in texts)


def test_watch_shows_what_needs_you_and_its_keys_flush_and_attach(
    seat_factory: SeatFactory, tmux_server: Server, viewer: Server, tmp_path: Path, watched: list[Path]
) -> None:
    """The owner attached to the team's server runs watch in a session of its own there; the viewer's pane
    is the owner's terminal (a tmux client of the team's server), read as the owner sees it."""
    dev = seat_factory.start("dev")
    team = write_watched_team(tmp_path / "team" / "team.toml", tmux_server, [dev], tmp_path / "n.jsonl", box_after=1)
    watched.append(team)
    start_watcher(team)
    run_watch(tmux_server, team, tmp_path, "view")
    env = clean_env({"TERM": "xterm-256color"})
    attach = f"tmux -L {tmux_server.socket_name} attach -t view; echo client-ended $?; sleep 30"
    client = ["sh", "-c", attach]
    pane = viewer.new_session("term", client, cwd=str(REPO), width=80, height=24, env=env)
    wait_for(
        lambda: shows(viewer, pane, "NEEDS YOU: nothing", "dev", "idle"), 20, "the view", lambda: viewer.capture(pane)
    )
    # dev's row is chosen: its release and restarts are on the line over the keys (80 columns hold no more)
    assert shows(viewer, pane, "dev: release 2.1.", "restarted 0 times", "keys: up/down"), viewer.capture(pane)

    # say killed between its two pastes leaves its label in dev's box: the view puts it on top
    say_cut_between_pastes(team, "dev", "a message cut in two", tmp_path)
    wait_event(team, "box-text", "dev")
    wait_for(lambda: shows(viewer, pane, "NEEDS YOU (1)", "dev box-text"), 10, "the item", lambda: viewer.capture(pane))
    viewer.send_keys(pane, "f")
    wait_for(lambda: shows(viewer, pane, "flush dev", "(y/n)"), 10, "the question", lambda: viewer.capture(pane))
    viewer.send_keys(pane, "y")
    wait_event(team, "box-text", "dev", "resolved")
    wait_for(lambda: shows(viewer, pane, "NEEDS YOU: nothing"), 15, "the item to clear", lambda: viewer.capture(pane))

    # a, on dev's row, switches the owner's client to dev's session
    viewer.send_keys(pane, "a")
    wait_for(lambda: shows(viewer, pane, "attach to dev", "(y/n)"), 10, "the question", lambda: viewer.capture(pane))
    viewer.send_keys(pane, "y")
    wait_for(lambda: shows(viewer, pane, "─ dev ─", "❯"), 15, "dev's own screen", lambda: viewer.capture(pane))
    assert "NEEDS YOU" not in viewer.capture(pane)
    viewer.send_keys(pane, "C-b", "(")  # the owner goes back to the view's session
    wait_for(
        lambda: shows(viewer, pane, "NEEDS YOU", "switched to"), 15, "the view again", lambda: viewer.capture(pane)
    )

    # too small a terminal is said, not drawn; Ctrl-C leaves the terminal as it was
    viewer.resize_window(pane, 30, 8)
    wait_for(lambda: shows(viewer, pane, "terminal too small"), 10, "the size message", lambda: viewer.capture(pane))
    viewer.send_keys(pane, "C-c")
    stty = tmp_path / "view.stty"  # the shell makes the file before stty writes it: wait for the modes
    wait_for(lambda: stty.exists() and "icanon" in stty.read_text(), 10, "watch to end", lambda: viewer.capture(pane))
    modes = (tmp_path / "view.stty").read_text()
    assert " icanon" in modes and " echo " in modes and "-icanon" not in modes, modes


def test_watch_without_a_watcher_says_so_attaches_from_another_server_and_sigterm_restores_the_terminal(
    seat_factory: SeatFactory, tmux_server: Server, viewer: Server, tmp_path: Path, watched: list[Path]
) -> None:
    dev = seat_factory.start("dev")
    team = write_watched_team(tmp_path / "team" / "team.toml", tmux_server, [dev], tmp_path / "n.jsonl")
    pane = run_watch(viewer, team, tmp_path, "view2", width=60, height=16)
    wait_for(lambda: shows(viewer, pane, "watcher: NOT RUNNING"), 20, "the view", lambda: viewer.capture(pane))

    # once the watcher runs, a on dev's row attaches to it from this other tmux server, until detached
    watched.append(team)
    start_watcher(team)
    wait_for(lambda: shows(viewer, pane, "NEEDS YOU: nothing", "idle"), 20, "the seats", lambda: viewer.capture(pane))
    viewer.send_keys(pane, "a")
    wait_for(lambda: shows(viewer, pane, "attach to dev", "(y/n)"), 10, "the question", lambda: viewer.capture(pane))
    viewer.send_keys(pane, "y")
    wait_for(lambda: shows(viewer, pane, "─ dev ─", "❯"), 15, "dev's own screen", lambda: viewer.capture(pane))
    viewer.send_keys(pane, "C-b", "d")
    wait_for(lambda: shows(viewer, pane, "back from dev"), 15, "the view again", lambda: viewer.capture(pane))
    pid = viewer.display(pane, "#{pane_pid}")
    import subprocess

    children = subprocess.run(["pgrep", "-P", pid], capture_output=True, text=True, check=False).stdout.split()
    assert children, "watch's process"
    subprocess.run(["kill", "-TERM", *children], check=True)
    wait_for(lambda: shows(viewer, pane, "watch-ended"), 10, "watch to end", lambda: viewer.capture(pane))
    modes = (tmp_path / "view2.stty").read_text()
    assert " icanon" in modes and " echo " in modes and "-icanon" not in modes, modes
    assert viewer.display(pane, "#{alternate_on}") == "0"
