"""A seat's pane alive while its agent is not: what is left in it, and whether ``up`` may replace it.

fabrikito's launcher execs the agent, so an agent that ends leaves a dead pane.  A seat
whose program is a wrapper (a script that runs the agent, then a shell), or a pane where
the owner ran the agent from a shell, outlives its agent: the pane lives on with a shell
in it.  ``up``, ``restart`` and the automatic restart start such a seat again in its
place, but only when nothing would be lost (decision 0039):

* the pane's processes are shells only, a chain of them (each waiting for the next),
  and the last has no child and is the terminal's foreground: an idle shell at its
  prompt (:attr:`Left.idle`), replaced;
* anything else, a program the owner runs there (in the foreground or as a job), or
  processes that could not be read: left alone, with what runs there and what to do.

:func:`judge` decides from what was read (pure); :func:`left_in` reads the process table.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from fabrikito.base import procs
from fabrikito.base.values import frozen
from fabrikito.delivery import seatpane
from fabrikito.team.teamfile import Seat, Team

#: Programs taken for a shell (the base name of what runs; a login shell's leading ``-`` dropped).
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "pdksh", "ash", "yash", "tcsh", "csh"})
MAX_SHOWN = 80  # characters of a command line shown in a message


@frozen
class Proc:
    """One process under a pane, as read from the process table."""

    pid: int
    name: str  # the base name of its program
    argv: tuple[str, ...]
    pgrp: int
    children: tuple[int, ...]


@frozen
class Left:
    """What is left in a live pane whose agent is not running."""

    idle: bool  # an idle shell only: safe to replace
    pid: int  # the process shown: the idle shell, or the program running there (0: none could be read)
    what: str  # its command line (shortened), or why nothing could be read

    def note(self) -> str:
        """The progress line of a seat whose idle shell is replaced."""
        return f"its agent is not running, a shell is left in its pane ({self.what}, pid {self.pid}): starting it again"

    def refusal(self, role: str) -> str:
        """Why the seat is left alone, and what to do."""
        if not self.pid:
            return f"its agent is not running and its pane's processes could not be read ({self.what}): left alone"
        return (
            f"its agent is not running and `{self.what}` (pid {self.pid}) runs in its pane: left alone. Let it end "
            f"or end it (attach to the seat), then `fabrikito up --resume {role}`; or `fabrikito down {role}` "
            "closes the pane with it"
        )


def is_shell(name: str) -> bool:
    return name.lstrip("-") in SHELLS


def shown(argv: Sequence[str], name: str) -> str:
    text = shlex.join(argv) if argv else name
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "\u2026"


def judge(tree: Sequence[Proc], foreground: int) -> Left:
    """``tree``: the pane's process then its descendants, nearest first; ``foreground``: its terminal's
    foreground process group.  Idle only when every process is a shell, each has at most one child, and the
    last, childless, is the foreground's."""
    if not tree:
        return Left(False, 0, "its pane's process is gone")
    others = [p for p in tree if not is_shell(p.name)]
    if not others and all(len(p.children) <= 1 for p in tree):
        last = tree[-1]
        if not last.children and last.pgrp == foreground:
            return Left(True, last.pid, shown(last.argv, last.name))
    # What the owner would call "what runs there": the foreground's program nearest the pane, else any program;
    # with shells only (not one idle shell), the deepest shell of the foreground's, else of all.
    ahead = [p for p in others if p.pgrp == foreground] or others
    pick = ahead[0] if ahead else ([p for p in tree if p.pgrp == foreground] or list(tree))[-1]
    return Left(False, pick.pid, shown(pick.argv, pick.name))


def read_tree(pane_pid: int) -> tuple[list[Proc], int]:
    """The pane's processes (:func:`judge`'s ``tree``) and its terminal's foreground group.
    Raises :class:`procs.ProcessUnreadable` or :class:`procs.ProcessGone` for a process that cannot be read."""
    root = procs.info(pane_pid)
    foreground = procs.foreground_group(root)
    tree: list[Proc] = []
    queue = [pane_pid]
    while queue and len(tree) < seatpane.MAX_WALK:
        pid = queue.pop(0)
        info = root if pid == pane_pid else procs.info(pid)
        children = tuple(sorted(procs.children_of(pid)))
        tree.append(Proc(pid, procs.exe_name(pid), tuple(procs.cmdline(pid)), info.pgrp, children))
        queue.extend(children)
    if queue:  # more than a walk's worth: not an idle shell, whatever it is
        raise procs.ProcessUnreadable(f"more than {seatpane.MAX_WALK} processes under pane process {pane_pid}")
    return tree, foreground if foreground > 0 else root.pgrp


def left_in(pane_pid: int) -> Left | None:
    """``None`` when an agent runs in the foreground of the pane (:func:`seatpane.foreground_agent`),
    else what is left there."""
    if seatpane.foreground_agent(pane_pid) is not None:
        return None
    try:
        tree, foreground = read_tree(pane_pid)
    except procs.ProcessGone:
        # A child that ended while it was read: read once more, then judge what is there.
        try:
            tree, foreground = read_tree(pane_pid)
        except procs.ProcessGone as exc:
            return Left(False, 0, f"process {exc} ended while it was read")
        except procs.ProcessUnreadable as exc:
            return Left(False, 0, str(exc))
    except procs.ProcessUnreadable as exc:
        return Left(False, 0, str(exc))
    left = judge(tree, foreground)
    if left.idle:
        missed = unlisted_child(tree)
        if missed is not None:
            return Left(False, missed, _what(missed))
    return left


def unlisted_child(tree: Sequence[Proc]) -> int | None:
    """A process whose parent is in ``tree`` while ``tree`` does not hold it, found by every process's
    parent.  The children files a tree is read from are exact only for stopped processes (a child was
    missed once, under load, while its shell ran it): an idle shell is replaced only when this finds none."""
    inside = {p.pid for p in tree}
    for pid in procs.pids():
        if pid not in inside and procs.parent(pid) in inside:
            return pid
    return None


def _what(pid: int) -> str:
    try:
        return shown(procs.cmdline(pid), procs.exe_name(pid))
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return f"process {pid}"


def occupied(team: Team, seats: Sequence[Seat]) -> dict[str, str]:
    """Per role, why ``restart`` leaves the seat alone: its agent is not running and its live pane is not an
    idle shell (one tmux call lists the panes; the seats that are not there are not in it)."""
    rows, _ = seatpane.panes_if_running(team.server())
    refused: dict[str, str] = {}
    for seat in seats:
        row = seatpane.pane_of_session(rows, seat.session)
        left = None if row is None or row.dead else left_in(row.pane_pid)
        if left is not None and not left.idle:
            refused[seat.role] = left.refusal(seat.role)
    return refused
