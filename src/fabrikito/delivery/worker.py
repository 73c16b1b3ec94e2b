"""The delivery worker: one process per team that types queued messages when a seat's box is ready.

``python -m fabrikito.delivery.worker TEAM_FILE`` runs it; ``up`` and
``say --queue`` start it detached (a session of its own, so closing the
terminal that started it does not end it), ``down`` stops it.  One per team:
it holds ``.state/<team>/worker.lock`` (``flock``) for as long as it runs, and
keeps its pid and what each seat waits for in ``.state/<team>/worker.json``.

A round: read the queue (:mod:`fabrikito.delivery.queue`), set aside what does
not belong there, expire what ran out, then read the screen of every seat with
a message waiting in **one** tmux call.  A seat whose box is ready and idle
gets its oldest message through :func:`fabrikito.delivery.engine.deliver` (the
engine of ``say``: lock, label, checks, Enter rule); the next waits for a later
round, once the seat has taken that one as a turn and is idle again.  While
nothing waits the worker sleeps until ``say --queue`` wakes it (``SIGUSR1``)
or a slow timer runs out, reading no screen.

The worker is single-threaded and finishes every change to a message before
the next, so a ``typing`` or ``delivered`` file, or an expired message whose
``EXPIRED`` line may already be written, can only be found in the first round
after a start: that round checks the log before writing a line again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from fabrikito.base import daemons, durations, statedir
from fabrikito.base.errors import FabrikitoError, StateFileError, TmuxError
from fabrikito.delivery import engine, queue, seatlock, seatpane
from fabrikito.delivery.queue import Message, State
from fabrikito.delivery.workerstate import MODULE, info_path, lock_held, lock_path, read_info, start_ticks
from fabrikito.log import msglog, upkeep
from fabrikito.screen import ScreenState, readings, recogniser_for
from fabrikito.team.teamfile import Team

ERR_NAME = "worker.err"
BUSY_POLL = 0.05  # while a message waits for a seat
IDLE_POLL = 5.0  # while nothing waits (say --queue wakes the worker at once)
LOCK_WAIT = 0.5  # for a seat's say lock: another say typing is waited for in later rounds
LOG_TAIL = 1 << 20
WAKE = signal.SIGUSR1
STOPS = (signal.SIGTERM, signal.SIGINT)
HANDLED = {WAKE, signal.SIGHUP, *STOPS}


class Seats(Protocol):
    """What the worker needs of the seats: a look at many at once, and the engine."""

    def look(self, roles: list[str]) -> dict[str, str]:
        """For each role, ``""`` when its box is ready and idle, else why it waits."""
        ...

    def deliver(self, role: str, sender: str, text: str, on_paste: Callable[[], None]) -> engine.Delivery: ...

    def team_running(self) -> bool:
        """Whether the team's seats can be up at all (its tmux server runs)."""
        ...


# -- the seats through tmux --------------------------------------------------------


@dataclass(slots=True)
class TmuxSeats:
    team: Team
    rows: list[seatpane.PaneRow] | None = None
    tmux_calls: int = 0

    def _panes(self, refresh: bool) -> list[seatpane.PaneRow]:
        if refresh or self.rows is None:
            self.tmux_calls += 1
            self.rows = seatpane.list_panes(self.team.server())
        return self.rows

    def look(self, roles: list[str]) -> dict[str, str]:
        server = self.team.server()
        if not os.path.exists(server.resolved_socket_path()):
            self.rows = None
            return dict.fromkeys(roles, f"the team's {server.describe()} is not running (every seat is down)")
        try:
            panes = self._pane_ids(roles, refresh=False)
            if len(panes) < len(roles):
                panes = self._pane_ids(roles, refresh=True)
        except TmuxError as exc:
            return dict.fromkeys(roles, f"tmux cannot list the panes: {exc}")
        self.tmux_calls += 1
        looks = seatpane.look_panes(server, list(panes.values()))
        waits = {}
        for role in roles:
            pane = panes.get(role)
            look = looks.get(pane) if pane is not None else None
            if look is None:
                self.rows = None  # a seat restarted or went down: list the panes again next round
            waits[role] = self._why(role, pane, look)
        return waits

    def _pane_ids(self, roles: list[str], *, refresh: bool) -> dict[str, str]:
        rows = self._panes(refresh)
        found = {}
        for role in roles:
            seat = self.team.seat(role)
            row = seatpane.pane_of_session(rows, seat.session) if seat is not None else None
            if row is not None:
                found[role] = row.pane_id
        return found

    def _why(self, role: str, pane: str | None, look: seatpane.Look | None) -> str:
        if pane is None:
            return "the seat is down (no tmux session)"
        if look is None:
            return "tmux cannot read the seat's screen"
        if look.dead:
            return "the seat is down (its pane's process exited)"
        agent = seatpane.foreground_agent(look.pane_pid)
        if agent is None:
            return "the pane is not running an agent in its foreground (a shell?)"
        reading = readings.read(recogniser_for(agent.name, agent.version, exe=agent.exe), look.snapshot)
        if reading.state is not ScreenState.READY:
            detail = f" ({reading.detail})" if reading.detail else ""
            return (reading.reason or reading.state.value) + detail
        if reading.busy:
            return "the seat is busy with a turn"
        return ""

    def team_running(self) -> bool:
        return self.team.server().listening()

    def deliver(self, role: str, sender: str, text: str, on_paste: Callable[[], None]) -> engine.Delivery:
        seat = self.team.seat(role)
        if seat is None:
            return engine.Delivery(role, engine.Result.REFUSED, f"no seat '{role}' in the team")
        ctx = engine.Context(
            team=self.team,
            server=self.team.server(),
            panes=self._panes(refresh=False),
            on_paste=on_paste,
            note_box_text=False,
            idle_only=True,
            lock_timeout=LOCK_WAIT,
        )
        return engine.deliver(ctx, seat, sender, text)


# -- one round ----------------------------------------------------------------------


@dataclass(slots=True)
class Worker:
    team: Team
    seats: Seats
    recovering: bool = True  # the first round after a start finds what a crash left half done
    waits: dict[str, str] = field(default_factory=dict)
    _tail: bytes | None = None

    def round(self) -> dict[str, str]:
        """One round; returns, per seat with messages waiting, why they wait."""
        now = time.time()
        found = queue.scan(self.team)
        for path, why in found.damaged:
            try:
                queue.set_aside(self.team, path, why)
            except OSError:
                pass
        heads: dict[str, list[Message]] = {}
        for role, msgs in found.messages.items():
            pending = [m for m in self._settle(msgs, now) if m.state is State.PENDING]
            if pending:
                heads[role] = pending
        self.recovering = False
        self._tail = None
        waits: dict[str, str] = {}
        if heads:
            looks = self.seats.look(list(heads))
            for role, pending in heads.items():
                why = looks.get(role, "the seat could not be looked at")
                if not why:  # one message a round: the seat takes it as a turn, the next waits for idle
                    why = self._deliver(pending[0])
                if why:
                    waits[role] = why
                elif len(pending) > 1:
                    waits[role] = "the seat is taking the message before"
        self.waits = waits
        return waits

    def _settle(self, msgs: list[Message], now: float) -> list[Message]:
        """Finish what a crash left half done and expire what ran out; returns what is left."""
        left = []
        for msg in msgs:
            if msg.state is State.TYPING:
                self._uncertain(msg, "the worker stopped after pasting it; it may or may not have been submitted")
            elif msg.state is State.DELIVERED:
                self._delivered(msg)
            elif msg.state in (State.PENDING, State.HELD) and msg.expires <= now:
                self._log_once(msg, msglog.Outcome.EXPIRED, f"expired after {durations.short(now - msg.queued)}")
                queue.write(msg.moved(State.EXPIRED, f"expired: {msg.reason}"))
            else:
                left.append(msg)
        return left

    def _deliver(self, msg: Message) -> str:
        """Type one message; ``""`` when the seat may take the next, else why it waits."""
        claimed: list[Message] = []

        def mark_typing() -> None:
            try:
                claimed.append(queue.claim(self.team, msg))
            except queue.Gone as exc:
                raise seatlock.SeatRefusal(str(exc)) from None
            except (OSError, StateFileError) as exc:
                raise seatlock.SeatRefusal(f"the queue could not mark {msg.id} as being typed ({exc})") from None

        result = self.seats.deliver(msg.role, msg.sender, msg.text, mark_typing)
        if result.result is engine.Result.DELIVERED:
            done = (claimed[0] if claimed else msg).moved(State.DELIVERED, f"delivered at {time.time():.3f}")
            queue.write(done)
            self._delivered(done)
            return ""
        if result.result is engine.Result.TYPED:
            self._uncertain(claimed[0] if claimed else msg, f"typed, not submitted: {result.reason}")
            return f"{msg.id} was left in the box: {result.reason}"
        if claimed:  # refused with nothing typed after all
            queue.write(claimed[0].moved(State.PENDING))
        return "" if not claimed and "no longer in the queue" in result.reason else result.reason or "refused"

    def _delivered(self, msg: Message) -> None:
        at = msg.reason.removeprefix("delivered at ")
        try:
            when = float(at)
        except ValueError:
            when = time.time()
        self._log_once(msg, msglog.Outcome.DELIVERED, f"waited {durations.short(when - msg.queued)}")
        queue.remove(msg)

    def _uncertain(self, msg: Message, why: str) -> None:
        self._log_once(msg, msglog.Outcome.UNCERTAIN, why)
        queue.write(msg.moved(State.UNCERTAIN, why))

    def _log_once(self, msg: Message, outcome: msglog.Outcome, note: str) -> None:
        """The message's line; in the first round only if the log does not hold it already."""
        if self.recovering:
            if self._tail is None:
                self._tail = _log_tail(self.team)
            if f"\t{outcome.value}\t[queued {msg.id}".encode() in self._tail:
                return
        queue.log(self.team, msg, outcome, note)


def _log_tail(team: Team) -> bytes:
    """The log's last bytes, across a rotation (its line may be in ``messages.log.1``)."""
    from fabrikito.base import rotate

    try:
        return rotate.tail(team.log_path, LOG_TAIL)
    except (OSError, StateFileError):
        return b""


# -- the process ----------------------------------------------------------------------


def serve(worker: Worker, *, stop: Callable[[float], bool]) -> None:
    """Rounds until ``stop(timeout)`` (which waits up to ``timeout``) says to stop.

    A worker with nothing queued whose team's tmux server is gone (the team was
    taken down without ``down``), or whose state directory was removed, ends
    too: ``up`` and ``say --queue`` start one again.
    """
    last: dict[str, str] | None = None
    while True:
        try:
            waits = worker.round()
        except Exception as exc:  # a state file or tmux failing in a new way: say so, keep serving
            print(f"fabrikito worker: a round failed: {exc!r}", file=sys.stderr, flush=True)
            waits = {"?": f"the worker's last round failed: {exc}"}
        for note in upkeep.upkeep(worker.team):
            if ":" in note:
                print(f"fabrikito worker: {note}", file=sys.stderr, flush=True)
        if waits != last:
            _write_info(worker.team, waits)
            last = dict(waits)
        if not worker.team.state_dir.is_dir() or (not waits and not worker.seats.team_running()):
            return
        if stop(BUSY_POLL if waits else IDLE_POLL):
            return


def main(argv: list[str] | None = None) -> int:
    from fabrikito.team import teamfile

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {MODULE} TEAM_FILE", file=sys.stderr)
        return 2
    signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        team = teamfile.load(args[0])
        statedir.ensure_state_dir(team.base_dir, team.name)
        fd = daemons.hold_lock(lock_path(team))
    except FabrikitoError as exc:
        print(f"fabrikito worker: {exc.message}", file=sys.stderr)
        return 1
    if fd is None:
        return 0  # another worker runs for this team
    _write_info(team, {})
    try:
        serve(Worker(team, TmuxSeats(team)), stop=_wait_for_signal)
    finally:
        statedir.remove_quietly(info_path(team))
        os.close(fd)
    return 0


def _wait_for_signal(timeout: float) -> bool:
    while True:
        got = signal.sigtimedwait(HANDLED, timeout)
        if got is None or got.si_signo == WAKE:
            return False
        if got.si_signo in STOPS:
            return True


def _write_info(team: Team, waits: dict[str, str]) -> None:
    record = {
        "state": "running",
        "pid": os.getpid(),
        "start_ticks": start_ticks(os.getpid()),
        "since": _since(team),
        "waits": waits,
    }
    try:
        statedir.write_atomic(info_path(team), json.dumps(record, ensure_ascii=False).encode())
    except (OSError, StateFileError):
        pass


_STARTED = time.time()
START_WAIT = 5.0  # the most ensure_running waits for a worker it started to hold its lock


def _since(team: Team) -> float:
    del team
    return _STARTED


def ensure_running(team: Team) -> bool:
    """Wake the team's worker, or start it when none runs; ``True`` when one was started."""
    found = read_info(team)
    if found.running and found.pid is not None:
        try:
            os.kill(found.pid, WAKE)
        except OSError:
            pass
        return False
    if found.running:
        return False  # starting: it reads the queue in its first round
    statedir.ensure_state_dir(team.base_dir, team.name)
    child = daemons.start_detached(
        [sys.executable, "-m", MODULE, str(team.path)], cwd=team.base_dir, err_path=team.state_dir / ERR_NAME
    )
    # Return once it holds its lock (or has ended): a `down` right after this sees it and stops it,
    # where a worker still starting would be missed and outlive its team.
    daemons.wait_started(child, lambda: lock_held(team), START_WAIT)
    return True


def stop(team: Team, *, timeout: float = 15.0) -> str:
    """End the team's worker (it finishes the message it is typing); what happened, for people."""
    found = read_info(team)
    deadline = time.monotonic() + 2
    while found.running and found.pid is None and time.monotonic() < deadline:  # starting: its pid comes next
        time.sleep(0.05)
        found = read_info(team)
    if not found.running or found.pid is None:
        return "the delivery worker was not running"
    if daemons.end(found.pid, lambda: lock_held(team), timeout):
        return f"stopped the delivery worker (pid {found.pid})"
    return f"killed the delivery worker (pid {found.pid}): it did not stop within {timeout:g} s"


if __name__ == "__main__":
    sys.exit(main())
