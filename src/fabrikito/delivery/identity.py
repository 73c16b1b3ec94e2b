"""Who is speaking: the sender label of ``say`` and ``flush``.

In order: ``TEAM_ROLE`` when it is set (it must be one of the team's role ids
or ``live-test``; ``owner`` and ``launcher`` are refused, and ``live-test`` is
refused on the default tmux server); else the seat ``say`` runs inside, found
by walking the process's ancestors to a pane of the team's tmux server; else
``owner``.  When it cannot tell, it refuses rather than guess:

- a process on the walk cannot be read (or vanished mid-walk);
- the walk reaches 100 processes before pid 1;
- tmux cannot list the server's panes;
- the pane found belongs to a seat of another team (its process has
  ``TEAM_ROLE`` set but its session is not in this team's roster);
- a tmux server other than the one addressed is among the ancestors.

What is not caught, and so is labelled ``[from owner]``: a background job that
outlived the command that started it (re-parented to pid 1 or a subreaper), a
command a seat started in a new tmux session of the same server, a process
started through ``setsid``/``nohup`` whose parent exited, or anything that
clears ``TEAM_ROLE`` and runs outside the seat's process tree (``at``, ``cron``,
``systemd-run``).  Labels are claims, not identities: this stops a mislabel by
accident, not by intent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from fabrikito import TYPE_CHECKING
from fabrikito.base import procs
from fabrikito.base.errors import FabrikitoError

if TYPE_CHECKING:
    from fabrikito.base.tmux import Server
    from fabrikito.delivery.seatpane import PaneRow
    from fabrikito.team.teamfile import Team

# The pane list, the screen and the team file's module are imported only on the way that needs them:
# ``send`` outside a team, with or without TEAM_ROLE, needs none of them (docs/benchmarks.md).

OWNER = "owner"
LAUNCHER = "launcher"
LIVE_TEST = "live-test"
UNKNOWN_SENDER = "?"
MAX_WALK = 100
#: The sender of an inbox message whose process is no seat and no Claude Code session (inbox/peer.py).
UNVERIFIED = "unverified-sender"
#: The sender of an inbox message from a Claude Code session that is not one of the team's seats:
#: ``session:<its registry name>``, so that it can never read as a role or as owner.
SESSION_PREFIX = "session:"
#: A session's registry name, as an inbox sender takes it (the shape of tmux and Claude Code names).
SESSION_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


class IdentityRefused(FabrikitoError):
    """The sender cannot be told, or is not allowed; nothing is typed."""

    exit_code = 3

    def __init__(self, message: str, *, log_sender: str) -> None:
        super().__init__(message)
        self.log_sender = log_sender


def message_sender_ok(team: Team, sender: str) -> bool:
    """Whether ``sender`` is one fabrikito itself gives a message it queues: a role id of the team,
    ``owner``, ``live-test``, an unverified inbox peer, or ``session:<name>`` (a name of letters, digits and
    ``_.-``).  None of them holds a bracket or a space, so no label can be built from one."""
    if sender in team.roles or sender in (OWNER, LIVE_TEST, UNVERIFIED):
        return True
    name = sender.removeprefix(SESSION_PREFIX)
    return name != sender and 0 < len(name) <= 64 and name[0] not in "_.-" and set(name) <= SESSION_NAME_CHARS


def check_team_role(team: Team, value: str, *, default_server: bool) -> str:
    """Validate a set ``TEAM_ROLE``; return the label or raise :class:`IdentityRefused`."""
    if value in (OWNER, LAUNCHER):
        raise IdentityRefused(
            f"TEAM_ROLE={value} is refused: '{value}' is fabrikito's own label. Unset TEAM_ROLE to send as the owner.",
            log_sender=value,
        )
    if value == LIVE_TEST:
        if default_server:
            raise IdentityRefused(
                "TEAM_ROLE=live-test is refused on the default tmux server, where the real team runs: "
                "live tests address a private server (tmux_socket in their team file).",
                log_sender=value,
            )
        return value
    from fabrikito.team.teamfile import ROLE_RE

    if not ROLE_RE.match(value) or team.seat(value) is None:
        raise IdentityRefused(
            f"TEAM_ROLE={value!r} is not a role id of team {team.name} ({', '.join(team.roles)}) nor "
            "live-test: fix or unset it.",
            log_sender=value,
        )
    return value


def check_machine(team: Team, sender: str, here: str | None) -> str:
    """Refuse a sender that does not speak from this machine, for a team whose seats run on several: a seat
    speaks from the machine it runs on, and the owner from the team's own (``here`` is ``None`` there, the
    host's name on a host).  Returns ``sender``."""
    seat = team.seat(sender)
    where = "the team's own machine" if here is None else f"host {here}"
    if seat is not None and seat.host != here:
        runs = "the team's own machine" if seat.host is None else f"host {seat.host}"
        raise IdentityRefused(
            f"{sender} is a seat of {runs}, and this is {where}: a seat speaks from the machine it runs on "
            f"(TEAM_ROLE={sender} here is refused)",
            log_sender=sender,
        )
    if sender == OWNER and here is not None:
        raise IdentityRefused(
            f"this is {where}: the owner speaks from the team's own machine, so say runs there (here, set "
            "TEAM_ROLE to a seat of this host only from inside it)",
            log_sender=sender,
        )
    return sender


def sender_from_ancestry(
    team: Team,
    panes: Sequence[PaneRow] | None,
    *,
    start_pid: int | None = None,
    max_walk: int = MAX_WALK,
) -> str:
    """The role of the seat process ``start_pid`` (default: this one) runs inside, ``owner`` outside any pane.

    ``panes`` is the team server's pane list (``None`` when tmux could not list
    it).  Raises :class:`IdentityRefused` when it cannot tell.  A command run by
    the team's command server passes the process that asked for it.
    """
    if panes is None:
        raise IdentityRefused(
            "cannot tell whether this runs inside a seat: tmux could not list the panes of the team's "
            "server. Set TEAM_ROLE, or start the team's server.",
            log_sender=UNKNOWN_SENDER,
        )
    by_pid: Mapping[int, PaneRow] = {p.pane_pid: p for p in panes}
    server_pids = {p.server_pid for p in panes}
    pid = start_pid if start_pid is not None else os.getpid()
    for _ in range(max_walk):
        if pid <= 1:
            return OWNER
        pane = by_pid.get(pid)
        if pane is not None:
            return _role_of_pane(team, pane)
        try:
            info = procs.info(pid)
        except (procs.ProcessGone, procs.ProcessUnreadable) as exc:
            raise IdentityRefused(
                f"cannot tell whether this runs inside a seat: process {pid} could not be read ({exc}). "
                "Set TEAM_ROLE to say who is sending.",
                log_sender=UNKNOWN_SENDER,
            ) from None
        if info.name.startswith("tmux") and pid not in server_pids:
            raise IdentityRefused(
                f"this runs inside a pane of another tmux server (process {pid}, {info.name!r}), whose "
                "seats fabrikito cannot see: run say from that team's own server, or from outside tmux.",
                log_sender=UNKNOWN_SENDER,
            )
        pid = info.ppid
    raise IdentityRefused(
        f"cannot tell whether this runs inside a seat: the walk up the process tree stopped at {max_walk} "
        "processes before pid 1. Set TEAM_ROLE to say who is sending.",
        log_sender=UNKNOWN_SENDER,
    )


def _role_of_pane(team: Team, pane: PaneRow) -> str:
    seat = team.seat_by_session(pane.session)
    if seat is not None:
        return seat.role
    try:
        env = procs.environ(pane.pane_pid)
    except (procs.ProcessGone, procs.ProcessUnreadable) as exc:
        raise IdentityRefused(
            f"cannot tell whether pane {pane.pane_id} (session {pane.session}) is a seat: its process could "
            f"not be read ({exc}). Set TEAM_ROLE.",
            log_sender=UNKNOWN_SENDER,
        ) from None
    if env.get("TEAM_ROLE"):
        other = env.get("FABRIKITO_TEAM", "another team")
        raise IdentityRefused(
            f"this runs inside session {pane.session}, a seat of {other} (TEAM_ROLE={env['TEAM_ROLE']}), "
            f"not of team {team.name}: a seat speaks only to its own team.",
            log_sender=UNKNOWN_SENDER,
        )
    return OWNER


def sender_for(team: Team, server: Server, env_role: str | None) -> str:
    """Who is speaking, by the rules above, for a command that needs no seat to be up (``send``'s label).

    Unlike ``say``, the team's server not running is no refusal: nothing can
    run inside one of its panes then, so the sender is ``TEAM_ROLE`` or ``owner``.
    """
    from fabrikito.base.errors import TmuxError
    from fabrikito.delivery.seatpane import list_panes

    if env_role:
        return check_team_role(team, env_role, default_server=server.is_default)
    if not os.path.exists(server.resolved_socket_path()):
        return OWNER
    try:
        panes: list[PaneRow] | None = list_panes(server)
    except TmuxError:
        panes = None
    return sender_from_ancestry(team, panes)


def sender_without_team(env_role: str | None) -> str:
    """Who is speaking when there is no team file: ``TEAM_ROLE`` (a role id or ``live-test``), else ``owner``."""
    if not env_role:
        return OWNER
    from fabrikito.team.teamfile import ROLE_RE

    if env_role in (OWNER, LAUNCHER) or not (ROLE_RE.match(env_role) or env_role == LIVE_TEST):
        raise IdentityRefused(
            f"TEAM_ROLE={env_role!r} is refused: it is not a role id (or '{env_role}' is fabrikito's own label). "
            "Fix or unset it.",
            log_sender=env_role,
        )
    return env_role


def who_speaks(team: Team, server: Server, env_role: str | None, panes: list[PaneRow] | None, caller_pid: int) -> str:
    """The sender's label: a checked ``TEAM_ROLE``, or the seat process ``caller_pid`` runs inside, or ``owner``;
    for a team on several machines, one that speaks from this one (``identity.check_machine``).

    ``panes`` is ``None`` when tmux could not list them; when the team's server
    is not running there are none, and the walk up the process tree still
    refuses a pane of another server.  Raises ``IdentityRefused``.
    """
    from fabrikito.team.hosts import here_of

    if env_role:
        sender = check_team_role(team, env_role, default_server=server.is_default)
    else:
        sender = sender_from_ancestry(team, panes, start_pid=caller_pid)
    if team.origin is None and all(s.host is None for s in team.seats):
        return sender  # all on one machine
    return check_machine(team, sender, here_of(team))
