"""Fixtures for the live tier: real Claude Code seats in private tmux servers, offline.

* ``claude_binary``: the real Claude Code, once for each of :data:`LIVE_RELEASES`
  (the pinned 2.1.316 and the newest qualified release), so every live test
  that starts a seat runs on both.
* ``tmux_server``: a private ``-L fab-<random>`` server per test, killed in a
  finalizer (never the default server).
* ``claude_home``: an isolated HOME in ``tmp_path`` (onboarding, API key and
  bypass prompt pre-answered; trust is added per working directory).
* ``standin``: the Messages API stand-in, started and stopped per test.
* ``seat_factory``: starts seats; every Claude process it started, or that
  registered under the test's HOME, is stopped at the end.
"""

from __future__ import annotations

import fcntl
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import userenv

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline import claude_setup, seatkit
from fabrikito.offline.seatkit import SeatFactory
from fabrikito.offline.standin import StandIn
from fabrikito.screen.qualified import CLAUDE as QUALIFIED


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


#: The live tier runs on the pinned release and on the newest the package has qualified.
LIVE_RELEASES = sorted({claude_setup.CLAUDE_VERSION, max(QUALIFIED, key=_release_key)}, key=_release_key)
_CHOSEN = [r.strip() for r in userenv.setting("FABRIKITO_TEST_CLAUDE").split(",") if r.strip()]
if set(_CHOSEN) - set(LIVE_RELEASES):
    raise pytest.UsageError(f"FABRIKITO_TEST_CLAUDE names {_CHOSEN}: the live releases are {LIVE_RELEASES}")
LIVE_RELEASES = [r for r in LIVE_RELEASES if r in _CHOSEN] if _CHOSEN else LIVE_RELEASES


@pytest.fixture(scope="session", params=LIVE_RELEASES)
def claude_binary(request: pytest.FixtureRequest) -> Path:
    release = str(request.param)
    tools = claude_setup.tools_dir_for(release)
    tools.parent.mkdir(parents=True, exist_ok=True)
    with open(tools.parent / f".{tools.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel workers (pytest-xdist): one installs, the others wait
        return claude_setup.ensure_claude(version=release, env=userenv.tooling_env())  # npm: the machine's network


@pytest.fixture
def tmux_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    server = Server(socket_name=f"fab-{secrets.token_hex(4)}", timeout=10.0)
    assert not server.is_default
    yield server
    release = getattr(getattr(request.node, "callspec", None), "params", {}).get("tmux_release")
    try:
        version = server.run("display-message", "-p", "#{version}").strip()
    except TmuxError:
        version = None  # no session was ever started, or it is gone already
    if release is not None and version is not None:
        assert version == release, f"the test's tmux server ran tmux {version}, not {release}"
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
