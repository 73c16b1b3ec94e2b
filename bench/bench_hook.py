"""The SendMessage hook's wall time per call against a bare interpreter start.

Runs, interleaved, in the same environment: ``python -c pass`` (the bare
start), ``python -m`` of an empty module (the same start as the hook's, with
runpy), and the hook itself (``python -m fabrikito.log.hook``, as seats run it)
on a real success payload, with its roster cache warm.  Prints medians and
ratios, and writes the "hook" section of docs/benchmarks.md.
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
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "src"))

from bench.report import write_section  # noqa: E402

from fabrikito.log.hook import command_argv  # noqa: E402

PAYLOAD = ROOT / "tests" / "fixtures" / "hook-payloads" / "success-same-mode.json"
RUNS = int(os.environ.get("BENCH_RUNS", "60"))
TEAM = (
    'name = "sf"\ntmux_socket = "bench"\n'
    '[[seat]]\nrole = "tl"\nsession = "sf-tl"\n'
    '[[seat]]\nrole = "be"\nsession = "sf-be"\n'
)


def timed(argv: list[str], *, stdin: bytes, env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    payload = PAYLOAD.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        team = Path(tmp) / "team.toml"
        team.write_text(TEAM)
        (Path(tmp) / "empty_module.py").write_text("")
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{tmp}"}
        py = sys.executable
        cases = {
            "python -c pass": [py, "-c", "pass"],
            "python -m empty_module": [py, "-m", "empty_module"],
            "hook (python -m fabrikito.log.hook)": [
                py,
                "-m",
                "fabrikito.log.hook",
                "--team",
                str(team),
                "--role",
                "be",
            ],
            "hook as seats run it (python -S -c, see hook.command_line)": command_argv(str(team), "be", python=py),
        }
        for argv in cases.values():  # warm up: page cache, bytecode (when allowed), the roster cache
            timed(argv, stdin=payload, env=env, cwd=tmp)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(RUNS):
            for name, argv in cases.items():
                times[name].append(timed(argv, stdin=payload, env=env, cwd=tmp))
        lines = len((Path(tmp) / ".state" / "sf" / "messages.log").read_bytes().splitlines())
        assert lines == 2 * (RUNS + 1), lines
    median = {name: statistics.median(v) * 1000 for name, v in times.items()}
    base, with_runpy, hook_m, hook = median.values()
    rows = [f"| {name} | {median[name]:.1f} | {min(times[name]) * 1000:.1f} |" for name in cases]
    bytecode = "off (PYTHONDONTWRITEBYTECODE set)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    body = "\n".join(
        [
            "## The SendMessage hook: wall time per call",
            "",
            f"`python bench/bench_hook.py`: {RUNS} runs of each, interleaved; bytecode caching {bytecode}.",
            "",
            "| command | median ms | min ms |",
            "|---|---|---|",
            *rows,
            "",
            f"The hook as seats run it (`PYTHONPATH=… python -S -c …`, see `hook.command_line`) / bare start "
            f"(`-c pass`): **{hook / base:.2f}x** (goal: 1.25x). "
            f"Through `python -m fabrikito.log.hook` it would be {hook_m / base:.2f}x: `-m` alone costs "
            f"{with_runpy - base:.1f} ms (runpy imports importlib.util, contextlib, collections, functools) before "
            "the hook's own code runs, and the site module (skipped by `-S`) a few more.",
        ]
    )
    print(body)
    write_section("hook", body)


if __name__ == "__main__":
    main()
