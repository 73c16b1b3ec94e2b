"""Capture real Claude Code screens as test fixtures, through the qualification catalogue.

Starts real seats (Claude Code 2.1.316 by default, offline, against the
stand-in) in private tmux servers, drives each into every state of
``fabrikito.qualify.catalogue`` (the quick ones ``fabrikito qualify`` uses and
the rest) at each size and renderer, and writes, per capture::

    tests/fixtures/screens/<release>/<renderer>-<cols>x<rows>-<case>.txt   capture-pane -p
    tests/fixtures/screens/<release>/<renderer>-<cols>x<rows>-<case>.ansi  capture-pane -p -e
    tests/fixtures/screens/<release>/<renderer>-<cols>x<rows>-<case>.json  pane metadata

Every state starts fresh seats and ends them.  The ``shell`` state is a plain
bash pane and is captured under the ``inline`` renderer only.

With ``--agent codex`` or ``--agent gemini`` it captures Codex CLI or Gemini
CLI (``--release``: default the pinned one; installed into
``.tools/<agent>-<release>/``) through their catalogue,
``fabrikito.qualify.others``, in the one screen each draws (Codex: the
alternate screen, saved as ``fullscreen``; Gemini: ``inline``), into
``tests/fixtures/screens/<agent>-<release>/`` by default.

Usage::

    .venv/bin/python scripts/capture_screens.py [--release 2.1.316] [--sizes 80x24,60x10]
        [--renderers inline,fullscreen] [--cases empty-box,busy] [--jobs 2] [--out DIR]
    .venv/bin/python scripts/capture_screens.py --agent codex [--sizes 120x40] [--cases busy]
        [--env COLORTERM=truecolor]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fabrikito.offline import claude_setup, other_setup
from fabrikito.qualify import others
from fabrikito.qualify.capture import Job
from fabrikito.qualify.catalogue import BY_NAME
from fabrikito.qualify.run import drive, renderer_of

SCRATCH = Path(tempfile.gettempdir()) / "fabrikito-screens"
SIZES = ["220x50", "120x40", "89x13", "80x24", "60x10"]
RENDERERS = ["inline", "fullscreen"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default=claude_setup.CLAUDE_VERSION)
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--renderers", default=",".join(RENDERERS))
    parser.add_argument("--cases", default=",".join(BY_NAME), help="any of: " + ", ".join(BY_NAME))
    parser.add_argument("--jobs", type=int, default=2, help="renderer/size combinations run at once")
    parser.add_argument("--out", type=Path, help="default: tests/fixtures/screens/<release>")
    parser.add_argument("--agent", default="claude", choices=["claude", *other_setup.AGENTS])
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="(codex, gemini) set for every seat and its tmux server (NAME= unsets it)",
    )
    args = parser.parse_args(argv)
    if args.agent != "claude":
        return capture_other(args)
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in BY_NAME]
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}")
    renderers = [r for r in args.renderers.split(",") if r]
    if any(r not in RENDERERS for r in renderers):
        parser.error(f"renderers are {' and '.join(RENDERERS)}")
    binary = claude_setup.ensure_claude(version=args.release)
    out = args.out or claude_setup.repo_root() / "tests" / "fixtures" / "screens" / args.release
    out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for size in args.sizes.split(","):
        width, height = (int(x) for x in size.split("x"))
        for renderer in renderers:
            root = SCRATCH / f"{renderer}-{size}"  # a fixed place, so the paths Claude Code shows stay the same
            jobs.append(Job(renderer, width, height, root, binary, args.release, out=out))
    chosen = [BY_NAME[c] for c in cases]
    failures: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for found in pool.map(lambda j: drive(j, chosen, log=print), jobs):
                failures += found
    finally:
        for job in jobs:
            job.close()
        shutil.rmtree(SCRATCH, ignore_errors=True)
    for line in failures:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failures else 0


def capture_other(args: argparse.Namespace) -> int:
    """Codex CLI or Gemini CLI through their catalogue, one job per size."""
    agent = args.agent
    release = args.release if args.release != claude_setup.CLAUDE_VERSION else other_setup.PINNED[agent]
    catalogue = {case.name: case for case in others.cases_for(agent)}
    cases = [c for c in args.cases.split(",") if c] if args.cases != ",".join(BY_NAME) else list(catalogue)
    unknown = [c for c in cases if c not in catalogue]
    if unknown:
        print(f"unknown cases: {', '.join(unknown)}; {agent} has {', '.join(catalogue)}", file=sys.stderr)
        return 2
    binary = other_setup.ensure_agent(agent, version=release)
    extra = dict(item.split("=", 1) for item in args.env)
    for name, value in extra.items():  # the tmux servers the jobs start inherit this environment
        if value:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)
    out = args.out or claude_setup.repo_root() / "tests" / "fixtures" / "screens" / f"{agent}-{release}"
    out.mkdir(parents=True, exist_ok=True)
    sizes = args.sizes if args.sizes != ",".join(SIZES) else "120x40"
    jobs = []
    for size in sizes.split(","):
        width, height = (int(x) for x in size.split("x"))
        root = SCRATCH / f"{agent}-{size}"
        jobs.append(
            Job(renderer_of(agent), width, height, root, binary, release, out=out, agent=agent, other_env=extra)
        )
    failures: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for found in pool.map(lambda j: drive(j, [catalogue[c] for c in cases], log=print), jobs):
                failures += found
    finally:
        for job in jobs:
            job.close()
        shutil.rmtree(SCRATCH, ignore_errors=True)
    for line in failures:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
