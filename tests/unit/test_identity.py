from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.base.errors import TmuxError
from fabrikito.delivery.identity import IdentityRefused, check_team_role, sender_from_ancestry
from fabrikito.delivery.seatpane import PaneRow
from fabrikito.team import teamfile


@pytest.fixture
def team(tmp_path: Path) -> teamfile.Team:
    path = tmp_path / "team.toml"
    path.write_text('name = "t"\n[[seat]]\nrole = "em"\nsession = "t-em"\n[[seat]]\nrole = "dev"\nsession = "t-dev"\n')
    return teamfile.load(path)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env={"TEAM_ROLE": "qa"})
    # Popen returns once the child's exec has closed its descriptors, a moment before the kernel has laid out
    # the new environment: until then /proc shows none (a parallel run read it so).
    deadline = time.monotonic() + 10
    while b"TEAM_ROLE=qa" not in Path(f"/proc/{proc.pid}/environ").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def row(pid: int, session: str, server_pid: int = 1) -> PaneRow:
    return PaneRow(pane_id="%1", pane_pid=pid, session=session, dead=False, server_pid=server_pid, window_id="@1")


def test_team_role_must_be_a_role_or_live_test(team: teamfile.Team) -> None:
    assert check_team_role(team, "dev", default_server=True) == "dev"
    assert check_team_role(team, "live-test", default_server=False) == "live-test"
    for bad in ("owner", "launcher", "qa", "em-2", "DEV"):
        with pytest.raises(IdentityRefused):
            check_team_role(team, bad, default_server=False)


def test_live_test_is_refused_on_the_default_server(team: teamfile.Team) -> None:
    with pytest.raises(IdentityRefused, match="default tmux server"):
        check_team_role(team, "live-test", default_server=True)


def test_a_pane_among_the_ancestors_names_the_seat(team: teamfile.Team) -> None:
    assert sender_from_ancestry(team, [row(os.getppid(), "t-dev")]) == "dev"


def test_no_pane_among_the_ancestors_is_the_owner(team: teamfile.Team) -> None:
    assert sender_from_ancestry(team, [row(999_999_999, "t-dev")]) == "owner"


def test_no_pane_list_is_refused(team: teamfile.Team) -> None:
    with pytest.raises(IdentityRefused, match="could not list") as info:
        sender_from_ancestry(team, None)
    assert info.value.log_sender == "?"


def test_another_teams_seat_is_refused(team: teamfile.Team, child: subprocess.Popen[bytes]) -> None:
    with pytest.raises(IdentityRefused, match="seat of"):
        sender_from_ancestry(team, [row(child.pid, "other-qa")], start_pid=child.pid)


def test_a_non_seat_pane_of_the_same_server_is_the_owner(team: teamfile.Team) -> None:
    assert sender_from_ancestry(team, [row(os.getpid(), "scratch")]) == "owner"


def test_an_unreadable_process_is_refused(team: teamfile.Team) -> None:
    with pytest.raises(IdentityRefused, match="could not be read"):
        sender_from_ancestry(team, [], start_pid=999_999_999)


def test_a_walk_that_does_not_end_is_refused(team: teamfile.Team) -> None:
    with pytest.raises(IdentityRefused, match="stopped at 2 processes"):
        sender_from_ancestry(team, [], max_walk=2)


def test_another_tmux_server_among_the_ancestors_is_refused(team: teamfile.Team, tmp_path: Path) -> None:
    import secrets

    from fabrikito.base.tmux import Server

    other = Server(socket_name=f"fab-id-{secrets.token_hex(4)}")
    out = tmp_path / "out"
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from fabrikito.team import teamfile\n"
        "from fabrikito.delivery.identity import sender_from_ancestry, IdentityRefused\n"
        "team = teamfile.load(sys.argv[2])\n"
        "try:\n    r = sender_from_ancestry(team, [])\nexcept IdentityRefused as e:\n    r = 'refused: ' + e.message\n"
        "import os; open(sys.argv[3] + '.tmp', 'w').write(r); os.rename(sys.argv[3] + '.tmp', sys.argv[3])\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    try:
        other.new_session("s", [sys.executable, "-c", script, src, str(team.path), str(out)], cwd=str(tmp_path))
        import time

        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert out.read_text().startswith("refused: this runs inside a pane of another tmux server")
    finally:
        with contextlib.suppress(TmuxError):
            other.kill_server()
