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
from pathlib import Path

from fabrikito.base import statedir
from fabrikito.base.errors import StateFileError
from fabrikito.base.values import frozen
from fabrikito.log.events import NOTED, RESOLVED, Event
from fabrikito.team.teamfile import Team
from fabrikito.team.watchconf import RESTART_KINDS

CURSOR_NAME = "notified.json"


@frozen
class Outcome:
    ok: bool
    what: str  # for people: what happened


def wanted(team: Team, event: Event) -> bool:
    """Whether ``event`` is one the team file asks to be told (a restart's ``exited`` note is not: the
    watcher's ``exited`` condition tells that exit)."""
    cfg = team.watch
    if cfg.notify is None or event.kind not in cfg.kinds or event.carried:
        return False
    if event.event == NOTED:
        return event.kind in RESTART_KINDS
    return event.event != RESOLVED or cfg.resolved


def environment(team: Team, event: Event) -> dict[str, str]:
    return {
        **os.environ,
        "FABRIKITO_EVENT": event.event,
        "FABRIKITO_KIND": event.kind,
        "FABRIKITO_SEAT": event.seat,
        "FABRIKITO_DETAIL": event.detail,
        "FABRIKITO_TEAM": team.name,
    }


def run_one(
    team: Team,
    argv: Sequence[str],
    event: Event,
    timeout: float,
    started: Callable[[subprocess.Popen[bytes] | None], None] = lambda _child: None,
) -> Outcome:
    """Run the notify command for ``event``; what happened.  ``started`` is given the child while it runs,
    then ``None``."""
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
    started(child)
    try:
        _, err = child.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(child)
        return Outcome(False, f"notify {argv[0]!r} was killed: still running after {timeout:g}s")
    finally:
        started(None)
    if child.returncode != 0:
        said = err.decode("utf-8", "replace").strip().replace("\n", " | ")[:300]
        return Outcome(False, f"notify {argv[0]!r} exited with status {child.returncode}: {said}")
    return Outcome(True, f"notify {argv[0]!r} ran (exit status 0)")


def kill(child: subprocess.Popen[bytes]) -> None:
    """End a notify command and its whole process group."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass
    child.communicate()


# -- what was told: the cursor ----------------------------------------------------------


def cursor_path(team: Team) -> Path:
    return team.state_dir / CURSOR_NAME


def read_cursor(team: Team) -> tuple[float, str] | None:
    """The last event a notify command finished for (its time and key), ``None`` when none is recorded."""
    try:
        data = json.loads(statedir.read_plain(cursor_path(team)) or b"null")
        return float(data["at"]), str(data["key"])
    except (OSError, StateFileError, ValueError, KeyError, TypeError):
        return None


def write_cursor(team: Team, event: Event) -> None:
    data = json.dumps({"at": round(event.at, 3), "key": event.key}).encode()
    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.write_atomic(cursor_path(team), data, sync=False)


def owed(team: Team, history: Sequence[Event]) -> list[Event]:
    """The events of ``history`` (the events file, oldest first) written after the last one told and not
    told yet, of the kinds chosen: a watcher started again tells these first, once.  With no cursor yet (the
    first watcher of the team) nothing is owed: the cursor is set at the file's last event."""
    mark = read_cursor(team)
    if mark is None:
        write_cursor(team, history[-1] if history else Event(0.0, "", "", "", "", 0.0, ""))
        return []
    at = round(mark[0], 3)
    index = next(
        (i for i in range(len(history) - 1, -1, -1) if (round(history[i].at, 3), history[i].key) == mark), None
    )
    after = history[index + 1 :] if index is not None else [e for e in history if round(e.at, 3) > at]
    return [e for e in after if wanted(team, e)]


class Notifier:
    """The commands of one watcher, run in order in one thread; failures go to ``report``.  After each event
    whose command finished (ran, failed or timed out) the cursor (``notified.json``) names it; at
    :meth:`close` a command still running is killed, so its event is told again, once, by the next watcher
    (:func:`owed`)."""

    def __init__(self, team: Team, report: Callable[[str], None]) -> None:
        self.team = team
        self.report = report
        self.jobs: queue.Queue[Event | None] = queue.Queue()
        self.child: subprocess.Popen[bytes] | None = None
        self.closing = threading.Event()
        self.killed = False
        self.thread = threading.Thread(target=self._run, name="notify", daemon=True)
        self.thread.start()

    def submit(self, event: Event) -> None:
        if wanted(self.team, event):
            self.jobs.put(event)

    def close(self, wait: float = 2.0) -> None:
        """Let the running command finish for ``wait`` seconds, then kill it; what is queued is left (told by
        the next watcher)."""
        self.closing.set()
        self.jobs.put(None)
        self.thread.join(wait)
        child = self.child
        if child is not None and child.poll() is None:
            self.killed = True
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
        self.thread.join(1.0)

    def _started(self, child: subprocess.Popen[bytes] | None) -> None:
        self.child = child

    def _run(self) -> None:
        while not self.closing.is_set():
            event = self.jobs.get()
            if event is None:
                return
            argv = self.team.watch.notify
            if argv is None:
                continue
            began = time.monotonic()
            outcome = run_one(self.team, argv, event, self.team.watch.notify_timeout, self._started)
            if self.killed:
                return  # killed by close: not told; the next watcher tells it
            if not outcome.ok:
                self.report(f"{outcome.what} (event {event.kind} {event.seat}, {time.monotonic() - began:.1f}s)")
            try:
                write_cursor(self.team, event)
            except (OSError, StateFileError) as exc:
                self.report(f"{cursor_path(self.team)} could not be written ({exc}): an event may be told twice")
