"""What ``up`` says of a seat whose agent exited as it started: its last lines, or what to do about root."""

from __future__ import annotations

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.team.teamfile import Seat


def root_advice(seat: Seat) -> str:
    return (
        "Claude Code refuses bypassPermissions as root and exited (--dangerously-skip-permissions cannot be used "
        "with root/sudo privileges). Run the team as an ordinary user, or, inside a sandbox, set "
        f'IS_SANDBOX = "1" in the env of seat {seat.role}; then `fabrikito up` again'
    )


def exit_report(server: Server, seat: Seat, pane: str, attach: str) -> str:
    """The seat's dead pane's last lines (``attach``: the command that attaches to it)."""
    try:
        text = server.capture(pane, start=-200)
    except TmuxError:
        text = ""
    from fabrikito.screen.startup import ROOT_REFUSAL

    if ROOT_REFUSAL in text:
        return root_advice(seat)
    lines = [line for line in text.rstrip().split("\n") if line.strip()][-12:]
    shown = "\n".join(lines) if lines else "(nothing on its screen)"
    return (
        f"its agent exited at start. The pane is kept: attach with `{attach}` to read it, "
        f"fix the cause, then `fabrikito up` again. Its last lines:\n{shown}"
    )
