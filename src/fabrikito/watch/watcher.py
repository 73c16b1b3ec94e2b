"""The watcher: a round every ``[watch] round`` seconds, for as long as the team is up.

Each round reads the team (:mod:`~fabrikito.watch.observe`), works out its
open conditions (:mod:`~fabrikito.watch.conditions`), turns their changes
into events (:mod:`~fabrikito.watch.tracker`), appends each to the events
file (:mod:`~fabrikito.log.events`), hands the chosen ones to the notify
thread (:mod:`~fabrikito.watch.notify`), rewrites ``watcher.json`` (what
``fabrikito watch`` draws, and whose age is the watcher's liveness), then calls
each :class:`RoundConsumer` with the round's reading.

Started by ``up`` (:mod:`fabrikito.launch.watcherproc`) as
``python -m fabrikito.watch.watcher TEAM_FILE``; SIGTERM or SIGINT end it
after the round it is in.  Its errors go to ``watcher.err`` (stderr), one
line each, and never end it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from fabrikito.base import daemons, procs, statedir
from fabrikito.base.errors import FabrikitoError, StateFileError
from fabrikito.launch import watcherproc
from fabrikito.launch.status import Status
from fabrikito.log import events
from fabrikito.log.events import Event
from fabrikito.team import teamfile
from fabrikito.team.teamfile import Team
from fabrikito.watch.conditions import conditions
from fabrikito.watch.notify import Notifier
from fabrikito.watch.observe import local_part, observe
from fabrikito.watch.tracker import Tracker

STATE_VERSION = 1


class RoundConsumer(Protocol):
    """Something more to do with each round's reading (the seats' auto-restart plugs in here)."""

    def __call__(self, found: Status, now: float) -> None: ...


def default_consumers(team: Team) -> list[RoundConsumer]:
    """The consumers a team's watcher runs after each round: the auto-restart policy, for a team with a seat
    whose ``restart`` is ``on-exit`` (it looks at the panes itself, in one tmux call, and starts a seat again
    through ``up``: the round waits for that seat's box)."""
    from fabrikito.launch import autorestart

    if not autorestart.wanted(team):
        return []
    policy = autorestart.AutoRestart(team, autorestart.start_resumed)

    def restart_round(found: Status, now: float) -> None:
        del found  # what the policy needs (alive, exited, gone) is the panes', read as up reads them
        policy.round(autorestart.look(team), now)

    return [restart_round]


def report(line: str) -> None:
    """One line on the error file (the watcher's stderr), with the time."""
    try:
        sys.stderr.write(f"{events.local_time(time.time())} {line}\n")
        sys.stderr.flush()
    except OSError:
        pass


class Watcher:
    def __init__(self, team: Team, consumers: Sequence[RoundConsumer] = ()) -> None:
        self.team = team
        self.local = local_part(team)
        self.path = events.path_for(team.state_dir)
        self.consumers = list(consumers)
        self._check_file()
        self.tracker = Tracker(events.open_items(events.read(self.path)))
        self.unwritten: list[Event] = []
        self.notifier = Notifier(team, report)
        self.last_error = ""
        self.rounds = 0

    def _check_file(self) -> None:
        why = events.damaged(self.path)
        if why is not None:
            report(events.set_aside(self.path, why))

    def round(self, now: float | None = None) -> list[Event]:
        """One round; the events it wrote."""
        try:
            found = observe(self.local)
        except (FabrikitoError, OSError) as exc:
            self._error(f"the team could not be read this round: {exc}")
            return []
        now = time.time() if now is None else now
        new = self.tracker.step(conditions(found, self.team.watch, now), now)
        written = self._write([*self.unwritten, *new])
        if written:
            self._rotate()
        for event in new:
            self.notifier.submit(event)
        write_state(self.team, found, self.tracker, now)
        for consumer in self.consumers:
            try:
                consumer(found, now)
            except Exception as exc:  # a consumer's failure is its own, never the watcher's
                self._error(f"round consumer {consumer!r} failed: {exc!r}")
        self.rounds += 1
        return written

    def _write(self, pending: list[Event]) -> list[Event]:
        written: list[Event] = []
        for index, event in enumerate(pending):
            try:
                events.append(self.path, event)
            except (OSError, StateFileError) as exc:
                self._error(f"an event could not be written to {self.path} ({exc}): kept for the next round")
                if isinstance(exc, StateFileError):
                    self._check_file()
                self.unwritten = pending[index:]
                return written
            written.append(event)
        self.unwritten = []
        return written

    def _rotate(self) -> None:
        """The events file rotates as the message log does (the team file's ``log_max_size``, ``log_keep``)."""
        try:
            events.rotate_carrying(self.path, max_size=self.team.log_max_size, keep=self.team.log_keep)
        except (OSError, StateFileError) as exc:
            self._error(f"the events file {self.path} could not be rotated ({exc}): it grows until it can")

    def _error(self, line: str) -> None:
        if line != self.last_error:  # the same failure round after round is said once
            report(line)
        self.last_error = line

    def close(self) -> None:
        self.notifier.close()


def write_state(team: Team, found: Status, tracker: Tracker, now: float) -> None:
    """``watcher.json``: the round's reading as ``fabrikito watch`` draws it."""
    from fabrikito.launch.status import shown_time

    queue = found.queue
    depth = {q.role: q.waiting for q in queue.seats} if queue is not None else {}
    record = {
        "version": STATE_VERSION,
        "pid": os.getpid(),
        "at": round(now, 3),
        "team": team.name,
        "server_running": found.server_running,
        "worker": bool(queue is not None and queue.worker.running),
        "seats": [
            {
                "role": s.role,
                "session": s.session,
                "pane": s.pane,
                "state": s.state.value,
                "detail": s.detail,
                "since": s.state_since,
                "class": s.permission_class,
                "release": s.release,
                "host": s.host,
                "queued": depth.get(s.role, 0),
                "last_to": shown_time(s.last_to),
                "last_from": shown_time(s.last_from),
            }
            for s in found.seats
        ],
        "open": [e.to_json() for e in sorted(tracker.open.values(), key=lambda e: e.at)],
        "queued": [
            {"id": m.id, "role": m.role, "sender": m.sender, "state": m.state.value}
            for m in (queue.messages if queue is not None else ())
        ],
    }
    try:
        statedir.write_atomic(watcherproc.state_path(team), json.dumps(record).encode(), sync=False)
    except (OSError, StateFileError) as exc:
        report(f"{watcherproc.state_path(team)} could not be written: {exc}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fabrikito.watch.watcher TEAM_FILE", file=sys.stderr)
        return 2
    team = teamfile.load(Path(args[0]))
    statedir.ensure_state_dir(team.base_dir, team.name)
    fd = daemons.hold_lock(watcherproc.lock_path(team))
    if fd is None:
        return 0  # another watcher runs for this team
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    watcher = Watcher(team, default_consumers(team))
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {_ticks()}\n".encode(), 0)
    try:
        while not stop.is_set():
            started = time.monotonic()
            watcher.round()
            stop.wait(max(0.0, team.watch.round - (time.monotonic() - started)))
    finally:
        watcher.close()
        os.close(fd)
    return 0


def _ticks() -> int:
    try:
        return procs.info(os.getpid()).start_ticks
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return 0


if __name__ == "__main__":
    sys.exit(main())
