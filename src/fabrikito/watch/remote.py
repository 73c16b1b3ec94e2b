"""The team's other hosts, as its own machine reads their watchers.

Each host with seats runs a watcher of its own (``up`` starts it there as it
starts it here): it reads its seats, writes its events file and runs the team
file's ``notify`` for them, there.  The team's machine reads them over ssh
(:mod:`fabrikito.base.ssh`, ``fabrikito _host events`` and ``_host watch``,
:mod:`fabrikito.launch.hostside`):

* :class:`Hosts`, in the watcher here: every :data:`POLL` seconds, in a thread
  of its own (a host that does not answer never holds up a round), each host's
  watcher state.  The seats of a host that cannot be reached become
  ``unreachable`` conditions here, those of a host whose watcher does not run
  ``unwatched`` ones (:func:`conditions`); its seats and open items go into
  this machine's ``watcher.json``, named with the host, for ``fabrikito watch``.
* :func:`events_of` and :func:`follow_all`, for ``fabrikito events``: every
  host's events file with this machine's, merged by time, each named with its
  host.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fabrikito.base.errors import FabrikitoError
from fabrikito.base.ssh import HostError
from fabrikito.base.values import frozen
from fabrikito.log import events
from fabrikito.log.events import Event
from fabrikito.team import hosts
from fabrikito.team.teamfile import Seat, Team
from fabrikito.watch.conditions import Condition

POLL = 3.0  # seconds between two readings of a host's watcher
TIMEOUT = 5.0  # a host that has not answered by then is unreachable
FOLLOW_POLL = 2.0  # seconds between two readings of a host's events file by `events --follow`
UNWATCHED_AFTER = 10.0  # a host's watcher not running for this long is told (up starts it a moment after ours)


@frozen
class Reading:
    """One host's watcher as read from here."""

    dest: str
    at: float
    problem: str | None = None  # why the host could not be read (ssh's reason, or fabrikito's there)
    running: bool = False  # its watcher runs
    stale: bool = False  # ... but has not finished a round for a while
    state: Mapping[str, Any] | None = None  # its watcher.json


def elsewhere(team: Team) -> dict[str, list[Seat]]:
    """The hosts other than this one with seats of the team."""
    return hosts.elsewhere(team, hosts.here_of(team))


def _run(team: Team, dest: str, seat: Seat, args: list[str]) -> bytes:
    ref, program = hosts.command_for(team, seat)
    answer = hosts.host(team, dest).run(["_host", args[0], ref, *args[1:]], program=program, timeout=TIMEOUT)
    if answer.code != 0:
        raise FabrikitoError(answer.err.strip() or f"exit status {answer.code}")
    return answer.out


def read_host(team: Team, dest: str, seat: Seat) -> Reading:
    now = time.time()
    try:
        data = json.loads(_run(team, dest, seat, ["watch"]))
        watcher = data["watcher"]
        state = data.get("state")
        return Reading(
            dest,
            now,
            running=bool(watcher["running"]),
            stale=watcher.get("stale") is not None,
            state=state if isinstance(state, dict) else None,
        )
    except HostError as exc:
        return Reading(dest, now, problem=exc.reason)
    except FabrikitoError as exc:
        return Reading(dest, now, problem=f"fabrikito there did not answer: {exc.message}")
    except (ValueError, KeyError, TypeError) as exc:
        return Reading(dest, now, problem=f"fabrikito there did not answer as expected: {exc}")


class Hosts:
    """The other hosts' watchers, read every :data:`POLL` seconds in a thread; :meth:`latest` the last reading."""

    def __init__(self, team: Team, *, poll: float = POLL) -> None:
        self.team = team
        self.by_dest = elsewhere(team)
        self.poll = poll
        self._latest: dict[str, Reading] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hosts", daemon=True)
        if self.by_dest:
            self._thread.start()

    def latest(self) -> dict[str, Reading]:
        with self._lock:
            return dict(self._latest)

    def _run(self) -> None:
        with ThreadPoolExecutor(max_workers=len(self.by_dest), thread_name_prefix="host-watch") as pool:
            while not self._stop.is_set():
                futures = [pool.submit(read_host, self.team, d, s[0]) for d, s in self.by_dest.items()]
                for future in futures:
                    reading = future.result()
                    with self._lock:
                        self._latest[reading.dest] = reading
                self._stop.wait(self.poll)

    def close(self) -> None:
        self._stop.set()


def conditions(team: Team, readings: Mapping[str, Reading]) -> dict[str, Condition]:
    """The seats of each host that could not be read (``unreachable``) or whose watcher does not run
    (``unwatched``), by key: told here, by this machine's watcher."""
    out: dict[str, Condition] = {}
    for dest, seats in elsewhere(team).items():
        reading = readings.get(dest)
        if reading is None:
            continue  # not read yet
        for seat in seats:
            if reading.problem is not None:
                c = Condition(
                    f"unreachable {seat.role}",
                    "unreachable",
                    seat.role,
                    f"its host {dest} does not answer ({reading.problem}): its seat is not watched meanwhile",
                )
            elif not reading.running or reading.stale:
                how = "has not finished a round for a while" if reading.running else "is not running"
                c = Condition(
                    f"unwatched {seat.role}",
                    "unwatched",
                    seat.role,
                    f"the watcher on its host {dest} {how}: nobody is told what this seat needs; "
                    "./fabrikito up starts it again",
                    after=UNWATCHED_AFTER,
                )
            else:
                continue
            out[c.key] = c
    return out


def seat_rows(team: Team, readings: Mapping[str, Reading]) -> list[dict[str, Any]]:
    """The other hosts' seats as ``watcher.json`` rows, each named with its host (a host not read: its seats
    ``unreachable``)."""
    rows: list[dict[str, Any]] = []
    for dest, seats in elsewhere(team).items():
        reading = readings.get(dest)
        given = {}
        if reading is not None and reading.state is not None:
            given = {str(r.get("role")): r for r in reading.state.get("seats") or () if isinstance(r, dict)}
        for seat in seats:
            row = given.get(seat.role)
            if row is None:
                if reading is None:
                    state, detail = "unknown", "not read yet"
                elif reading.problem is not None:
                    state, detail = "unreachable", reading.problem
                else:
                    state, detail = "unknown", "its host's watcher has no reading of it"
                row = {"role": seat.role, "session": seat.session, "state": state, "detail": detail, "since": None}
                row["class"] = seat.permission_class.value
            rows.append({**row, "host": dest})
    return rows


def open_items(readings: Mapping[str, Reading]) -> list[dict[str, Any]]:
    """The conditions the other hosts' watchers have open, each named with its host."""
    items: list[dict[str, Any]] = []
    for dest, reading in readings.items():
        if reading.problem is None and reading.running and reading.state is not None:
            items += [{**i, "host": dest} for i in reading.state.get("open") or () if isinstance(i, dict)]
    return items


# -- fabrikito events ---------------------------------------------------------------


def events_of(team: Team, local: list[Event]) -> tuple[list[Event], list[str]]:
    """This machine's events (``local``) and every other host's, by time; and the hosts that could not be read."""
    by_dest = elsewhere(team)
    found = list(local)
    problems: list[str] = []
    if by_dest:
        with ThreadPoolExecutor(max_workers=len(by_dest), thread_name_prefix="host-events") as pool:
            futures = {d: pool.submit(_run, team, d, s[0], ["events"]) for d, s in by_dest.items()}
            for dest, future in futures.items():
                try:
                    _, _, data = future.result().partition(b"\n")
                except (HostError, FabrikitoError) as exc:
                    problems.append(f"host {dest}: its events could not be read: {exc.message}")
                    continue
                found += [_on(e, dest) for e in events.parse_all(data)]
    found.sort(key=lambda e: e.at)  # stable: at the same time, this machine's first
    return found, problems


def _on(event: Event, dest: str) -> Event:
    from fabrikito.base.values import replace

    return replace(event, host=dest)


def follow_all(team: Team, start: int, problem: Callable[[str], None]) -> Iterator[Event]:
    """The events appended from now on, here (after byte ``start``) and on every other host (read every
    :data:`FOLLOW_POLL` seconds): each source in its own order, the sources as they are read."""
    came: queue.Queue[Event] = queue.Queue()

    def here() -> None:
        for event in events.follow(events.path_for(team.state_dir), start=start):
            came.put(event)

    threading.Thread(target=here, name="events-here", daemon=True).start()
    for dest, seats in elsewhere(team).items():
        threading.Thread(target=_follow_host, args=(team, dest, seats[0], came, problem), daemon=True).start()
    while True:
        yield came.get()


def _follow_host(team: Team, dest: str, seat: Seat, came: queue.Queue[Event], problem: Callable[[str], None]) -> None:
    position: int | None = None
    carry = b""
    said: str | None = None
    while True:
        try:
            size, _, data = _run(team, dest, seat, ["events", "--from", str(position or 0)]).partition(b"\n")
            now = int(size)
        except (HostError, FabrikitoError, ValueError) as exc:
            why = exc.message if isinstance(exc, FabrikitoError) else str(exc)
            if why != said:
                problem(f"host {dest}: its events could not be read: {why}")
            said = why
        else:
            if said is not None:
                problem(f"host {dest}: its events are read again")
                said = None
            if position is None:
                position = now  # from now on: what was there is not followed
            else:
                if now < position:
                    carry = b""  # rotated or set aside: the host sent the new file from its start
                position = now
                lines = (carry + data).split(b"\n")
                carry = lines.pop()
                for raw in lines:
                    event = events.parse(raw)
                    if event is not None and not event.carried:
                        came.put(_on(event, dest))
        time.sleep(FOLLOW_POLL)
