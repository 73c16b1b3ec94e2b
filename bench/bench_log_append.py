"""16 processes appending 10,000 lines each to one messages.log through the hook's path.

Each line is one ``write()`` on an ``O_APPEND`` descriptor
(:func:`fabrikito.log.msglog.append_hook`).  Lines vary from a few bytes to
1 KiB.  Afterwards every line must parse whole, and each writer's lines must
all be there, in its order: no line torn, none lost.  Prints lines per second
and writes the "log-append" section of docs/benchmarks.md.
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

from bench.report import write_section  # noqa: E402

from fabrikito.log import msglog  # noqa: E402

WRITERS = int(os.environ.get("BENCH_WRITERS", "16"))
LINES = int(os.environ.get("BENCH_LINES", "10000"))


def writer(log: str, n: int, barrier: mp.synchronize.Barrier) -> None:
    lines = [
        msglog.format_line(0, f"w{n}", "em", msglog.Outcome.SENT, f"{i} " + "x\t" * ((i * 7919) % 256))
        for i in range(LINES)
    ]
    barrier.wait()
    for line in lines:
        if not msglog.append_hook(log, line):
            raise SystemExit(f"writer {n}: a line was not written")


def main() -> None:
    ctx = mp.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp:
        log = str(Path(tmp) / "messages.log")
        barrier = ctx.Barrier(WRITERS + 1)
        procs = [ctx.Process(target=writer, args=(log, n, barrier)) for n in range(WRITERS)]
        for p in procs:
            p.start()
        barrier.wait()
        started = time.perf_counter()
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - started
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
        data = Path(log).read_bytes()
    seen: dict[bytes, int] = {}
    torn = 0
    for line in data.splitlines(keepends=True):
        record = msglog.parse_line(line)
        if not isinstance(record, msglog.Record):
            torn += 1
            continue
        index = int(record.message.split(b" ", 1)[0])
        if index != seen.get(record.sender, -1) + 1:
            torn += 1
        seen[record.sender] = index
    total = WRITERS * LINES
    found = sum(count + 1 for count in seen.values())
    ok = torn == 0 and found == total
    body = "\n".join(
        [
            "## The message log: concurrent appends",
            "",
            f"`python bench/bench_log_append.py`: {WRITERS} processes append {LINES:,} lines each "
            f"(up to 1 KiB, {len(data) / 1e6:.0f} MB in all) through `msglog.append_hook`.",
            "",
            f"- {total / elapsed:,.0f} lines per second ({total:,} lines in {elapsed:.2f} s)",
            f"- lines found: {found:,} of {total:,}; torn or out of order: {torn}: **{'OK' if ok else 'FAILED'}**",
        ]
    )
    print(body)
    write_section("log-append", body)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
