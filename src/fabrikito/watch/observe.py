"""One round's reading of the team: what ``status`` reads, screens kept.

Every seat's screen in at most two tmux calls (the pane list, then one chain of
``display-message``/``capture-pane``), the registry (``status``,
``waitingFor``, ``statusUpdatedAt``), the queue, say's refusal records and the
log's last times: :func:`fabrikito.launch.status.collect`.  A team with seats on
other hosts is read here for this machine's seats only (each host runs its own
watcher).
"""

from __future__ import annotations

from fabrikito.launch.status import Status, collect
from fabrikito.team.teamfile import Team


def local_part(team: Team) -> Team:
    """The seats this machine's watcher watches."""
    if not team.across_hosts:
        return team
    from fabrikito.team import hosts

    return hosts.local_team(team, hosts.here_of(team))


def observe(team: Team) -> Status:
    return collect(team, keep_screens=True)
