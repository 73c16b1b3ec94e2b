"""``down``: stop the team's seats (or some), and the helpers ``up`` started; the state and the log stay.

Each seat's conversation record is marked stopped first, so nothing restarts a seat
stopped on purpose; closing a pane hangs its processes up, and whatever survives
that is ended by pid (:mod:`fabrikito.launch.reap`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from fabrikito.base import procs, statedir
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.base.tmuxcontrol import tmux_events
from fabrikito.delivery import seatpane
from fabrikito.launch import resume as conversations
from fabrikito.launch import seatinboxes
from fabrikito.launch.seatfiles import launch_path, read_launch, select_seats
from fabrikito.team.teamfile import Seat, Team

if TYPE_CHECKING:
    from fabrikito.launch import reap

STOP_GRACE = 5.0


def _left_behind(team: Team, seat: Seat) -> list[reap.Tracked]:
    """Processes of a seat whose session is gone (its pane closed by hand, the tmux server killed)."""
    from fabrikito.launch import reap

    record = read_launch(team, seat.role)
    if record is None or not record.pid or not record.ticks:
        return []
    found = reap.seat_processes(record.pid, record.ticks)
    statedir.remove_quietly(launch_path(team, seat.role))
    return found


def _seat_processes(team: Team, seat: Seat, row: seatpane.PaneRow) -> list[reap.Tracked]:
    """Every process the seat's pane started: its session's members (by the launch record's start
    time when it is this pane's, else the pane process's own)."""
    from fabrikito.launch import reap

    record = read_launch(team, seat.role)
    leader = row.pane_pid
    if leader == seatpane.NO_PID:  # a dead pane tmux 3.8 names no pid of: the launch record's, if this pane's
        if record is None or record.pane != row.pane_id:
            return []
        leader = record.pid
    ticks = record.ticks if record is not None and (record.pane, record.pid) == (row.pane_id, leader) else 0
    if not ticks:
        try:
            ticks = procs.info(leader).start_ticks
        except (procs.ProcessGone, procs.ProcessUnreadable):
            ticks = 0
    return reap.seat_processes(leader, ticks)


def down(
    team: Team,
    roles: Sequence[str] | None = None,
    *,
    out: Callable[[str], None],
    server: Server | None = None,
    grace: float = STOP_GRACE,
    stop_helpers: Sequence[Callable[[Team], str | None]] = (),
) -> int:
    """Kill the seats' panes; leave the state directory and the log.  Returns the exit status.
    With no ``roles``, the delivery worker and ``stop_helpers`` (each says what it did, or ``None``) first."""

    seats = select_seats(team, roles)
    srv = team.server() if server is None else server
    if not roles:
        from fabrikito.delivery import worker, workerstate

        if workerstate.read_info(team).running:
            out(worker.stop(team))
        from fabrikito.launch import watcherproc

        stop_helpers = [watcherproc.stop, *stop_helpers]  # the watcher first: it restarts seats that exit
        for stop in stop_helpers:
            said = stop(team)
            if said is not None:
                out(said)
        if srv.listening():
            from fabrikito.base import tmuxcontrol

            with tmux_events(srv):
                for session_id in tmuxcontrol.remove_leftover(srv):  # its server was killed outright
                    out(f"removed the command server's tmux session {tmuxcontrol.CONTROL_SESSION} ({session_id})")
    seatinboxes.stop(team, seats, out)
    for seat in seats:  # before a pane goes: an automatic restart never takes a seat stopped on purpose
        conversations.mark(team, seat.role, conversations.STOPPED)
    rows, running = seatpane.panes_if_running(srv)
    if not running:
        out(f"no seat is up ({srv.describe()} is not running)")
    from fabrikito.launch import reap

    stopped: list[tuple[Seat, list[reap.Tracked]]] = []
    failed = False
    for seat in seats:
        row = seatpane.pane_of_session(rows, seat.session)
        if row is None:
            left_behind = _left_behind(team, seat)
            if left_behind:
                out(f"{seat.role}: its session is gone, {len(left_behind)} of its processes are not: ending them")
                stopped.append((seat, left_behind))
            elif running:
                out(f"{seat.role}: already down")
            continue
        tracked = _seat_processes(team, seat, row)
        try:
            with tmux_events(srv):
                srv.kill_pane(row.pane_id)
        except TmuxError as exc:
            out(f"{seat.role}: could not stop pane {row.pane_id}: {exc}")
            failed = True
            continue
        statedir.remove_quietly(launch_path(team, seat.role))
        stopped.append((seat, tracked))
        out(f"{seat.role}: stopped (session {seat.session}, pane {row.pane_id})")
    # Closing a pane hangs its processes up; whatever survives that (Gemini CLI can) is ended here.
    with ThreadPoolExecutor(max_workers=max(1, len(stopped)), thread_name_prefix="reap") as pool:
        ends = [(seat, pool.submit(reap.end, tracked, grace=grace)) for seat, tracked in stopped]
        for seat, future in ends:
            left = future.result()
            if left:
                failed = True
                pids = ", ".join(str(t.pid) for t in left)
                out(f"{seat.role}: its processes {pids} still run after SIGKILL: end them by hand (kill -9 {pids})")
    if stopped:
        out(f"the state directory and the message log are kept: {team.state_dir}")
    return 1 if failed else 0
