"""``say`` to a seat on another host against ``say`` to a seat on this machine, in the same run.

The other host is the live tier's (tests/live/remotekit.py): a second local
user behind a private sshd on 127.0.0.1, fabrikito installed for it from this
checkout's wheel.  One team, brought up with ``fabrikito up``: seat ``near``
here and seat ``far`` there, real Claude Code 2.1.316 (inline renderer) both,
answered by one stand-in model.  Interleaved rounds, each timed from the start
of ``fabrikito say`` (the CLI, as a seat or script runs it) to the stand-in
receiving the model request the message causes:

* ``say near``: the engine here;
* ``say far``: ssh over the team's master connection, ``fabrikito _host say``
  on the host (an interpreter start there), the same engine next to the pane;
* ``say far``, fresh connection: the master closed before the round, so the
  round pays for the ssh connection too.

Writes the "remote-say" section of docs/benchmarks.md.  Run as root.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench.report import fabrikito_cli, write_section  # noqa: E402
from tests.live.remotekit import OtherHost  # noqa: E402

from fabrikito.offline import claude_setup, seatkit  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team import hosts, teamfile  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "12"))
FRESH = int(os.environ.get("BENCH_FRESH", "4"))
NEAR, FAR, FRESH_FAR = "say near (this machine)", "say far (other host, master up)", "say far (fresh connection)"


def main() -> None:
    binary = claude_setup.ensure_claude()
    host = OtherHost()
    far_binary = host.runnable(binary)
    socket = f"fab-bench-remote-{os.getpid()}"
    host.tmux_sockets.append(socket)
    times: dict[str, list[float]] = {NEAR: [], FAR: [], FRESH_FAR: []}
    wall: dict[str, list[float]] = {NEAR: [], FAR: [], FRESH_FAR: []}
    with tempfile.TemporaryDirectory() as tmp, StandIn() as standin:
        root = Path(tmp)
        home = claude_setup.make_home(root / "home")
        near_cwd = root / "work"
        near_cwd.mkdir()
        claude_setup.trust_dir(home, near_cwd)
        far_cwd = host.home / "work" / "far"
        host.trust(far_cwd)
        team_path = root / "team.toml"
        team_path.write_text(
            _team(socket, binary, standin, home, near_cwd, host, far_cwd, far_binary), encoding="utf-8"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FABRIKITO_SSH_CONFIG": str(host.config)}
        env.pop("TEAM_ROLE", None)
        cli = fabrikito_cli()
        try:
            up = subprocess.run(
                [*cli, "up", "--team", str(team_path)], env=env, capture_output=True, text=True, check=False
            )
            assert up.returncode == 0, up.stdout + up.stderr
            team = teamfile.load(team_path)
            master = hosts.host(team, "fk-remote")
            for i in range(ROUNDS + FRESH):
                runs = [(NEAR, "near"), (FAR, "far")] if i < ROUNDS else [(FRESH_FAR, "far")]
                for name, role in runs:
                    if name == FRESH_FAR:
                        master.disconnect()
                    mark = standin.mark()
                    t0 = time.monotonic()
                    done = subprocess.run(
                        [*cli, "say", "--team", str(team_path), role, f"{role} round {i} please look"],
                        env=env,  # from outside any seat: the owner
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    wall[name].append(time.monotonic() - t0)
                    assert done.returncode == 0, done.stderr
                    request = standin.wait_for_request(role, f"{role} round {i} ", 60, since=mark)
                    times[name].append(request.at - t0)
                    time.sleep(0.3)  # let the turn end and the box redraw
        finally:
            subprocess.run([*cli, "down", "--team", str(team_path)], env=env, capture_output=True, check=False)
            seatkit.stop_pids(seatkit.home_pids(home))
            host.close(host.tmux_sockets)
    median = {name: statistics.median(v) * 1000 for name, v in times.items()}
    rows = [
        f"| {name} | {median[name]:.0f} | {min(v) * 1000:.0f} | {statistics.median(wall[name]) * 1000:.0f} | "
        f"{median[name] / median[NEAR]:.2f}x |"
        for name, v in times.items()
    ]
    body = "\n".join(
        [
            "## `say` to a seat on another host against a seat on this machine",
            "",
            f"`python bench/bench_remote_say.py` (as root): one team brought up with `fabrikito up`, seat `near` "
            "here and seat `far` on the live tier's other host (a second user behind a private sshd on 127.0.0.1, "
            f"so no network time is in it), real Claude Code 2.1.316 both; {ROUNDS} interleaved rounds, then "
            f"{FRESH} with the master connection closed first. Each `fabrikito say` (CLI) is timed from its start "
            "to the stand-in receiving the model request its message causes.",
            "",
            "| variant | to the request, median ms | min ms | the command's wall time, median ms | ratio to near |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"Over the master connection a remote `say` costs {median[FAR] - median[NEAR]:.0f} ms more than a local "
            "one: one ssh command through the master (about 10 ms here) and a second interpreter start, the host's "
            "`fabrikito _host say`, with its imports and its identity walk; the engine's own reads and pastes run "
            "next to the pane, as for a local seat. A fresh connection adds the ssh handshake (key exchange and "
            "login), once per ControlPersist period (10 minutes after the last use).",
            f"Load average at the end of the run: {os.getloadavg()[0]:.1f}.",
        ]
    )
    print(body)
    write_section("remote-say", body)


def _team(
    socket: str, binary: Path, standin: StandIn, home: Path, near: Path, host: OtherHost, far: Path, far_binary: Path
) -> str:
    def env(role: str, extra: dict[str, str]) -> str:
        values = {
            **extra,
            "ANTHROPIC_BASE_URL": standin.base_url(role),
            "ANTHROPIC_API_KEY": claude_setup.API_KEY,
            "DISABLE_AUTOUPDATER": "1",
        }
        return "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + " }"

    return "\n".join(
        [
            'name = "bench"',
            f'tmux_socket = "{socket}"',
            f"agent = {json.dumps([str(binary)])}",
            "",
            "[[seat]]",
            'role = "near"',
            'session = "bench-near"',
            f"cwd = {json.dumps(str(near))}",
            'permission_mode = "acceptEdits"',
            env("near", {"HOME": str(home)}),
            "",
            "[[seat]]",
            'role = "far"',
            'session = "bench-far"',
            'host = "fk-remote"',
            f"command = {json.dumps([str(far_binary)])}",
            f"cwd = {json.dumps(str(far))}",
            'permission_mode = "acceptEdits"',
            env("far", {"HOME": str(host.home), "TMPDIR": str(host.home / "tmp")}),
            "",
        ]
    )


if __name__ == "__main__":
    main()
