"""``fabrikito log`` queries on a message log of 2,000, 200,000 and 2,000,000 lines.

Each log is a busy team's month at one rate (a line every 1.3 s, the last one
now), so ``--since 1h`` shows the same ~2,800 lines (all 2,000 of the small
log) whatever its length: a query that reads only what it shows costs the same
on each.  Timed as the command people run (a process each), the median of
``BENCH_RUNS`` rounds, the sizes interleaved in each round; ratios are against
the 2,000-line log in the same run.  ``--from api`` must still read every line
(it filters by sender, which no place in the file tells), so it grows with the
log: it is there to show what streaming costs, not as a goal.

Writes the "log-query" section of docs/benchmarks.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.report import fabrikito_cli, write_section  # noqa: E402

from fabrikito.log import msglog  # noqa: E402

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "2000,200000,2000000").split(",")]
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
EVERY = 30 * 86400 / 2_000_000  # seconds between lines: 2M lines are a month
QUERIES = [
    ("--since 1h", ["--since", "1h"]),
    ("-n 100", ["-n", "100"]),
    ("--from api", ["--from", "api"]),
    ("(every line)", []),
]
STREAMED = ("--from api", "(every line)")  # they read every line: two runs on the largest log show their cost
ROLES = ("tl", "api", "em", "ux", "db", "qa")


def make_log(path: Path, count: int, now: float) -> None:
    path.parent.mkdir(parents=True, mode=0o700)
    with open(path, "wb") as out:
        batch = []
        for i in range(count):
            when = now - (count - 1 - i) * EVERY
            sender, recipient = ROLES[i % 6], ROLES[(i * 7 + 1) % 6]
            body = f"message {i}: " + "lorem ipsum dolor " * (1 + i % 9)
            batch.append(msglog.format_line(when, sender, recipient, msglog.Outcome.DELIVERED, body))
            if len(batch) == 50_000:
                out.write(b"".join(batch))
                batch.clear()
        out.write(b"".join(batch))


def team_at(base: Path, count: int, now: float) -> Path:
    team = base / f"t{count}" / "team.toml"
    team.parent.mkdir(parents=True)
    team.write_text('name = "bench"\nlog_max_size = "8G"\n[[seat]]\nrole = "tl"\nsession = "bench-tl"\n')
    make_log(team.parent / ".state" / "bench" / "messages.log", count, now)
    return team


def timed(cli: list[str], team: Path, args: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """Seconds, lines printed and the command's peak resident memory (KiB); its output counted as it comes."""
    started = time.perf_counter()
    child = subprocess.Popen([*cli, "log", "--team", str(team), *args], stdout=subprocess.PIPE, env=env)
    out = child.stdout
    assert out is not None
    lines = 0
    while block := out.read(1 << 20):
        lines += block.count(b"\n")
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, f"log {args} exited {child.returncode}"
    return time.perf_counter() - started, lines, usage.ru_maxrss


def main() -> None:
    cli = fabrikito_cli()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "TZ": os.environ.get("TZ", "UTC")}
    with tempfile.TemporaryDirectory() as tmp:
        now = time.time()
        teams = {}
        for count in SIZES:
            began = time.perf_counter()
            teams[count] = team_at(Path(tmp), count, now)
            size = (teams[count].parent / ".state" / "bench" / "messages.log").stat().st_size
            print(f"{count:>9,} lines: {size / 1e6:.1f} MB, written in {time.perf_counter() - began:.1f} s", flush=True)
        env["HOME"] = tmp
        times: dict[tuple[str, int], list[float]] = {}
        shown: dict[tuple[str, int], int] = {}
        peak: dict[tuple[str, int], int] = {}
        for _ in range(RUNS):
            for name, args in QUERIES:
                for count in SIZES:
                    if name in STREAMED and count > 200_000 and len(times.get((name, count), [])) >= 2:
                        continue  # a query reading every line of 2M: two runs are enough to show its cost
                    took, lines, rss = timed(cli, teams[count], args, env)
                    times.setdefault((name, count), []).append(took)
                    shown[(name, count)] = lines
                    peak[(name, count)] = max(peak.get((name, count), 0), rss)
    rows = [
        "| query | " + " | ".join(f"{c:,} lines" for c in SIZES) + f" | {SIZES[-1]:,} / {SIZES[0]:,} | goal |",
        "|---|" + "---|" * (len(SIZES) + 2),
    ]
    for name, _args in QUERIES:
        medians = [statistics.median(times[(name, c)]) for c in SIZES]
        cells = [
            f"{m * 1000:.0f} ms, {peak[(name, c)] / 1024:.0f} MB ({shown[(name, c)]:,} lines out)"
            for m, c in zip(medians, SIZES, strict=True)
        ]
        goal = "<= 3x" if name not in STREAMED else "memory flat (reads every line)"
        rows.append(f"| `log {name}` | " + " | ".join(cells) + f" | **{medians[-1] / medians[0]:.2f}x** | {goal} |")
        print(rows[-1], flush=True)
    load = os.getloadavg()[0]
    body = (
        "## Log queries on long logs (issue 26): bench/bench_log_query.py\n\n"
        f"Median of {RUNS} rounds (`--from api` and every line on the largest log: 2), each the command in its "
        "own process, its peak resident memory (`ru_maxrss`) after the time, "
        f"sizes interleaved; a line every {EVERY:.1f} s ending now, so `--since 1h` shows the same hour on every "
        f"log. Load average at the end: {load:.1f} (a shared 2-CPU machine).\n\n" + "\n".join(rows) + "\n"
    )
    write_section("log-query", body)


if __name__ == "__main__":
    main()
