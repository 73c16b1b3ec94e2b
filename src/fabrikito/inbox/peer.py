"""Who is at the other end of an inbox connection, told from evidence rather than from what it writes.

The inbox (:mod:`fabrikito.inbox.server`) reads the connecting process from
the socket (its peer credentials, at ``accept``) and hands its pid here;
:func:`identify` walks that process and its ancestors, as ``say`` walks its
own (:mod:`fabrikito.delivery.identity`), and stops at the first of:

* **a pane of the team's tmux server**: the process runs inside that pane;
  when the pane is a seat's (its session is the seat's), the sender is that
  seat's role;
* **a tmux server other than the team's**: a pane of another server, whose
  seats the inbox cannot see: no seat.

On the way it notes the nearest **live Claude Code session**: a process whose
program is Claude Code and whose registry entry (``sessions/<pid>.json`` in the
config directory its own environment names) records its pid and start time.
When that session *is* the connecting process, the connection is Claude Code's
own, and the envelope it wraps its text in (``<cross-session-message
from-name=… from-mode=…>``) is its own statement of its name and permission
class (:mod:`fabrikito.inbox.gate` trusts it only then).  Measured on 2.1.316
and 2.1.332: a seat's SendMessage connects from the ``claude`` process itself
(the pane's process), sends the auth line with the peer token, then one user
line so wrapped.

What it gives: the seat's role; else ``session:<name>`` for a process that is,
or runs under, a Claude Code session that is no seat of the team; else
``unverified-sender`` (no pid, a process gone before it was read, or nothing
found: the owner's shell, a script, another user's tool).  The throttle and the
repeat rule count by :attr:`Peer.key`: per seat, per session process, and one
count for everything unverified together, so changing what a message says it
is from, or starting a new process for each post, changes nothing.

All the reading of processes is in :func:`identify` (``/proc`` on Linux,
through :mod:`fabrikito.base.procs`), so another platform's evidence is one
function to replace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import procs
from fabrikito.base.values import frozen
from fabrikito.delivery.identity import MAX_WALK, SESSION_PREFIX, UNVERIFIED, message_sender_ok
from fabrikito.team.teamfile import Team

if TYPE_CHECKING:
    from fabrikito.delivery.seatpane import PaneRow

UNVERIFIED_KEY = "unverified"


@frozen
class Peer:
    """What the evidence says of one connection's process."""

    pid: int | None
    role: str | None = None  # the team's seat whose pane the process runs in
    session: str | None = None  # the Claude Code session it is, or runs under (its registry name)
    session_socket: str | None = None  # that session's messagingSocketPath
    session_mode: str | None = None  # the permission mode its registry entry records, if it records one
    is_session: bool = False  # the connecting process is that Claude Code session itself
    key: str = UNVERIFIED_KEY  # what the throttle and the repeat rule count by
    what: str = "nothing verified"  # for the inbox's log

    def sender(self, team: Team) -> str:
        """The label the message is typed with: the seat's role, ``session:<name>``, or ``unverified-sender``."""
        if self.role is not None:
            return self.role
        if self.session is not None and message_sender_ok(team, SESSION_PREFIX + self.session):
            return SESSION_PREFIX + self.session
        return UNVERIFIED


def identify(pid: int | None, team: Team, panes: Callable[[bool], Sequence[PaneRow] | None]) -> Peer:
    """The :class:`Peer` for process ``pid`` (``None``: the socket gave none).

    ``panes(fresh)`` lists the team's tmux server's panes (``None`` when they could not be listed: no
    process is then inside a seat); a listing kept from a moment ago is used first, and listed again when
    the walk reaches a tmux server before any pane it knows (a pane opened since, such as a seat started).
    """
    if pid is None or pid <= 0:
        return Peer(pid, what="the socket named no process")
    walk = _walk(pid, panes(False))
    if walk.stranger:
        walk = _walk(pid, panes(True))
    if walk.unreadable is not None:
        return Peer(pid, what=f"process {pid} could not be read ({walk.unreadable}): gone before it was looked at?")
    pane, session = walk.pane, walk.session
    seat = team.seat_by_session(pane.session) if pane is not None else None
    found = _Session.of(session, pid)
    if seat is not None:
        how = (
            "its Claude Code session" if found.itself else f"process {pid} in its pane {pane.pane_id if pane else '?'}"
        )
        return found.peer(pid, role=seat.role, key=f"seat:{seat.role}", what=f"seat {seat.role}: {how}")
    if session is not None:
        under = "" if found.itself else f" (process {pid} under it)"
        what = f"Claude Code session {found.name!r} (pid {session[0]}), no seat of the team{under}"
        return found.peer(pid, key=f"session:{session[0]}:{session[1]}", what=what)
    return Peer(pid, what=f"process {pid}: no seat's pane and no Claude Code session above it")


@frozen
class _Walk:
    pane: PaneRow | None  # the team's pane the process runs in
    session: tuple[int, int, dict[str, object]] | None  # the nearest live Claude Code session: pid, start, entry
    stranger: bool  # the walk stopped at a tmux server before any pane of the listing
    unreadable: str | None  # the process itself could not be read


def _walk(pid: int, panes: Sequence[PaneRow] | None) -> _Walk:
    """Up from ``pid`` to a pane of ``panes``, a tmux server they do not know, or pid 1."""
    by_pid = {p.pane_pid: p for p in panes or ()}
    session: tuple[int, int, dict[str, object]] | None = None
    current = pid
    try:
        for _ in range(MAX_WALK):
            if current <= 1:
                break
            info = procs.info(current)
            if session is None:
                entry = _claude_session(current, info.start_ticks)
                if entry is not None:
                    session = (current, info.start_ticks, entry)
            if current in by_pid:
                return _Walk(by_pid[current], session, stranger=False, unreadable=None)
            if info.name.startswith("tmux"):
                # a pane the listing does not hold: of another tmux server, or one opened since it was taken
                return _Walk(None, session, stranger=True, unreadable=None)
            current = info.ppid
    except (procs.ProcessGone, procs.ProcessUnreadable) as exc:
        if current == pid:
            return _Walk(None, None, stranger=False, unreadable=str(exc))
        # an ancestor vanished mid-walk: what was found below it still stands, but no pane above it
    return _Walk(None, session, stranger=False, unreadable=None)


@frozen
class _Session:
    """The Claude Code session found on the walk, as its registry entry records it."""

    name: str | None
    socket: str | None
    mode: str | None
    itself: bool

    @classmethod
    def of(cls, found: tuple[int, int, dict[str, object]] | None, pid: int) -> _Session:
        if found is None:
            return cls(None, None, None, itself=False)
        entry = found[2]
        name, socket, mode = (entry.get(k) for k in ("name", "messagingSocketPath", "permissionMode"))
        return cls(
            name if isinstance(name, str) else None,
            socket if isinstance(socket, str) else None,
            mode if isinstance(mode, str) else None,
            itself=found[0] == pid,
        )

    def peer(self, pid: int, *, key: str, what: str, role: str | None = None) -> Peer:
        return Peer(
            pid,
            role=role,
            session=self.name,
            session_socket=self.socket,
            session_mode=self.mode,
            is_session=self.itself,
            key=key,
            what=what,
        )


def _claude_session(pid: int, start_ticks: int) -> dict[str, object] | None:
    """The registry entry of Claude Code process ``pid`` when it is live and its own, else ``None``."""
    from fabrikito.delivery.seatpane import registry_entry
    from fabrikito.team.agents import CLAUDE, agent_in_package

    try:
        exe = procs.exe_path(pid)
    except procs.ProcessGone:
        return None
    if exe is None:
        return None
    if os.path.basename(exe) not in CLAUDE.program_names:
        found = agent_in_package(Path(os.path.realpath(exe)))
        if found is None or found[0] != CLAUDE.name:
            return None
    entry = registry_entry(pid)
    if entry is None or entry.get("pid") != pid or str(entry.get("procStart")) != str(start_ticks):
        return None
    if "fabrikitoInbox" in entry:
        return None  # an inbox of fabrikito's, not Claude Code
    return entry
