"""The watcher with 12 seats: from a change on a screen to its event line, its CPU when idle, the view's redraw.

Brings up 12 real Claude Code seats offline with ``lifecycle.up`` (which starts
the watcher; not timed), with ``[watch] box_after = 0`` so a box holding text is
an event at once, then:

* **event latency**: text typed into a seat's box (``send-keys``), then the
  time until its ``box-text`` event line is in ``events.jsonl``; the baseline in
  the same trial is the time until the text is on the screen at all
  (``capture-pane`` polled), so the ratio is what the watcher adds.  The box
  is cleared after each trial and its resolved line waited for;
* **idle CPU**: the watcher's own CPU (``/proc/<pid>/stat``) over a quiet
  window, as a share of one core, and the tmux server's CPU over the same
  window against a window with the watcher stopped (what its two calls a
  round cost tmux); tmux calls per round from the round's reading;
* **redraw**: CPU time of one refresh of ``fabrikito watch`` (read
  ``watcher.json`` and the log's tail, lay out the frame) at 12 seats, against
  reading ``watcher.json`` alone.

Writes the "watch" section of docs/benchmarks.md.
"""

from __future__ import annotations

import os
import random
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
from fabrikito.delivery import seatpane  # noqa: E402
from fabrikito.launch import lifecycle, watcherproc  # noqa: E402
from fabrikito.log import events  # noqa: E402
from fabrikito.offline import claude_setup  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team import teamfile  # noqa: E402
from fabrikito.watch import layout, observe, view  # noqa: E402

SEATS = int(os.environ.get("BENCH_SEATS", "12"))
TRIALS = int(os.environ.get("BENCH_TRIALS", "24"))
IDLE = float(os.environ.get("BENCH_IDLE", "30"))
REDRAWS = 200


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait(check: object, timeout: float = 20.0) -> float:
    started = time.monotonic()
    while not check():  # type: ignore[operator]
        if time.monotonic() - started > timeout:
            raise RuntimeError("timed out")
        time.sleep(0.005)
    return time.monotonic()


def main() -> None:
    for name in claude_setup.stripped_names(os.environ):
        os.environ.pop(name, None)
    standin = StandIn().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = claude_setup.make_home(Path(tmp) / "home")
            roles = [f"s{i:02d}" for i in range(SEATS)]
            team = offline_team(Path(tmp) / "team", "wb", roles, standin, home, f"fab-bw-{secrets.token_hex(3)}")
            text = team.path.read_text()
            head, _, seats = text.partition("\n[[seat]]")
            team.path.write_text(head + "\n[watch]\nbox_after = 0\n\n[[seat]]" + seats)
            team = teamfile.load(team.path)
            try:
                result = lifecycle.up(team, out=lambda _line: None, helpers=[serverctl.UP_HELPER])
                assert not result.failed, result
                time.sleep(3)
                body = measure(team)
            finally:
                stop(team, home)
    finally:
        standin.stop()
    print(body)
    write_section("watch", body)


def one_trial(team: teamfile.Team, pane: str, role: str, path: Path, trial: int) -> tuple[float, float]:
    """Text typed into one box: (seconds until it is on the screen, seconds until its event line)."""
    server = team.server()
    marker = f"draft {trial} {secrets.token_hex(2)}"
    before = len(events.read(path))
    time.sleep(random.uniform(0, team.watch.round))  # noqa: S311 -- a phase, not a secret: any point of a round
    started = time.monotonic()
    server.send_keys(pane, marker, literal=True)
    shown = wait(lambda: marker in server.capture(pane))
    told = wait(lambda: any(e.key == f"box-text {role}" for e in events.read(path)[before:]))
    server.send_keys(pane, "C-u")
    wait(lambda: any(e.event == events.RESOLVED for e in events.read(path)[before:]))
    return shown - started, told - started


def measure(team: teamfile.Team) -> str:
    server = team.server()
    path = events.path_for(team.state_dir)
    panes = {row.session: row.pane_id for row in seatpane.list_panes(server)}
    latencies: list[float] = []
    screens: list[float] = []
    for trial in range(TRIALS):
        seat = team.seats[trial % len(team.seats)]
        shown, told = one_trial(team, panes[seat.session], seat.role, path, trial)
        screens.append(shown)
        latencies.append(told)
    info = watcherproc.info(team)
    assert info.pid is not None
    tmux_pid = int(server.run("display-message", "-p", "#{pid}").strip())
    c0, t0, w0 = cpu_seconds(info.pid), cpu_seconds(tmux_pid), time.monotonic()
    time.sleep(IDLE)
    c1, t1, w1 = cpu_seconds(info.pid), cpu_seconds(tmux_pid), time.monotonic()
    watcher_share = (c1 - c0) / (w1 - w0)
    tmux_with = (t1 - t0) / (w1 - w0)
    watcherproc.stop(team)
    t2, w2 = cpu_seconds(tmux_pid), time.monotonic()
    time.sleep(IDLE)
    t3, w3 = cpu_seconds(tmux_pid), time.monotonic()
    tmux_without = (t3 - t2) / (w3 - w2)
    calls = observe.observe(team).tmux_calls
    redraw, floor = [], []
    for _ in range(REDRAWS):
        a = time.process_time()
        layout.read_state(watcherproc.state_path(team))
        b = time.process_time()
        view.current(team, width=80, height=24)
        c = time.process_time()
        floor.append(b - a)
        redraw.append(c - b)
    ms = 1000
    rows = [
        "| measure | value | baseline (same run) | ratio | goal |",
        "|---|---|---|---|---|",
        f"| screen change to event line, p50 | {statistics.median(latencies):.2f} s | text on the screen "
        f"{statistics.median(screens):.2f} s | {statistics.median(latencies) / statistics.median(screens):.1f}x "
        "| ≤ 1 s |",
        f"| screen change to event line, p95 | {pct(latencies, 0.95):.2f} s | {pct(screens, 0.95):.2f} s | "
        f"{pct(latencies, 0.95) / pct(screens, 0.95):.1f}x | ≤ 2 s |",
        f"| idle watcher CPU, {len(team.seats)} seats | {watcher_share * 100:.2f}% of a core | - | - | < 1% |",
        f"| tmux server CPU while watched | {tmux_with * 100:.2f}% | unwatched {tmux_without * 100:.2f}% | "
        f"{f'{tmux_with / tmux_without:.1f}x' if tmux_without else '-'} | - |",
        f"| tmux calls per round | {calls} | - | - | ≤ 2 |",
        f"| `watch` refresh CPU, {len(team.seats)} seats | {statistics.median(redraw) * ms:.2f} ms | read "
        f"watcher.json alone {statistics.median(floor) * ms:.2f} ms | "
        f"{statistics.median(redraw) / max(statistics.median(floor), 1e-6):.1f}x | < 50 ms |",
    ]
    return (
        f"## The watcher with {len(team.seats)} seats (`bench/bench_watch.py`)\n\n"
        f"{TRIALS} trials of a box filled with text (`box_after = 0`), a quiet window of {IDLE:g} s, "
        f"{REDRAWS} refreshes of the view at 80x24. Rounds every {team.watch.round:g} s.\n\n" + "\n".join(rows)
    )


if __name__ == "__main__":
    main()
