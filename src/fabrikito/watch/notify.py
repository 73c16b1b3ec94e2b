"""Telling the owner: the team file's ``notify`` command, run for each chosen event, off the round.

The command gets the event as one JSON object on stdin and in environment
variables (``FABRIKITO_EVENT`` opened/resolved, ``FABRIKITO_KIND``,
``FABRIKITO_SEAT``, ``FABRIKITO_DETAIL``, ``FABRIKITO_TEAM``), on top of the
watcher's own environment.  Commands run one after another in a thread of
their own, so a slow one never holds up a round and none is lost while the
watcher runs; one still running after ``notify_timeout`` is killed (its whole
process group).  Every failure (cannot start, non-zero exit, killed) is a
line in the watcher's error file.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from fabrikito.base.values import frozen
from fabrikito.log.events import RESOLVED, Event
from fabrikito.team.teamfile import Team


@frozen
class Outcome:
    ok: bool
    what: str  # for people: what happened


def wanted(team: Team, event: Event) -> bool:
    """Whether ``event`` is one the team file asks to be told."""
    cfg = team.watch
    return cfg.notify is not None and event.kind in cfg.kinds and (event.event != RESOLVED or cfg.resolved)


def environment(team: Team, event: Event) -> dict[str, str]:
    return {
        **os.environ,
        "FABRIKITO_EVENT": event.event,
        "FABRIKITO_KIND": event.kind,
        "FABRIKITO_SEAT": event.seat,
        "FABRIKITO_DETAIL": event.detail,
        "FABRIKITO_TEAM": team.name,
    }


def run_one(team: Team, argv: Sequence[str], event: Event, timeout: float) -> Outcome:
    """Run the notify command for ``event``; what happened."""
    payload = json.dumps({**event.to_json(), "team": team.name}, ensure_ascii=False).encode()
    try:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=str(team.base_dir),
            env=environment(team, event),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return Outcome(False, f"notify {argv[0]!r} could not be started ({exc.strerror or exc}): fix 'notify'")
    try:
        _, err = child.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        child.communicate()
        return Outcome(False, f"notify {argv[0]!r} was killed: still running after {timeout:g}s")
    if child.returncode != 0:
        said = err.decode("utf-8", "replace").strip().replace("\n", " | ")[:300]
        return Outcome(False, f"notify {argv[0]!r} exited with status {child.returncode}: {said}")
    return Outcome(True, f"notify {argv[0]!r} ran (exit status 0)")


class Notifier:
    """The commands of one watcher, run in order in one thread; failures go to ``report``."""

    def __init__(self, team: Team, report: Callable[[str], None]) -> None:
        self.team = team
        self.report = report
        self.jobs: queue.Queue[Event | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="notify", daemon=True)
        self.thread.start()

    def submit(self, event: Event) -> None:
        if wanted(self.team, event):
            self.jobs.put(event)

    def close(self, wait: float = 2.0) -> None:
        self.jobs.put(None)
        self.thread.join(wait)

    def _run(self) -> None:
        while True:
            event = self.jobs.get()
            if event is None:
                return
            argv = self.team.watch.notify
            if argv is None:
                continue
            started = time.monotonic()
            outcome = run_one(self.team, argv, event, self.team.watch.notify_timeout)
            if not outcome.ok:
                self.report(f"{outcome.what} (event {event.kind} {event.seat}, {time.monotonic() - started:.1f}s)")
