"""``up`` of 12 real Claude Code seats against the slowest single seat's start.

Offline: the seats run the ``.tools`` Claude Code binary against an in-process
stand-in model, on a private tmux server, with an isolated HOME.  First each
of ``BENCH_SINGLES`` one-seat teams is brought up alone (``up`` in-process);
then a 12-seat team is brought up at once.  "Ready" is the moment ``up``
reports the seat's input box (the kickoff comes after it); the total includes
every kickoff.  Writes the "up" section of docs/benchmarks.md.

``BENCH_REPLAY=1``: ``up`` of 1 and of ``BENCH_COUNTS`` (12, 25, 50) seats whose agent is
``bench/replay_agent.sh``, a stand-in that draws a screen recorded from Claude Code 2.1.316 (its empty
box, 220x50 as ``up`` sizes a pane) and writes a 2.1.316 session registry entry: what ``up`` itself costs
(sessions, seat files, the screens read each round, the helpers) without a Node start per seat.  No
kickoff (nothing to type into).  Writes the "up-replayed" section.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.report import write_section  # noqa: E402 -- after the path is set

from fabrikito.base.errors import TmuxError  # noqa: E402
from fabrikito.cli import serverctl  # noqa: E402
from fabrikito.launch import lifecycle, status, teardown  # noqa: E402
from fabrikito.offline import claude_setup, seatkit  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team import teamfile  # noqa: E402 -- after the path is set
from fabrikito.team.teamfile import Team  # noqa: E402

SEATS = int(os.environ.get("BENCH_SEATS", "12"))
COUNTS = [int(c) for c in os.environ.get("BENCH_COUNTS", "12,25,50").split(",")]
REPLAY = ROOT / "bench" / "replay_agent.sh"
IDLE = ROOT / "tests" / "fixtures" / "screens" / "2.1.316" / "inline-220x50-empty-box-fresh-start"
SINGLES = int(os.environ.get("BENCH_SINGLES", "4"))
READY = re.compile(r"\] (\w+): box ready")


def offline_team(base: Path, name: str, roles: list[str], standin: StandIn, home: Path, socket: str) -> Team:
    """A team file of ``roles`` whose seats run the bench binary against ``standin``."""
    binary = claude_setup.ensure_claude()
    base.mkdir(parents=True, exist_ok=True)
    lines = [f'name = "{name}"', f'tmux_socket = "{socket}"', f"agent = [{json.dumps(str(binary))}]"]
    lines.append('kickoff = "Start."')
    for role in roles:
        cwd = base / "work" / role
        cwd.mkdir(parents=True, exist_ok=True)
        claude_setup.trust_dir(home, cwd)
        env = claude_setup.seat_env(home=home, base_url=standin.base_url(role))
        lines += ["", "[[seat]]", f'role = "{role}"', f'session = "{name}-{role}"', f'cwd = "work/{role}"']
        lines += [
            'permission_mode = "acceptEdits"',
            "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }",
        ]
    path = base / "team.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return teamfile.load(path)


def timed_up(team: Team) -> tuple[float, float, lifecycle.UpResult]:
    """(seconds to the last ready box, seconds to the end of ``up``, the result)."""
    t0 = time.monotonic()
    last_ready = 0.0

    def out(line: str) -> None:
        nonlocal last_ready
        if READY.search(line):
            last_ready = time.monotonic() - t0

    result = lifecycle.up(team, out=out, helpers=[serverctl.UP_HELPER])  # as the command up does
    return last_ready, time.monotonic() - t0, result


def agent_cpu(team: Team) -> float:
    """CPU seconds (user + system) the team's first seat's agent has used so far."""
    pid = status.collect(team, screens=False).seats[0].pid
    assert pid is not None
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(team: Team, home: Path) -> None:
    teardown.down(team, out=lambda _line: None, stop_helpers=[serverctl.stop])
    try:
        team.server().kill_server()
    except TmuxError:
        pass
    seatkit.stop_pids(seatkit.home_pids(home))


def replayed_team(base: Path, name: str, count: int, socket: str) -> Team:
    """A team of ``count`` seats whose agent is the replay stand-in, without a kickoff."""
    base.mkdir(parents=True)
    config = base / "claude-config"
    lines = [f'name = "{name}"', f'tmux_socket = "{socket}"', f"agent = [{json.dumps(str(REPLAY))}]"]
    for i in range(count):
        env = {"REPLAY_SCREEN": str(IDLE), "CLAUDE_CONFIG_DIR": str(config)}
        lines += ["", "[[seat]]", f'role = "s{i:02d}"', f'session = "{name}-s{i:02d}"']
        lines += ["env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"]
    path = base / "team.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return teamfile.load(path)


def main_replayed() -> None:
    """``up`` of replayed seats: 1 seat, then each of :data:`COUNTS`, ``BENCH_RUNS`` runs each, interleaved."""
    runs = int(os.environ.get("BENCH_RUNS", "3"))
    timings: dict[int, list[tuple[float, float]]] = {n: [] for n in [1, *COUNTS]}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            for count, runs_of in timings.items():
                team = replayed_team(
                    Path(tmp) / f"r{run}-{count}", f"r{count}", count, f"fab-bu-{secrets.token_hex(3)}"
                )
                try:
                    ready, total, result = timed_up(team)
                    assert not result.failed, result.failed
                    runs_of.append((ready, total))
                    print(f"{count} replayed seats: last box ready {ready:.2f} s, up {total:.2f} s", flush=True)
                finally:
                    teardown.down(team, out=lambda _line: None, stop_helpers=[serverctl.stop])
                    try:
                        team.server().kill_server()
                    except TmuxError:
                        pass
    one = statistics.median(t[0] for t in timings[1])
    rows = [
        f"| {n} | {statistics.median(t[0] for t in ts):.2f} s | {statistics.median(t[0] for t in ts) / one:.2f}x | "
        f"{statistics.median(t[1] for t in ts):.2f} s |"
        for n, ts in timings.items()
    ]
    body = "\n".join(
        [
            "## `up` of 1, 12, 25 and 50 replayed seats (issue 26): bench/bench_up.py, BENCH_REPLAY=1",
            "",
            "Each seat's agent is `bench/replay_agent.sh`: it draws a screen recorded from Claude Code 2.1.316 (its",
            "empty box at 220x50, the size `up` gives a pane), writes a 2.1.316 session registry entry and runs on as",
            "a process named `claude`. So this is `up`'s own cost (a tmux session, seat files and a conversation",
            "record per seat, every waiting screen read once per 0.2 s round, two rounds of a ready box, the",
            "helpers), without a Node start per seat (that is the real-seat section's). No kickoff. Median of",
            f"{runs} runs, counts interleaved; load average at the end {os.getloadavg()[0]:.1f}.",
            "",
            "| seats | to the last ready box | / one seat | `up` returns |",
            "|---|---|---|---|",
            *rows,
        ]
    )
    write_section("up-replayed", body)


def main() -> None:
    if os.environ.get("BENCH_REPLAY") == "1":
        main_replayed()
        return
    for name in [n for n in claude_setup.stripped_names(os.environ)]:
        os.environ.pop(name, None)
    standin = StandIn().start()
    singles: list[float] = []
    cpu: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = claude_setup.make_home(Path(tmp) / "home")
            for i in range(SINGLES):
                team = offline_team(
                    Path(tmp) / f"one{i}", "one", ["solo"], standin, home, f"fab-bu-{secrets.token_hex(3)}"
                )
                try:
                    ready, _, result = timed_up(team)
                    assert not result.failed, result
                    singles.append(ready)
                    cpu.append(agent_cpu(team))
                finally:
                    stop(team, home)
            roles = [f"s{i:02d}" for i in range(SEATS)]
            team = offline_team(Path(tmp) / "many", "many", roles, standin, home, f"fab-bu-{secrets.token_hex(3)}")
            try:
                ready_all, total, result = timed_up(team)
                assert not result.failed, result.failed
            finally:
                stop(team, home)
    finally:
        standin.stop()
    slowest = max(singles)
    ratio = ready_all / slowest
    cpus = os.cpu_count() or 1
    per_seat = statistics.median(cpu)
    floor = SEATS * per_seat / cpus
    print(f"single seat to ready box: {', '.join(f'{s:.2f}' for s in singles)} s (slowest {slowest:.2f} s)")
    print(f"{SEATS} seats to ready boxes: {ready_all:.2f} s ({ratio:.2f}x); with kickoffs: {total:.2f} s")
    print(f"CPU per seat {per_seat:.2f} s; floor for {SEATS} seats on {cpus} CPUs: {floor:.2f} s")
    body = "\n".join(
        [
            f"## `up`: {SEATS} seats against the slowest single seat",
            "",
            "Real Claude Code 2.1.316 seats, offline (stand-in model), one private tmux server. A single seat is",
            f"a one-seat team brought up alone ({SINGLES} runs); then {SEATS} seats are brought up by one `up`.",
            '"Ready" is when `up` sees the seat\'s empty input box; kickoffs come after it.',
            "",
            "| measure | seconds |",
            "|---|---|",
            f"| single seat to ready box, each run | {', '.join(f'{s:.2f}' for s in singles)} |",
            f"| single seat, median / slowest | {statistics.median(singles):.2f} / {slowest:.2f} |",
            f"| {SEATS} seats to the last ready box | {ready_all:.2f} |",
            f"| {SEATS} seats, every kickoff delivered | {total:.2f} |",
            f"| CPU one seat's Claude Code uses to start and take its kickoff (median) | {per_seat:.2f} |",
            f"| CPU floor for {SEATS} starts on {cpus} CPUs ({SEATS} x CPU per seat / CPUs) | {floor:.2f} |",
            "",
            f"Ratio of {SEATS} seats to the slowest single seat: **{ratio:.2f}x** (goal: within 1.3x).",
            "All seats start at once (one `new-session` each, a few ms apart) and one tmux call per 0.2 s round",
            "reads every waiting seat's screen. A Claude Code start is CPU-bound (Node start-up and first render):",
            f"{SEATS} starts need {floor:.1f} s of the {cpus} CPUs before any box can be up, so here the goal",
            f"cannot be met by scheduling. The last box was ready {ready_all / floor:.2f}x that floor (the CPU per",
            "seat is measured on a seat started alone; started together, they also share memory and the",
            "scheduler, and `up` reads every waiting screen each round). With about a CPU per seat the ratio",
            f"comes close to 1x. Other work on the machine while this ran: load average {os.getloadavg()[0]:.1f}.",
        ]
    )
    write_section("up" if SEATS == 12 else f"up-{SEATS}", body)  # each seat count a section of its own


if __name__ == "__main__":
    main()
