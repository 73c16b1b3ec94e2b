"""The watcher: a round every ``[watch] round`` seconds, for as long as the team is up.

Each round reads the team (:mod:`~fabrikito.watch.observe`), works out its
open conditions (:mod:`~fabrikito.watch.conditions`), turns their changes
into events (:mod:`~fabrikito.watch.tracker`), appends each to the events
file (:mod:`~fabrikito.log.events`), hands the chosen ones to the notify
thread (:mod:`~fabrikito.watch.notify`), rewrites ``watcher.json`` (what
``fabrikito watch`` draws, and whose age is the watcher's liveness), then calls
each :class:`RoundConsumer` with the round's reading.

Started by ``up`` (:mod:`fabrikito.launch.watcherproc`) as
``python -m fabrikito.watch.watcher TEAM_FILE``; SIGTERM, SIGINT or SIGHUP end
it after the round it is in.  It ends by itself with its team: once the
team's state folder or its team file is gone, or the team's tmux server has
been gone for :data:`TEAM_GONE_AFTER` seconds (every seat told as gone by
then) and no seat of it restarts on exit.  A changed team file is read again
between rounds (thresholds, ``notify``, the restart policy); one that does
not load is said once and the last good one kept.  Its errors go to
``watcher.err`` (stderr), one line each, and never end it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from fabrikito.base import daemons, procs, statedir
from fabrikito.base.errors import FabrikitoError, StateFileError
from fabrikito.launch import watcherproc
from fabrikito.launch.status import Status
from fabrikito.log import events
from fabrikito.log.events import Event
from fabrikito.team import hosts, teamfile
from fabrikito.team.teamfile import Team
from fabrikito.watch import notify, remote
from fabrikito.watch.conditions import conditions
from fabrikito.watch.notify import Notifier
from fabrikito.watch.observe import local_part, observe
from fabrikito.watch.tracker import Tracker

STATE_VERSION = 1
FILE_GONE_AFTER = 2.0  # seconds without the team file before the watcher ends
TEAM_GONE_AFTER = 30.0  # seconds without the team's tmux server before a watcher with nothing to restart ends


class RoundConsumer(Protocol):
    """Something more to do with each round's reading (the seats' auto-restart plugs in here)."""

    def __call__(self, found: Status, now: float) -> None: ...


class RestartRound:
    """The auto-restart policy as a round consumer, for the seats here whose ``restart`` is ``on-exit`` (it
    takes each pane's state from the round's reading, and starts a seat again through ``up``: the round waits
    for that seat's box).  A team file read again gives it the new team; its restart history is kept."""

    def __init__(self, team: Team) -> None:
        from fabrikito.launch import autorestart

        self.policy = autorestart.AutoRestart(team, autorestart.start_resumed)
        self.wanted = autorestart.wanted(local_part(team))

    def retarget(self, team: Team) -> None:
        from fabrikito.launch import autorestart

        self.policy.team = team
        self.wanted = autorestart.wanted(local_part(team))

    def __call__(self, found: Status, now: float) -> None:
        from fabrikito.launch import autorestart

        if self.wanted:
            self.policy.round(autorestart.seen_in(found), now)  # only this machine's seats are in the reading


def default_consumers(team: Team) -> list[RoundConsumer]:
    """The consumers a team's watcher runs after each round: the auto-restart policy (:class:`RestartRound`;
    it acts only while a seat here has ``restart = "on-exit"``)."""
    return [RestartRound(team)]


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
        history = events.read(self.path)
        self.tracker = Tracker(events.open_items(history))
        self.unwritten: list[Event] = []
        self.notifier = Notifier(team, report)
        for event in notify.owed(team, history):  # written before a watcher ended, and not told: told now
            self.notifier.submit(event)
        self.read_to = events.size(self.path)  # what notify has been handed of the file, by byte
        self.hosts = remote_hosts(team)
        self.last_error = ""
        self.rounds = 0
        self.stamp = file_stamp(team.path)
        self.server_gone_since: float | None = None
        self.file_gone_since: float | None = None

    def ended(self, now: float | None = None) -> str | None:
        """Why the watcher's team is gone, so it ends (``None`` while it is not): said on its error file."""
        now = time.time() if now is None else now
        if not self.team.state_dir.is_dir():
            return f"the team's state folder {self.team.state_dir} is gone: the watcher ends"
        if self.team.path.exists():
            self.file_gone_since = None
        elif self.file_gone_since is None:
            self.file_gone_since = now  # an editor may remove the file a moment before writing it again
        elif now - self.file_gone_since >= FILE_GONE_AFTER:
            return f"the team file {self.team.path} is gone: the watcher ends (`fabrikito up` starts it again)"
        gone = self.server_gone_since
        if gone is None or now - gone < TEAM_GONE_AFTER or self.unwritten:
            return None
        if any(getattr(c, "wanted", False) for c in self.consumers):
            return None  # its restarts bring the seats back
        return (
            f"the team's tmux server has been gone for {now - gone:.0f}s and every seat was told as gone: the "
            "watcher ends (`fabrikito up` starts the team and its watcher again)"
        )

    def reload(self) -> bool:
        """Read the team file again if it changed since it was last read; ``True`` when the new one is used.
        One that does not load, or names another team, is said once and the one read before is kept."""
        stamp = file_stamp(self.team.path)
        if stamp is None or stamp == self.stamp:
            return False
        self.stamp = stamp
        try:
            team = teamfile.load(self.team.path)
        except FabrikitoError as exc:
            self._error(f"the changed team file was not taken, the one read before is kept: {exc}")
            return False
        if team.name != self.team.name or team.state_dir != self.team.state_dir:
            self._error(
                f"the team file now names team {team.name!r}: this watcher keeps watching {self.team.name!r} "
                "(`fabrikito down`, then `fabrikito up`, to watch the new one)"
            )
            return False
        self.team = team
        self.local = local_part(team)
        self.notifier.team = team
        if self.hosts is not None:
            self.hosts.close()  # the hosts may have changed: read them as the new file says
        self.hosts = remote_hosts(team)
        for consumer in self.consumers:
            retarget = getattr(consumer, "retarget", None)
            if callable(retarget):
                retarget(team)
        report(f"the team file changed: read again ({team.path})")
        return True

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
        if found.server_running or not self.local.seats:
            self.server_gone_since = None
        elif self.server_gone_since is None:
            self.server_gone_since = now
        readings = self.hosts.latest() if self.hosts is not None else {}
        found_now = conditions(found, self.team.watch, now)
        found_now.update(remote.conditions(self.team, readings))  # the other hosts' watchers tell the rest
        new = self.tracker.step(found_now, now)
        written = self._write([*self.unwritten, *new])
        write_state(self.team, found, self.tracker, now, readings)
        for consumer in self.consumers:
            try:
                consumer(found, now)
            except Exception as exc:  # a consumer's failure is its own, never the watcher's
                self._error(f"round consumer {consumer!r} failed: {exc!r}")
        if self.tell_new():
            self._rotate()
        self.rounds += 1
        return written

    def tell_new(self) -> bool:
        """Hand notify every line appended to the events file since the last round: this round's events, and
        the restart notes of the consumers and of ``up`` (one order: the file's).  ``True`` when there were."""
        found, self.read_to = events.read_from(self.path, self.read_to)
        for event in found:
            self.notifier.submit(event)
        return bool(found)

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
            if events.rotate_carrying(self.path, max_size=self.team.log_max_size, keep=self.team.log_keep):
                self.read_to = events.size(self.path)  # the new file holds only carried copies, told before
        except (OSError, StateFileError) as exc:
            self._error(f"the events file {self.path} could not be rotated ({exc}): it grows until it can")

    def _error(self, line: str) -> None:
        if line != self.last_error:  # the same failure round after round is said once
            report(line)
        self.last_error = line

    def close(self) -> None:
        if self.hosts is not None:
            self.hosts.close()
        self.notifier.close()


def remote_hosts(team: Team) -> remote.Hosts | None:
    """The other hosts whose watchers this one reads: on the team's machine of a team across hosts only."""
    return remote.Hosts(team) if team.across_hosts and hosts.here_of(team) is None else None


def file_stamp(path: Path) -> tuple[int, int, int, int, int] | None:
    """What changes when a file is written or replaced (``None`` when it cannot be read)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size


def write_state(
    team: Team, found: Status, tracker: Tracker, now: float, readings: Mapping[str, remote.Reading] | None = None
) -> None:
    """``watcher.json``: the round's reading as ``fabrikito watch`` draws it (with the other hosts' seats and
    open items, from their watchers, named with their host)."""
    from fabrikito.launch.status import shown_time

    queue = found.queue
    depth = {q.role: q.waiting for q in queue.seats} if queue is not None else {}
    seats: list[dict[str, Any]] = [
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
            "conversation": s.conversation,
            "restarts": s.restarts,
        }
        for s in found.seats
    ]
    items: list[dict[str, Any]] = [e.to_json() for e in sorted(tracker.open.values(), key=lambda e: e.at)]
    if readings is not None and team.across_hosts:
        by_role = {str(r["role"]): r for r in [*seats, *remote.seat_rows(team, readings)]}
        seats = [by_role[role] for role in team.roles if role in by_role]
        items = sorted([*items, *remote.open_items(readings)], key=lambda i: float(i.get("at", 0)))
    record = {
        "version": STATE_VERSION,
        "pid": os.getpid(),
        "at": round(now, 3),
        "team": team.name,
        "server_running": found.server_running,
        "worker": bool(queue is not None and queue.worker.running),
        "seats": seats,
        "open": items,
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
            why = watcher.ended()
            if why is not None:
                report(why)
                break
            watcher.reload()
            stop.wait(max(0.0, watcher.team.watch.round - (time.monotonic() - started)))
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
