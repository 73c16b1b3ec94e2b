"""The watcher of a team on two hosts, over a real OpenSSH server (:mod:`tests.live.remotekit`): the host's
own watcher watches its seat, and this machine's reads it; ``events`` and ``watch`` merge both, each event
named with its host; a host that stops answering is itself an event here; ``down`` stops both watchers.

Seat ``em`` runs here and ``api`` there, real Claude Code 2.1.316, offline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from tests import userenv

from fabrikito.base.tmux import Server
from fabrikito.offline import claude_setup
from fabrikito.offline.standin import StandIn

from .remotekit import OtherHost
from .teamkit import fabrikito, start_fabrikito, wait_for
from .test_remote_live import other_host, seats_of, write_team

pytestmark = pytest.mark.live

__all__ = ["other_host"]  # the fixture, shared with the other remote test


def merged(team: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    done = fabrikito("events", "--json", team=team, role=None, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return list(json.loads(done.stdout)["events"])


def has(found: list[dict[str, Any]], seat: str, kind: str, event: str, host: str | None) -> bool:
    return any((e["seat"], e["kind"], e["event"], e.get("host")) == (seat, kind, event, host) for e in found)


def test_each_host_watches_its_seats_and_the_team_machine_merges_them(
    other_host: OtherHost, tmux_server: Server, claude_home: Path, standin: StandIn, tmp_path: Path
) -> None:
    binary = claude_setup.ensure_claude(env=userenv.tooling_env())
    assert tmux_server.socket_name is not None
    other_host.tmux_sockets.append(tmux_server.socket_name)
    team = write_team(
        tmp_path / "team" / "team.toml",
        tmux_server,
        binary,
        standin,
        other_host,
        claude_home,
        remote="fk-remote",
        remote_binary=other_host.runnable(binary),
        roles=("em", "api"),
        more="\n[watch]\nround = 0.5\n",
    )
    env = {"FABRIKITO_SSH_CONFIG": str(other_host.config)}

    # -- up starts a watcher on each host ---------------------------------------------------------------
    up = fabrikito("up", team=team, role=None, env=env, timeout=400)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "watcher: started" in [line for line in up.stdout.splitlines() if not line.startswith("[")], up.stdout
    assert "[fk-remote] watcher: started" in up.stdout, up.stdout
    there = other_host.as_user(["sh", "-c", 'PATH="$HOME/.local/bin:$PATH" fabrikito _host watch live'])
    assert json.loads(there.stdout)["watcher"]["running"] is True

    # -- api's agent killed on its host: the host's watcher tells it, and this machine's events show it ----
    wait_for(lambda: seats_of(team, env)["api"]["pid"] is not None, 60, "api's agent pid", lambda: "")
    pid = seats_of(team, env)["api"]["pid"]
    other_host.as_user(["kill", "-KILL", str(pid)])
    wait_for(
        lambda: has(merged(team, env), "api", "exited", "opened", "fk-remote"),
        30,
        "api's exited event, from its host, in this machine's events",
        lambda: str(merged(team, env)),
    )
    found = merged(team, env)
    assert [e["at"] for e in found] == sorted(e["at"] for e in found)  # merged in time order
    assert not has(found, "api", "exited", "opened", None)  # told by its own host's watcher only
    text = fabrikito("events", team=team, role=None, env=env, timeout=60)
    assert [line for line in text.stdout.splitlines() if "api on fk-remote  exited  OPEN" in line], text.stdout

    # -- watch shows the host's seat and its open item, with the host named --------------------------------
    wait_for(
        lambda: "! api on fk-remote exited" in fabrikito("watch", "--once", team=team, role=None, env=env).stdout,
        15,
        "the host's open item in watch",
        lambda: fabrikito("watch", "--once", team=team, role=None, env=env).stdout,
    )
    frame = fabrikito("watch", "--once", team=team, role=None, env=env).stdout
    rows = [line for line in frame.splitlines() if line.strip().startswith(("em ", "api "))]
    assert any("exited" in r and r.rstrip().endswith("fk-remote") for r in rows if r.strip().startswith("api")), frame
    assert any(r.rstrip().endswith("here") for r in rows if r.strip().startswith("em")), frame

    # -- the host stops answering: this machine's watcher tells each of its seats unreachable, then resolved --
    follower = start_fabrikito("events", "--follow", "--json", team=team, role="owner", env=env)
    try:
        time.sleep(1.0)  # the follower has read where each file ends
        other_host.stop_sshd()
        wait_for(
            lambda: has(merged(team, env), "api", "unreachable", "opened", None),
            30,
            "api unreachable, told by this machine's watcher",
            lambda: str(merged(team, env)[-5:]),
        )
        dark = fabrikito("events", team=team, role=None, env=env, timeout=60)
        assert dark.returncode == 0 and "host fk-remote: its events could not be read" in dark.stderr, dark.stderr
        assert not has(merged(team, env), "em", "unreachable", "opened", None)
        other_host.start_sshd()
        wait_for(
            lambda: has(merged(team, env), "api", "unreachable", "resolved", None),
            30,
            "api reachable again",
            lambda: str(merged(team, env)[-5:]),
        )
        # -- api started again: its host's watcher resolves its exit, and the follower here prints that -----
        again = fabrikito("up", "api", team=team, role=None, env=env, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        wait_for(
            lambda: has(merged(team, env), "api", "exited", "resolved", "fk-remote"),
            30,
            "api's exit resolved on its host",
            lambda: str(merged(team, env)[-5:]),
        )
        time.sleep(3.0)  # the follower reads each host every 2 s
    finally:
        os.killpg(follower.pid, signal.SIGTERM)  # (SIGINT is ignored by a command started from a background job)
        try:
            out, err = follower.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            ps = ["ps", "-o", "pid,pgid,stat,args", "-g", str(follower.pid)]
            left = subprocess.run(ps, check=False, capture_output=True, text=True)
            os.killpg(follower.pid, signal.SIGKILL)
            raise AssertionError(
                f"events --follow (exit {follower.poll()}) did not end on SIGTERM: {left.stdout}"
            ) from None
    followed = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert has(followed, "api", "unreachable", "opened", None), out
    assert has(followed, "api", "exited", "resolved", "fk-remote"), out + err
    assert "host fk-remote: its events could not be read" in err, err

    # -- down stops both watchers ----------------------------------------------------------------------
    down = fabrikito("down", team=team, role=None, env=env, timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert [line for line in down.stdout.splitlines() if line.startswith("stopped the watcher")], down.stdout
    assert [line for line in down.stdout.splitlines() if line.startswith("[fk-remote] stopped the watcher")], (
        down.stdout
    )
    there = other_host.as_user(["sh", "-c", 'PATH="$HOME/.local/bin:$PATH" fabrikito _host watch live'])
    assert json.loads(there.stdout)["watcher"]["running"] is False
