"""Many seats' screens in few tmux calls: a look chain stays under tmux's command size."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from fabrikito.base.tmux import Server
from fabrikito.delivery import seatpane


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(socket_name=f"fab-chain-{secrets.token_hex(4)}", timeout=20.0)
    yield srv
    try:
        srv.run("kill-server")
    except Exception:  # noqa: S110 -- already gone
        pass


def test_a_hundred_and_thirty_panes_in_three_calls(server: Server) -> None:
    for i in range(130):
        server.run(
            "new-session",
            "-d",
            "-s",
            f"c{i:03d}",
            "-x",
            "80",
            "-y",
            "10",
            "--",
            "sh",
            "-c",
            f"echo pane-{i}; sleep 600",
        )
    ids = [row.pane_id for row in seatpane.list_panes(server)]
    assert len(ids) == 130
    single = seatpane.start_looks(server, ids[:50])
    assert len(single.chains) == 1  # fifty seats: one call, as status's two-call goal needs
    looking = seatpane.start_looks(server, ids)
    assert len(looking.chains) == 3
    assert all(sum(len(a) + 1 for a in args) < 16_000 for _, args, _ in looking.chains)
    looks = looking.looks()
    assert sorted(looks) == sorted(ids)
    by_name = {row.pane_id: row.session for row in seatpane.list_panes(server)}
    for pane, look in looks.items():
        assert f"pane-{int(by_name[pane][1:])}" in look.snapshot.ansi, pane


def test_no_panes_no_call(server: Server) -> None:
    looking = seatpane.start_looks(server, [])
    assert (looking.chains, looking.looks()) == ([], {})
