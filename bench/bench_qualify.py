"""``fabrikito qualify``'s wall time against the floor it cannot go under, in the same run.

The floor is one seat of the same binary started to its empty box (what every
state of the catalogue needs at least once per renderer).  Prints the
qualification's time, the seat start's median over a few tries, their ratio and
how many seats the qualification started, and writes the "qualify" section of
docs/benchmarks.md.  Goal: under a minute on these machines.

Usage: ``.venv/bin/python bench/bench_qualify.py [--release 2.1.316]``
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench.report import write_section  # noqa: E402

from fabrikito.base.tmux import Server  # noqa: E402
from fabrikito.offline import claude_setup, seatkit  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.qualify.run import qualify  # noqa: E402


def seat_start(binary: Path, root: Path) -> float:
    server = Server(socket_name=f"fab-bq-{secrets.token_hex(4)}", timeout=10.0)
    standin = StandIn().start()
    home = claude_setup.make_home(root / "home")
    try:
        started = time.monotonic()
        seat = seatkit.start_seat(
            server,
            binary=binary,
            role="a",
            home=home,
            cwd=root / "w",
            base_url=standin.base_url("a"),
            width=120,
            height=40,
        )
        took = time.monotonic() - started
        seatkit.stop_pids([seat.pid])
        return took
    finally:
        server.kill_server()
        seatkit.stop_pids(seatkit.home_pids(home))
        standin.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default=claude_setup.CLAUDE_VERSION)
    args = parser.parse_args()
    binary = claude_setup.ensure_claude(version=args.release)
    root = Path(tempfile.mkdtemp(prefix="fabrikito-bench-qualify-"))
    starts = [seat_start(binary, root / f"s{i}") for i in range(3)]
    floor = statistics.median(starts)
    outcome = qualify(str(binary), out=root / "screens", log=lambda line: print(f"  {line}", flush=True))
    seats = outcome.seats_started
    total = outcome.seconds
    print(f"qualify {args.release}: {total:.1f}s ({'qualified' if outcome.qualified else 'NOT qualified'})")
    print(f"one seat to its empty box: median {floor:.2f}s of {[round(s, 2) for s in starts]}")
    print(f"ratio: {total / floor:.1f}x one seat start, about {seats} seat starts")
    body = f"""## `fabrikito qualify` (`bench/bench_qualify.py`)

`python bench/bench_qualify.py --release {args.release}`: one qualification of the real binary
(both renderers in parallel, then the messaging checks), and, in the same run, one seat of the same
binary started to its empty box (median of 3).

| measure | value |
|---|---|
| qualify, wall time | {total:.1f} s ({"qualified" if outcome.qualified else "NOT qualified"}) |
| one seat to its empty box (median) | {floor:.2f} s |
| ratio | {total / floor:.1f}x, for about {seats} seats started |

Goal: under a minute here. The catalogue starts a fresh seat for each state (a state must not
inherit another's hints or history), two renderers at a time: the time is the seats' own start-up,
which is CPU-bound (about 1.5 CPU-seconds each on these 2 cores), plus the waits each state needs
(a slow turn's spinner, two turns for a prompt suggestion).
"""
    write_section("qualify", body)
    return 0 if outcome.qualified else 1


if __name__ == "__main__":
    raise SystemExit(main())
