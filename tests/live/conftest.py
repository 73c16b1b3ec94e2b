"""Fixtures for the live tier: real Claude Code seats in private tmux servers, offline.

* ``tmux_server``: a private ``-L fab-<random>`` server per test, killed in a
  finalizer (never the default server).
* ``claude_home``: an isolated HOME in ``tmp_path`` (onboarding, API key and
  bypass prompt pre-answered; trust is added per working directory).
* ``standin``: the Messages API stand-in, started and stopped per test.
* ``seat_factory``: starts seats; every Claude process it started, or that
  registered under the test's HOME, is stopped at the end.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline import claude_setup, seatkit
from fabrikito.offline.seatkit import SeatFactory
from fabrikito.offline.standin import StandIn


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    return claude_setup.ensure_claude()


@pytest.fixture
def tmux_server() -> Iterator[Server]:
    server = Server(socket_name=f"fab-{secrets.token_hex(4)}", timeout=10.0)
    assert not server.is_default
    yield server
    try:
        server.kill_server()
    except TmuxError:
        pass  # no session was ever started, or it is gone already


@pytest.fixture
def claude_home(tmp_path: Path) -> Iterator[Path]:
    home = claude_setup.make_home(tmp_path / "home")
    yield home
    seatkit.stop_pids(seatkit.home_pids(home))


@pytest.fixture
def standin() -> Iterator[StandIn]:
    server = StandIn().start()
    yield server
    server.stop()


@pytest.fixture
def seat_factory(
    tmux_server: Server, claude_binary: Path, claude_home: Path, standin: StandIn, tmp_path: Path
) -> Iterator[SeatFactory]:
    factory = SeatFactory(tmux_server, claude_binary, claude_home, standin, tmp_path)
    yield factory
    factory.close()
