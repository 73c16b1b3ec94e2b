"""16 processes appending to messages.log while two helpers rotate it: nothing lost, torn or doubled.

The writers are bench_log_append.py's (``BENCH_LINES`` lines each, as the
hook appends: one ``write()`` per line on an ``O_APPEND`` descriptor opened
for the line); two rotators (the worker and the
command server can both be running) call :func:`fabrikito.base.rotate.rotate`
in a loop with a small size limit, so the log rotates hundreds of times during
the run.  Afterwards every generation is read: every line must be there once,
whole, in its writer's order across the files.  The same writers without
rotation are the baseline in the same run (the append rate's cost).

Writes the "log-rotate" section of docs/benchmarks.md.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.bench_log_append import LINES, WRITERS, writer  # noqa: E402 -- the same writers, with rotation
from bench.report import write_section  # noqa: E402

from fabrikito.base import rotate  # noqa: E402
from fabrikito.log import msglog  # noqa: E402

MAX_SIZE = int(os.environ.get("BENCH_MAX_SIZE", str(1024 * 1024)))


def rotator(log: str, stop: mp.synchronize.Event, counter: mp.sharedctypes.Synchronized[int]) -> None:
    while not stop.is_set():
        if rotate.rotate(log, max_size=MAX_SIZE, keep=100_000):
            with counter.get_lock():
                counter.value += 1


def run(rotating: bool) -> tuple[float, int, dict[str, int]]:
    ctx = mp.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp:
        log = str(Path(tmp) / "messages.log")
        barrier = ctx.Barrier(WRITERS + 1)
        stop = ctx.Event()
        counter = ctx.Value("i", 0)
        procs = [ctx.Process(target=writer, args=(log, n, barrier)) for n in range(WRITERS)]
        helpers = [ctx.Process(target=rotator, args=(log, stop, counter)) for _ in range(2 if rotating else 0)]
        for p in procs + helpers:
            p.start()
        barrier.wait()
        started = time.perf_counter()
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - started
        stop.set()
        for p in helpers:
            p.join()
        assert all(p.exitcode == 0 for p in procs + helpers), [p.exitcode for p in procs + helpers]
        files = [p for p in Path(tmp).iterdir() if not p.name.endswith(".lock")]
        return elapsed, counter.value, check(log, files)


def check(log: str, files: list[Path]) -> dict[str, int]:
    """Every line once, whole, in its writer's order across the generations read oldest first."""
    where: dict[bytes, int] = {}
    doubled = torn = 0
    for number, path in enumerate(files):
        for line in path.read_bytes().splitlines(keepends=True):
            if line in where:
                doubled += 1
            where[line] = number
    seen: dict[bytes, int] = {}
    order = 0
    data = rotate.read_all(log)
    for line in data.split(b"\n")[:-1]:
        record = msglog.parse_line(line + b"\n")
        if not isinstance(record, msglog.Record):
            torn += 1
            continue
        index = int(record.message.split(b" ", 1)[0])
        if index != seen.get(record.sender, -1) + 1:
            order += 1
        seen[record.sender] = index
    found = sum(count + 1 for count in seen.values())
    return {"found": found, "torn": torn, "doubled": doubled, "out_of_order": order, "files": len(files)}


def main() -> None:
    total = WRITERS * LINES
    base_time, _, base = run(rotating=False)
    rot_time, rotations, got = run(rotating=True)
    ok = got["found"] == total and got["torn"] == got["doubled"] == got["out_of_order"] == 0 and rotations > 0
    body = "\n".join(
        [
            "## The message log: appends while it rotates (issue 26): bench/bench_log_rotate.py",
            "",
            f"{WRITERS} processes append {LINES:,} lines each (up to 1 KiB) as the hook does, while two rotators "
            f"rotate at {MAX_SIZE // 1024} KiB as fast as they can.",
            "",
            f"- rotations during the run: {rotations:,} ({got['files']:,} files at the end)",
            f"- lines found: {got['found']:,} of {total:,}; lost {total - got['found']}, torn {got['torn']}, "
            f"in two files {got['doubled']}, out of their writer's order {got['out_of_order']}: "
            f"**{'OK' if ok else 'FAILED'}**",
            f"- append rate: {total / rot_time:,.0f} lines/s rotating, {total / base_time:,.0f} lines/s not "
            f"(same run; rotating / not: **{base_time / rot_time:.2f}x**) (without rotation: {base['found']:,} found)",
        ]
    )
    print(body)
    write_section("log-rotate", body)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
