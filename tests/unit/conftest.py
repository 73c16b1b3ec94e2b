"""What several unit test modules share: a private tmux server; a team with its command server's
helpers (tests/unit/serverkit.py)."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.unit.serverkit import write_team

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.cli import serverctl
from fabrikito.team import teamfile


@pytest.fixture
def server() -> Iterator[Server]:
    """A tmux server of the test's own (``-L fab-unit-<random>``), killed at the end if it ran."""
    srv = Server(socket_name=f"fab-unit-{secrets.token_hex(4)}")
    yield srv
    try:
        srv.kill_server()
    except TmuxError:
        pass


@pytest.fixture
def team(tmp_path: Path) -> Iterator[teamfile.Team]:
    folder = tmp_path / "team"
    folder.mkdir()
    loaded = teamfile.load(write_team(folder, f"fab-cs-{secrets.token_hex(4)}"))
    server = loaded.server()
    server.new_session("acme-em", ["sleep", "300"], cwd="/")
    server.new_session("acme-sec", ["sleep", "300"], cwd="/")
    try:
        yield loaded
    finally:
        serverctl.stop(loaded)
        if server.alive():
            server.kill_server()


@pytest.fixture
def shim(tmp_path: Path) -> tuple[Path, Path]:
    """A ``tmux`` first on PATH that logs the pid of its caller's parent, then runs the real one."""
    folder, log = tmp_path / "bin", tmp_path / "tmux-calls"
    folder.mkdir()
    real = subprocess.run(["sh", "-c", "command -v tmux"], capture_output=True, text=True, check=True).stdout.strip()
    # A caller that has already exited (a call left running by a refused command) has no stat: "?".
    grandparent = "g=$(cut -d' ' -f4 /proc/$PPID/stat 2>/dev/null)"
    (folder / "tmux").write_text(
        f'#!/bin/sh\n{grandparent}\necho "$PPID ${{g:-?}}" >> "${{TMUX_CALLS:-{log}}}"\nexec {real} "$@"\n',
        encoding="utf-8",
    )
    (folder / "tmux").chmod(0o755)
    return folder, log
