"""What several unit test modules share: a private tmux server."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server


@pytest.fixture
def server() -> Iterator[Server]:
    """A tmux server of the test's own (``-L fab-unit-<random>``), killed at the end if it ran."""
    srv = Server(socket_name=f"fab-unit-{secrets.token_hex(4)}")
    yield srv
    try:
        srv.kill_server()
    except TmuxError:
        pass
