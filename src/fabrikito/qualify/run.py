"""Qualifying one release of an agent: drive it through the catalogue, read every capture, check messaging.

:func:`qualify` starts the binary offline (a stand-in model, a private tmux
server, an isolated HOME), one job per renderer in parallel, plus one for
the messaging checks; it saves every capture, and judges them with each
known dialect, newest first.  The release qualifies with the first dialect
that reads every capture as the catalogue expects *and* passes the
messaging checks; otherwise it fails closed and names what differed.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fabrikito.base.errors import FabrikitoError
from fabrikito.offline.claude_setup import Renderer
from fabrikito.qualify import catalogue, messaging, others
from fabrikito.qualify.capture import Capture, Job
from fabrikito.screen import releases

SIZE = (120, 40)
FIRST_CASE = "empty-box"  # when no dialect reads it, nothing else can be read
RELEASE_RE = re.compile(r"\b(\d+\.\d+\.\d+)\b")


class QualifyError(FabrikitoError):
    """The agent could not be run at all (not found, no version)."""

    exit_code = 2


@dataclass
class Outcome:
    """What a qualification found."""

    release: str
    binary: str
    dialect: str | None = None  # the dialect that read everything, if any
    problems: list[str] = field(default_factory=list)  # of the nearest dialect, or of driving the agent
    captures: list[Capture] = field(default_factory=list)
    folder: Path | None = None
    seconds: float = 0.0
    exe: str | None = None  # the program the seats ran (what a local record fingerprints)
    seats_started: int = 0
    agent: str = "claude"

    @property
    def qualified(self) -> bool:
        return self.dialect is not None and not self.problems


def renderer_of(agent: str) -> Renderer:
    """The one screen an agent other than Claude Code draws: Codex the alternate screen, Gemini inline."""
    return "fullscreen" if agent == "codex" else "inline"


def release_of(binary: str, timeout: float = 30.0) -> str:
    """The release ``binary --version`` prints (``2.1.316 (Claude Code)``)."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise QualifyError(f"{binary} --version did not run: {exc}") from None
    found = RELEASE_RE.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise QualifyError(f"{binary} --version printed no release (status {done.returncode}): {done.stdout[:200]!r}")
    return found.group(1)


def drive(
    job: Job, cases: Sequence[catalogue.Case], *, log: Callable[[str], None], agent: str | None = None
) -> list[str]:
    """Drive ``job`` through ``cases`` (each on fresh seats); what could not be driven.

    With ``agent``, a renderer whose empty box no dialect of that agent reads
    as ready is not driven further (nothing else could be read either).
    """
    problems = []
    for case in cases:
        if job.renderer not in case.renderers:
            continue
        t0 = time.monotonic()
        before = len(job.captures)
        try:
            case.drive(job)
        except Exception as exc:  # report it and go on: a state not reached is a difference
            detail = str(exc).strip().splitlines()
            problems.append(f"{job.prefix} {case.name}: could not be driven: {detail[0] if detail else exc!r}")
            log(traceback.format_exc(limit=3))
        finally:
            job.end()
        log(f"{job.prefix} {case.name} ({time.monotonic() - t0:.1f}s)")
        if case.name == FIRST_CASE and agent is not None:
            readable = _read_by_some_dialect(job.captures[before:], agent, job.release)
        else:
            readable = True
        if not readable:
            problems.append(
                f"{job.prefix}: no dialect reads the empty input box as ready, so no other state can be read "
                "either: the rest of the catalogue was not tried in this renderer"
            )
            break
    return problems


def _read_by_some_dialect(captures: Sequence[Capture], agent: str, release: str) -> bool:
    return bool(captures) and any(not judge_all(captures, d, release) for d in releases.dialects(agent))


def expectation_of(agent: str, capture: Capture) -> catalogue.Expect | None:
    """What ``capture`` of ``agent`` must be read as (by its catalogue)."""
    if agent != "claude":
        return others.expectation(agent, capture.case)
    snap = capture.snapshot()
    return catalogue.expectation(capture.case, snap.width, snap.height)


def judge_all(captures: Sequence[Capture], dialect: str, release: str) -> list[str]:
    """Every capture read by ``dialect`` against its expectation; the differences."""
    recogniser = releases.make(dialect, release)
    agent = releases.agent_of(dialect)
    problems = []
    for cap in captures:
        snap = cap.snapshot()
        exp = expectation_of(agent, cap)
        if exp is None:
            continue
        for problem in catalogue.judge(exp, recogniser.recognise(snap), recogniser):
            problems.append(f"{cap.name}: {problem}")
    return problems


def qualify(
    binary: str,
    *,
    agent: str = "claude",
    out: Path | None = None,
    quick: bool = True,
    cases: Sequence[str] | None = None,
    size: tuple[int, int] = SIZE,
    messaging_checks: bool = True,
    log: Callable[[str], None] = print,
    debug: Callable[[str], None] = lambda _line: None,
    release: str | None = None,
) -> Outcome:
    """Qualify ``binary``; save its captures in ``out`` (a new folder when ``None``).

    ``release`` is what ``binary --version`` prints, when the caller has asked already.
    """
    t0 = time.monotonic()
    release = release if release is not None else release_of(binary)
    catalogue_cases = catalogue.CASES if agent == "claude" else others.cases_for(agent)
    chosen = [c for c in catalogue_cases if (c.quick or not quick) and (cases is None or c.name in cases)]
    root = Path(tempfile.mkdtemp(prefix=f"fabrikito-qualify-{release}-"))
    folder = out if out is not None else root / "screens"
    outcome = Outcome(release=release, binary=binary, folder=folder, agent=agent)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            log(line)

    width, height = size
    name = releases.AGENT_NAMES.get(agent, agent)
    if agent == "claude":
        renderers: tuple[Renderer, ...] = ("inline", "fullscreen")
        say(f"qualifying {name} {release} ({binary}): {len(chosen)} states in both renderers, then messaging")
    else:
        renderers = (renderer_of(agent),)
        messaging_checks = False  # Claude Code's registry, hook and inbox: none of them exists here
        say(f"qualifying {name} {release} ({binary}): {len(chosen)} states")
    jobs = [
        Job(r, width, height, root / r, Path(binary), release, out=folder, log=debug, agent=agent) for r in renderers
    ]
    try:
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            for found in pool.map(lambda j: drive(j, chosen, log=say, agent=agent), jobs):
                outcome.problems += found
        for job in jobs:
            outcome.captures += job.captures
            outcome.seats_started += job.started
        # The oldest dialect that reads everything: the narrowest rules that fit this release.
        nearest: tuple[str, list[str]] | None = None
        for dialect in releases.dialects(agent):
            found = judge_all(outcome.captures, dialect, release)
            if nearest is None or len(found) < len(nearest[1]):
                nearest = (dialect, found)
            if not found:
                break
        if nearest is None:
            outcome.problems.append(f"fabrikito knows no dialect of {agent}")
        else:
            dialect, found = nearest
            outcome.problems += [f"as {dialect}: {p}" for p in found]
            if not found and messaging_checks and not outcome.problems:
                checked = _messaging(root, binary, release, dialect, size, say)
                outcome.problems += checked.problems
                outcome.exe = checked.exe
                outcome.seats_started += 2
            outcome.dialect = dialect if not outcome.problems else None
    finally:
        for job in jobs:
            job.close()
    outcome.seconds = time.monotonic() - t0
    write_report(outcome)
    return outcome


def _messaging(
    root: Path, binary: str, release: str, dialect: str, size: tuple[int, int], log: Callable[[str], None]
) -> messaging.Checked:
    t0 = time.monotonic()
    job = Job("inline", size[0], size[1], root / "messaging", Path(binary), release, log=lambda _line: None)
    try:
        return messaging.run(job, release, releases.make(dialect, release))
    except Exception as exc:  # a check that could not run is a difference, not a crash
        first = str(exc).strip().splitlines()
        return messaging.Checked([f"messaging checks could not run: {first[0] if first else repr(exc)}"], None)
    finally:
        job.close()
        log(f"messaging: registry, hook, inbox, labelled message ({time.monotonic() - t0:.1f}s)")


def write_report(outcome: Outcome) -> None:
    """``report.json`` and ``report.txt`` beside the captures."""
    if outcome.folder is None:
        return
    outcome.folder.mkdir(parents=True, exist_ok=True)
    data = {
        "agent": outcome.agent,
        "release": outcome.release,
        "binary": outcome.binary,
        "qualified": outcome.qualified,
        "dialect": outcome.dialect,
        "problems": outcome.problems,
        "captures": [c.name for c in outcome.captures],
        "seconds": round(outcome.seconds, 1),
    }
    (outcome.folder / "report.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    name = releases.AGENT_NAMES.get(outcome.agent, outcome.agent)
    lines = [f"{name} {outcome.release} ({outcome.binary}): " + ("qualified" if outcome.qualified else "NOT qualified")]
    lines += [f"- {p}" for p in outcome.problems]
    (outcome.folder / "report.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
