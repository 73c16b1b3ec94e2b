"""Automatic restarts: a seat with ``restart = "on-exit"`` whose agent exited is started again, resumed.

:class:`AutoRestart` is the policy.  Each :meth:`AutoRestart.round` takes what was
seen of the seats (:class:`Seen`: its pane alive, exited, or gone) and decides:

* only a seat whose policy is ``on-exit`` and whose conversation record says it
  is meant to be running: never one stopped on purpose (``down`` marks its record
  stopped before its pane goes; ``restart`` holds the team's start lock), never
  one whose agent runs (busy or not);
* a seat whose pane outlived its agent (a wrapper's shell, decision 0039) is taken
  for exited once its pane has shown an idle shell for :data:`GRACE_ROUNDS` rounds
  in a row (``up`` looks once more before it replaces it); one where something
  else runs (for as many rounds in a row) is left alone, told once by a
  ``not-restarted`` event;
* the first restart waits :data:`BACKOFF_FIRST` seconds after the exit was
  seen, each next one twice as long, up to :data:`BACKOFF_MOST`;
* at most :data:`CAP` restarts within :data:`CAP_WINDOW` seconds: past that the
  seat is left down and an event says so, until ``up`` starts it again.

Every decision is an event (:func:`fabrikito.launch.seatevents.emit`).  The team's
watcher runs the rounds, after each of its own (``fabrikito.watch.watcher.default_consumers``),
for a team with a seat whose policy is ``on-exit``; ``down`` ends the watcher before
it marks the records stopped and closes the panes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from fabrikito.launch import resume, seatevents
from fabrikito.launch.status import SeatState, Status
from fabrikito.team.teamfile import Team

BACKOFF_FIRST = 1.0
BACKOFF_MOST = 300.0
CAP = 5
CAP_WINDOW = 600.0
GRACE_ROUNDS = 3  # rounds in a row a pane shows an idle shell before its seat is taken for exited


class Seen(StrEnum):
    ALIVE = "alive"
    EXITED = "exited"  # its pane is kept, its agent has ended
    GONE = "gone"  # no session (the tmux server or the session ended)
    SHELL = "left a shell"  # its pane lives, its agent does not: an idle shell is left (agentless.Left.idle)
    OCCUPIED = "occupied"  # its pane lives, its agent does not, and something else runs there: left alone
    UNKNOWN = "unknown"  # could not look: decide nothing


@dataclass
class _History:
    restarts: list[float] = field(default_factory=list)
    down_since: float | None = None
    capped: bool = False
    shell_rounds: int = 0  # rounds in a row its pane showed an idle shell
    occupied_rounds: int = 0  # rounds in a row another program ran in its pane
    withheld: bool = False  # a not-restarted event was written for its pane's program (until it is alive again)


OCCUPIED_DETAIL = (
    "its agent is not running and another program runs in its pane: not restarted. Let it end or end it, then "
    "`fabrikito up --resume {role}`"
)

#: Starts the named seats again, resumed; returns, per role, ``""`` when it came up, else why not.
Starter = Callable[[Team, list[str]], Mapping[str, str]]
Emit = Callable[[Team, str, str, str, float], None]


def _emit(team: Team, seat: str, kind: str, detail: str, since: float) -> None:
    seatevents.emit(team, seat, kind, detail, since=since)


@dataclass
class AutoRestart:
    team: Team
    start: Starter
    emit: Emit = _emit
    histories: dict[str, _History] = field(default_factory=dict)

    def delay(self, role: str, now: float) -> float:
        """The back-off before the seat's next restart: doubling with each restart in the window."""
        recent = [t for t in self.histories.get(role, _History()).restarts if now - t < CAP_WINDOW]
        return min(BACKOFF_FIRST * 2.0 ** len(recent), BACKOFF_MOST)

    def round(self, seen: Mapping[str, Seen], now: float) -> list[str]:
        """Decide and act for every seat in ``seen``; returns the roles restarted this round."""
        due: list[str] = []
        for seat in self.team.seats:
            look = seen.get(seat.role, Seen.UNKNOWN)
            history = self.histories.setdefault(seat.role, _History())
            history.shell_rounds = history.shell_rounds + 1 if look is Seen.SHELL else 0
            history.occupied_rounds = history.occupied_rounds + 1 if look is Seen.OCCUPIED else 0
            if look is Seen.ALIVE or (look is Seen.SHELL and history.shell_rounds < GRACE_ROUNDS):
                history.down_since, history.withheld = None, False
                continue
            if look is Seen.OCCUPIED and history.occupied_rounds < GRACE_ROUNDS:
                continue  # a wrapper still running its last commands before its shell's prompt: look again
            if look is Seen.UNKNOWN or self.team.restart_for(seat) != "on-exit":
                continue
            record, _ = resume.read_record(self.team, seat.role)
            if record is None or record.state != resume.RUNNING:
                history.down_since = None  # stopped on purpose (or never started by up): not ours to start
                continue
            if look is Seen.OCCUPIED:
                history.down_since = None
                if not history.withheld:
                    history.withheld = True
                    self.emit(self.team, seat.role, "not-restarted", OCCUPIED_DETAIL.format(role=seat.role), now)
                continue
            if history.capped:
                continue
            if history.down_since is None:
                history.down_since = now
                self.emit(
                    self.team,
                    seat.role,
                    "exited",
                    f"its agent {look.value}: restart in {self.delay(seat.role, now):g}s"
                    + (" (up looks again before it replaces the shell)" if look is Seen.SHELL else ""),
                    now,
                )
            recent = [t for t in history.restarts if now - t < CAP_WINDOW]
            if len(recent) >= CAP:
                history.capped = True
                self.emit(
                    self.team,
                    seat.role,
                    "restart-capped",
                    f"restarted {len(recent)} times within {CAP_WINDOW / 60:g} minutes: left down. Fix the cause, "
                    f"then `fabrikito up --resume {seat.role}`",
                    history.down_since,
                )
                continue
            if now - history.down_since >= self.delay(seat.role, now):
                due.append(seat.role)
        if not due:
            return []
        for role in due:
            history = self.histories[role]
            wait = self.delay(role, now)
            self.emit(self.team, role, "restarting", f"restart {len(history.restarts) + 1}, after {wait:g}s", now)
        try:
            outcome = self.start(self.team, due)
        except resume.TeamStarting:
            return []  # an up or a restart is starting seats: look again next round
        for role in due:
            history = self.histories[role]
            since = history.down_since or now
            history.restarts.append(now)
            why = outcome.get(role, "")
            history.down_since = now if why else None  # it did not come up: the next back-off counts from now
            detail = f"restart {len(history.restarts)}" + (f": it did not come up ({why})" if why else ": resumed")
            self.emit(self.team, role, "restarted", detail, since)
        return due


# -- what the rounds see, and what they start ---------------------------------------------


def seen_in(found: Status) -> dict[str, Seen]:
    """Each seat's pane as a round of the watcher read it (``status.collect``: no tmux call of its own): no
    session, a dead pane, a live one whose agent runs (busy or not), or a live one with no agent in it: what is
    left there read from the process table (:func:`left_in_pane`)."""
    by_state = {SeatState.DOWN: Seen.GONE, SeatState.EXITED: Seen.EXITED}
    seen: dict[str, Seen] = {}
    for s in found.seats:
        if s.host is not None:
            continue
        if s.state is SeatState.NOT_AGENT:
            seen[s.role] = left_in_pane(found.team, s.role, s.pane)
        else:
            seen[s.role] = by_state.get(s.state, Seen.ALIVE)
    return seen


def left_in_pane(team: Team, role: str, pane: str | None) -> Seen:
    """A live pane with no agent in its foreground: :attr:`Seen.SHELL` for an idle shell, :attr:`Seen.ALIVE`
    when an agent runs after all, else :attr:`Seen.OCCUPIED` (a program, or a pane ``up`` did not start: its
    launch record names another, so its process is not known without a tmux call)."""
    from fabrikito.launch import agentless
    from fabrikito.launch.seatfiles import read_launch

    record = read_launch(team, role)
    if pane is None or record is None or record.pane != pane or not record.pid:
        return Seen.OCCUPIED
    left = agentless.left_in(record.pid)
    if left is None:
        return Seen.ALIVE
    return Seen.SHELL if left.idle else Seen.OCCUPIED


def start_resumed(team: Team, roles: list[str]) -> dict[str, str]:
    """``up --resume`` for ``roles``, quietly; per role ``""`` when it came up, else why not."""
    from fabrikito.launch import lifecycle

    result = lifecycle.up(team, roles, out=lambda _line: None, resume=True)
    return {r.role: r.detail if r.step is lifecycle.Step.FAILED else "" for r in result.seats}


def wanted(team: Team) -> bool:
    """Whether any seat of the team has ``restart = "on-exit"`` (the watcher then runs the policy's rounds)."""
    return any(team.restart_for(seat) == "on-exit" for seat in team.seats)
