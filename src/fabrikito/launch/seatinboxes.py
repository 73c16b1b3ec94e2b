"""The inbox of each seat that is not Claude Code, started by ``up`` and stopped by ``down``.

Such a seat has no inbox socket of its own; fabrikito's (:mod:`fabrikito.inbox.server`) stands in for it:
registered where the team's Claude Code seats look, so their ListAgents lists it and their SendMessage
reaches it by the seat's session name, and every message it takes goes through the delivery queue.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from fabrikito.base.errors import FabrikitoError
from fabrikito.team.teamfile import Seat, Team


def inbox_env(team: Team) -> dict[str, str]:
    """The environment a seat's inbox runs with: this one, with the Claude Code config folder the team's
    Claude Code seats use (their ``env``'s ``CLAUDE_CONFIG_DIR`` or ``HOME``, the first seat that sets one),
    so their ListAgents and SendMessage find it where they look."""
    env = dict(os.environ)
    for seat in team.seats:
        if seat.agent != "claude":
            continue
        for name in ("CLAUDE_CONFIG_DIR", "HOME"):
            if seat.env.get(name):
                env[name] = seat.env[name]
                if name == "HOME":
                    env.pop("CLAUDE_CONFIG_DIR", None)
                return env
    return env


def start(team: Team, seats: Sequence[Seat], out: Callable[[str], None]) -> None:
    """The inbox of each seat in ``seats`` (started or found up by ``up``) that is not Claude Code.

    Claude Code seats reach it with SendMessage by the seat's session name, ``send`` like any session.
    One that cannot start is said, and its seat stays up (``say`` still reaches it)."""
    others = [s for s in seats if s.agent != "claude"]
    if not others:
        return
    from fabrikito.inbox.server import start_inbox

    env = inbox_env(team)
    for seat in others:
        try:
            started = start_inbox(team, seat, env=env)
        except (OSError, FabrikitoError) as exc:
            out(f"{seat.role}: its inbox could not be started ({exc}): SendMessage cannot reach it, say can")
            continue
        out(f"{seat.role}: inbox " + ("listening as " + seat.session if started else "already running"))


def stop(team: Team, seats: Sequence[Seat], out: Callable[[str], None]) -> None:
    """The inbox of each seat that has one running (seats that are not Claude Code): its socket and registry go."""
    from fabrikito.inbox import inboxfiles
    from fabrikito.inbox.server import stop_inbox

    for seat in seats:
        if (team.state_dir / inboxfiles.INBOX_DIR / f"{seat.role}.json").exists():
            out(stop_inbox(team, seat))
