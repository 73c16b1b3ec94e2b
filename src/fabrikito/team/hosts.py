"""Where each seat runs: this machine, or another host reached over ssh.

A seat with ``host = "build-2"`` runs on that host; a seat without one runs
on the team file's own machine (the *origin*).  ``up`` copies the team file
and the shared prompt to each host, into ``$XDG_STATE_HOME/fabrikito/teams/<team>/``
(:func:`host_team_dir`), with ``.state/<team>/here.json`` saying which host
that copy is on.  So every copy answers "where am I" the same way:
:func:`this_host` is ``None`` on the origin and the seat's ``host`` value on a
host, and a seat is *here* when its ``host`` equals it.

From a host, the origin is reached through the team file's ``origin`` (an
ssh destination for the team's machine); any other host by its own name.
The names are ssh destinations, so they must mean the same machine from every
host (the same ``~/.ssh/config`` entries, or plain host names).
"""

from __future__ import annotations

import json
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base.errors import UsageError
from fabrikito.team.teamfile import Seat, Team

if TYPE_CHECKING:
    from fabrikito.base.ssh import Host

HERE_FILE = "here.json"
TEAMS_DIR = "teams"


def host_team_dir(name: str) -> Path:
    """Where a host keeps its copy of team ``name``: ``$XDG_STATE_HOME/fabrikito/teams/<name>/``."""
    from fabrikito.base.xdg import state_home

    return state_home() / TEAMS_DIR / name


def here_path(team: Team) -> Path:
    return team.state_dir / HERE_FILE


def _here_record(team: Team) -> dict[str, str]:
    from fabrikito.base import statedir
    from fabrikito.base.errors import StateFileError

    try:
        raw = statedir.read_plain(here_path(team))
        data = json.loads(raw) if raw else {}
    except (OSError, StateFileError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str) and v}


def this_host(team: Team) -> str | None:
    """The host this copy of the team runs on (``None``: the origin, the team file's own machine)."""
    return _here_record(team).get("host")


def origin_route(team: Team) -> tuple[str, str]:
    """On a host: the origin's team file and the command that runs fabrikito there, as ``up`` recorded them."""
    record = _here_record(team)
    team_file, command = record.get("origin_team"), record.get("origin_command")
    if not team_file or not command:
        raise UsageError(
            "this host's copy of the team does not say where the team's own machine keeps it: run "
            "`fabrikito up` there again"
        )
    return team_file, command


def here_of(team: Team) -> str | None:
    """:func:`this_host`, read only for a team that has seats on other hosts (a plain team is all here)."""
    if team.origin is None and all(s.host is None for s in team.seats):
        return None
    return this_host(team)


def mark_here(team: Team, host: str, *, origin_team: str, origin_command: str) -> None:
    """Record that this copy of the team is on ``host``, and how the origin is reached."""
    from fabrikito.base import statedir

    statedir.ensure_state_dir(team.base_dir, team.name)
    record = {"host": host, "origin_team": origin_team, "origin_command": origin_command}
    statedir.write_atomic(here_path(team), json.dumps(record).encode())


def is_here(seat: Seat, here: str | None) -> bool:
    return seat.host == here


def any_elsewhere(team: Team, here: str | None) -> bool:
    return any(seat.host != here for seat in team.seats)


def local_team(team: Team, here: str | None) -> Team:
    """The team with only the seats that run here."""
    from fabrikito.base.values import replace

    return replace(team, seats=tuple(s for s in team.seats if s.host == here))


def dest_of(team: Team, seat: Seat, here: str | None) -> str:
    """The ssh destination that reaches ``seat`` from here (which it is not on)."""
    if seat.host is not None:
        return seat.host
    if team.origin is None:
        raise UsageError(
            f"seat {seat.role} runs on the team's own machine, and this host ({here}) has no way to reach it: "
            "set origin in the team file to an ssh destination for that machine (as the hosts know it), then "
            "run `fabrikito up` there again to copy it here"
        )
    return team.origin


def command_for(team: Team, seat: Seat) -> tuple[str, str]:
    """How the host of ``seat`` names the team, and the command that runs fabrikito there: a host's copy
    by the team's name with ``fabrikito``; the team's own machine by its team file, with the command ``up``
    recorded."""
    from fabrikito.base.ssh import FABRIKITO

    if seat.host is None:
        return origin_route(team)
    return team.name, FABRIKITO


def elsewhere(team: Team, here: str | None) -> dict[str, list[Seat]]:
    """The seats that do not run here, by the ssh destination that reaches them."""
    by_dest: dict[str, list[Seat]] = {}
    for seat in team.seats:
        if seat.host != here:
            by_dest.setdefault(dest_of(team, seat, here), []).append(seat)
    return by_dest


def destinations(team: Team, here: str | None) -> list[str]:
    """Every ssh destination this machine's copy of the team reaches (and so may hold a connection to): the
    other hosts' seats, and from a host the team's own machine (``origin``) when the team names it."""
    found = {seat.host for seat in team.seats if seat.host is not None and seat.host != here}
    if here is not None and team.origin is not None:
        found.add(team.origin)
    return sorted(found)


def end_connections(team: Team, here: str | None) -> list[str]:
    """End every ssh connection (ControlMaster) this machine's copy of the team keeps; the destinations ended."""
    ended = []
    for dest in destinations(team, here):
        connection = host(team, dest)
        if connection.master_up():
            connection.disconnect()
            ended.append(dest)
    return ended


def host(team: Team, dest: str) -> Host:
    """The ssh connection to ``dest``, its master socket under ``.state/<team>/ssh/``."""
    from fabrikito.base.ssh import Host

    return Host(dest, team.state_dir / "ssh")
