"""``fabrikito --help`` against a bare interpreter start, with argparse's own share shown.

Runs, interleaved, in the same environment: ``python -c pass`` (the bare
start), ``python -c 'import argparse'`` (the floor of any argparse command
line: argparse brings ``re`` and ``enum``), the installed ``fabrikito --help``
(every command listed, none of them built), ``fabrikito say --help`` (one
command built), and the same through the checkout's ``./fabrikito`` script.
Prints medians and ratios and writes the "help" section of docs/benchmarks.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.report import fabrikito_cli, write_section  # noqa: E402 -- after the path is set

RUNS = int(os.environ.get("BENCH_RUNS", "40"))
GOAL = 2.5


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    cli = fabrikito_cli()
    py = sys.executable
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import argparse'": [py, "-c", "import argparse"],
        "fabrikito --help": [*cli, "--help"],
        "fabrikito say --help": [*cli, "say", "--help"],
        "./fabrikito --help (a checkout's wrapper)": [str(ROOT / "fabrikito"), "--help"],
    }
    for argv in cases.values():  # warm up the page cache
        timed(argv)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(RUNS):
        for name, argv in cases.items():
            times[name].append(timed(argv))
    median = {name: statistics.median(v) * 1000 for name, v in times.items()}
    base = median["python -c pass"]
    rows = [
        f"| {name} | {median[name]:.1f} | {min(times[name]) * 1000:.1f} | {median[name] / base:.2f}x |"
        for name in cases
    ]
    ratio = median["fabrikito --help"] / base
    fastest = min(times["fabrikito --help"]) / min(times["python -c pass"])
    argparse_ratio = median["python -c 'import argparse'"] / base
    load = os.getloadavg()[0]
    body = "\n".join(
        [
            "## `fabrikito --help`: wall time against a bare interpreter start",
            "",
            f"`python bench/bench_help.py`: {RUNS} runs of each, interleaved; `fabrikito` is the installed "
            f"command (`{' '.join(Path(a).name for a in cli)}`), its package byte-compiled.",
            "",
            "| command | median ms | min ms | ratio to bare start |",
            "|---|---|---|---|",
            *rows,
            "",
            f"`fabrikito --help` / bare start: **{ratio:.2f}x** (goal: {GOAL}x; "
            f"{'met' if ratio <= GOAL else 'not met'}; fastest run against fastest run: {fastest:.2f}x). "
            "Importing argparse alone is "
            f"{argparse_ratio:.2f}x (it imports `re`, and `re` imports `enum`). "
            "The parser lists every command from the command table without building any; `say --help` builds "
            "only `say`'s arguments. argparse's help layout is kept, with the terminal width read without "
            "`shutil`, and argparse's gettext lookups skipped when the interpreter has no translations to find.",
            f"Load average at the end of the run: {load:.1f}.",
        ]
    )
    print(body)
    write_section("help", body)


if __name__ == "__main__":
    main()
