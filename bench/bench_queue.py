"""The delivery worker with 12 real seats: box ready → delivered, idle CPU, tmux calls per round.

Brings up 12 real Claude Code seats offline (as ``bench_up.py`` does; ``up``
starts the team's delivery worker), then:

* **latency**: for each trial a seat gets a draft in its box, a message is
  queued for it (the worker is woken, sees the draft and waits), then the
  draft is cleared (``C-u``): from that key to the message's queue file being
  gone (the worker removes it after the Enter landed and the log line was
  written), polled every 5 ms;
* **idle CPU**: the worker process's user + system time (``/proc``) over a
  stretch with nothing queued, and over one with a message waiting behind a
  draft in every one of the 12 boxes;
* **tmux calls per round**: rounds run in-process against the same 12 waiting
  seats, counting tmux invocations (``TmuxSeats.tmux_calls``).

Writes the "queue" section of docs/benchmarks.md.
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.bench_up import offline_team, stop  # noqa: E402 -- after the path is set
from bench.report import write_section  # noqa: E402

from fabrikito.cli import serverctl  # noqa: E402
from fabrikito.delivery import engine, queue, seatpane, worker, workerstate  # noqa: E402
from fabrikito.launch import lifecycle  # noqa: E402
from fabrikito.offline import claude_setup  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team.teamfile import Team  # noqa: E402

SEATS = int(os.environ.get("BENCH_SEATS", "12"))
TRIALS = int(os.environ.get("BENCH_TRIALS", "48"))
IDLE_SECONDS = float(os.environ.get("BENCH_IDLE", "30"))
ROUNDS = 50
DRAFT = "a draft"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


def type_draft(team: Team, role: str) -> None:
    server = team.server()
    seat = team.seat(role)
    assert seat is not None
    server.send_keys(f"={seat.session}:", DRAFT, literal=True)
    assert wait(lambda: DRAFT in server.capture(f"={seat.session}:"), 10), f"{role}: the draft did not show"


def clear_draft(team: Team, role: str) -> None:
    seat = team.seat(role)
    assert seat is not None
    team.server().send_keys(f"={seat.session}:", "C-u")


def idle_cpu(pid: int, seconds: float) -> float:
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0) * 100


def main() -> None:
    for name in claude_setup.stripped_names(os.environ):
        os.environ.pop(name, None)
    standin = StandIn().start()
    latencies: list[float] = []
    direct: list[float] = []  # the engine alone (engine.deliver in-process) into a ready, idle seat
    lost = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = claude_setup.make_home(Path(tmp) / "home")
            roles = [f"q{i:02d}" for i in range(SEATS)]
            team = offline_team(Path(tmp) / "team", "qb", roles, standin, home, f"fab-bq-{secrets.token_hex(3)}")
            try:
                result = lifecycle.up(team, out=lambda _line: None, helpers=[serverctl.UP_HELPER])
                assert not result.failed, result.failed
                assert wait(lambda: workerstate.read_info(team).pid is not None, 10), "no delivery worker"
                info = workerstate.read_info(team)
                assert info.pid is not None
                time.sleep(5)  # the kickoff turns end
                cpu_idle = idle_cpu(info.pid, IDLE_SECONDS)

                for role in roles:  # every seat: a draft, and a message waiting behind it
                    type_draft(team, role)
                    queue.enqueue(team, role, "owner", f"waiting for {role}", expire=3600, reason="bench")
                worker.ensure_running(team)
                time.sleep(1)
                cpu_waiting = idle_cpu(info.pid, IDLE_SECONDS / 2)
                worker.stop(team)
                seats = worker.TmuxSeats(team)
                w = worker.Worker(team, seats)
                calls0 = seats.tmux_calls
                w.round()  # the first round lists the panes
                first_round = seats.tmux_calls - calls0
                calls0 = seats.tmux_calls
                for _ in range(ROUNDS):
                    waits = w.round()
                    assert len(waits) == SEATS, waits
                per_round = (seats.tmux_calls - calls0) / ROUNDS
                for role in roles:
                    clear_draft(team, role)
                worker.ensure_running(team)
                assert wait(lambda: not any(queue.scan(team).waiting(r) for r in roles), 120)

                for n in range(TRIALS):
                    role = roles[n % SEATS]
                    type_draft(team, role)
                    msg = queue.enqueue(team, role, "owner", f"trial {n}", expire=3600, reason="bench")
                    worker.ensure_running(team)
                    time.sleep(0.3)
                    assert msg.path.exists(), "delivered into a draft?"
                    t0 = time.monotonic()
                    clear_draft(team, role)
                    if wait(lambda m=msg: not m.path.exists(), 30):
                        latencies.append(time.monotonic() - t0)
                    else:
                        lost += 1
                    other = team.seat(roles[(n + SEATS // 2) % SEATS])  # idle since its trial: the baseline
                    assert other is not None
                    ctx = engine.Context(team=team, server=team.server(), panes=seatpane.list_panes(team.server()))
                    t0 = time.monotonic()
                    done = engine.deliver(ctx, other, "owner", f"direct {n}")
                    if done.result is engine.Result.DELIVERED:
                        direct.append(time.monotonic() - t0)
            finally:
                worker.stop(team)
                stop(team, home)
    finally:
        standin.stop()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    base = statistics.median(direct)
    load = os.getloadavg()[0]
    print(f"p50 {p50:.3f}s p99 {p99:.3f}s; idle {cpu_idle:.2f}% waiting {cpu_waiting:.2f}%; calls {per_round}")
    body = "\n".join(
        [
            f"## Queued delivery: the worker with {SEATS} seats",
            "",
            f"`python bench/bench_queue.py`: {SEATS} real Claude Code 2.1.316 seats offline, brought up by `up`",
            "(which starts the team's delivery worker).",
            "",
            "| measure | value | goal |",
            "|---|---|---|",
            f"| box ready → delivered, p50 ({len(latencies)} trials) | **{p50:.2f} s** | ≤ 0.5 s |",
            f"| box ready → delivered, p99 | **{p99:.2f} s** | ≤ 1.5 s |",
            f"| not delivered within 30 s | {lost} | 0 |",
            f"| baseline: `engine.deliver` alone into a ready seat, median ({len(direct)}, same run) "
            f"| {base:.2f} s (queue p50 = {p50 / base:.1f}x) | - |",
            f"| worker CPU, nothing queued ({IDLE_SECONDS:g} s) | **{cpu_idle:.2f} %** of a core | < 1 % |",
            f"| worker CPU, a message waiting behind a draft in all {SEATS} boxes "
            f"| {cpu_waiting:.2f} % of a core | - |",
            f"| tmux calls per round, {SEATS} seats waiting | **{per_round:.2f}** (first round: {first_round}) | 1 |",
            "",
            f"Load average during the run: {load:.1f} on {os.cpu_count()} CPUs (other work shares the machine).",
            "",
            "A trial: a draft goes into a seat's box, a message is queued for it and the worker woken; 0.3 s later",
            "(the worker has looked and waits) the draft is cleared with `C-u`, and the clock runs from that key to",
            "the message's queue file being removed, which the worker does after the Enter landed (box seen empty",
            "again) and the delivered line was written. So the time holds Claude Code redrawing the box, the",
            "worker's next round (every 0.05 s while a message waits) and a whole delivery by the engine of `say`",
            "(label paste, check, message paste, check, Enter, check). With nothing queued the worker reads no",
            "screen: it sleeps until `say --queue` wakes it (`SIGUSR1`) or 5 s pass, then reads the queue's",
            "directories. While messages wait it reads every waiting seat's screen in one tmux call per round",
            "(`display-message` + `capture-pane` per pane, chained); the pane list is read again only when a",
            "seat's pane is not found.",
        ]
    )
    write_section("queue", body)


if __name__ == "__main__":
    main()
