"""``up --resume`` of N real Claude Code seats against ``up`` of the same N seats, in the same run.

Offline (stand-in model, private tmux server, isolated HOME).  ``up`` starts N
fresh seats and gives each its kickoff (the baseline: the CPU floor of N Claude
Code starts).  Then every seat's agent is killed with SIGKILL, and ``up
--resume`` brings each back resuming its conversation and gives it the restart
notice.  Both are timed to the last ready box and to the end of ``up``.
``BENCH_SEATS`` (default 12) sets N.  Writes the "up --resume" section of
docs/benchmarks.md.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.bench_up import READY, offline_team, stop  # noqa: E402 -- after the path is set
from bench.report import write_section  # noqa: E402

from fabrikito.cli import serverctl  # noqa: E402
from fabrikito.launch import lifecycle, status  # noqa: E402
from fabrikito.offline import claude_setup  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team.teamfile import Team  # noqa: E402

SEATS = int(os.environ.get("BENCH_SEATS", "12"))


def timed(team: Team, *, resume: bool | None) -> tuple[float, float, lifecycle.UpResult, list[str]]:
    t0 = time.monotonic()
    last_ready = 0.0
    lines: list[str] = []

    def out(line: str) -> None:
        nonlocal last_ready
        lines.append(line)
        if READY.search(line):
            last_ready = time.monotonic() - t0

    result = lifecycle.up(team, out=out, helpers=[serverctl.UP_HELPER], resume=resume)
    return last_ready, time.monotonic() - t0, result, lines


def kill_agents(team: Team) -> None:
    pids = [s.pid for s in status.collect(team, screens=False).seats if s.pid]
    assert len(pids) == SEATS, pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(s.state is not status.SeatState.EXITED for s in status.collect(team, screens=False).seats):
        assert time.monotonic() < deadline, "agents still running after SIGKILL"
        time.sleep(0.2)


def main() -> None:
    for name in claude_setup.stripped_names(os.environ):
        os.environ.pop(name, None)
    standin = StandIn().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = claude_setup.make_home(Path(tmp) / "home")
            roles = [f"s{i:02d}" for i in range(SEATS)]
            team = offline_team(Path(tmp) / "many", "many", roles, standin, home, f"fab-br-{secrets.token_hex(3)}")
            try:
                up_ready, up_total, result, _ = timed(team, resume=None)
                assert not result.failed, result.failed
                for role in roles:
                    standin.wait_for_request(role, "[from launcher] Start.", 60)
                deadline = time.monotonic() + 60  # each turn kept in its transcript: a conversation to resume
                while any(s.state is not status.SeatState.IDLE for s in status.collect(team, screens=False).seats):
                    assert time.monotonic() < deadline, "seats not idle after their kickoffs"
                    time.sleep(0.2)
                kill_agents(team)
                res_ready, res_total, result, lines = timed(team, resume=True)
                assert not result.failed, result.failed
                resumed = sum("resuming its conversation" in line for line in lines)
                assert resumed == SEATS, lines
            finally:
                stop(team, home)
    finally:
        standin.stop()
    cpus = os.cpu_count() or 1
    load = os.getloadavg()[0]
    print(f"up of {SEATS}: ready {up_ready:.2f} s, total {up_total:.2f} s")
    print(f"up --resume of {SEATS}: ready {res_ready:.2f} s, total {res_total:.2f} s")
    body = "\n".join(
        [
            f"## `up --resume`: {SEATS} seats resumed against `up` of {SEATS} fresh seats",
            "",
            f"Real Claude Code 2.1.316 seats, offline, one private tmux server, {cpus} CPUs shared with other",
            f"work (load average {load:.1f} when it ended). `up` starts {SEATS} fresh seats and gives each its",
            f"kickoff; every agent is then killed with SIGKILL, and `up --resume` brings all {SEATS} back, each",
            "resuming its own conversation (`--resume <id>`, after its record and Claude Code's transcript are",
            "checked), and gives each the restart notice instead of the kickoff.",
            "",
            "| measure | `up` | `up --resume` | ratio |",
            "|---|---|---|---|",
            f"| to the last ready box (s) | {up_ready:.2f} | {res_ready:.2f} | {res_ready / up_ready:.2f}x |",
            f"| to the end, every kickoff / notice delivered (s) | {up_total:.2f} | {res_total:.2f} | "
            f"{res_total / up_total:.2f}x |",
            "",
            "Both are bound by the same floor, Claude Code's own start-up on the shared CPUs; resuming adds the",
            "reading of each seat's record and the first lines of its transcript, and Claude Code's loading of",
            "a one-turn conversation.",
        ]
    )
    write_section("up-resume", body)


if __name__ == "__main__":
    main()
