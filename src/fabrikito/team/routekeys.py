"""The secrets that let one machine of a team vouch for the sender of a routed ``say``.

Every machine of a team (the team's own, *origin*, and each host) keeps a
random secret in ``.state/<team>/route-secret`` (0600), and in
``.state/<team>/route-peers.json`` the SHA-256 of every *other* machine's
secret, under that machine's name (``origin``, or the host's ssh destination).
``up`` makes them and hands them round (``_host put`` returns a host's hash;
each host gets the others').  A routed ``say`` or ``flush`` sends the sending
machine's name and secret first on stdin; the receiving machine takes the
named sender only if the secret's hash is that machine's and the sender is a
seat of that machine (or ``owner``).

So a seat on a host, which can read its own host's secret, can at most claim
another seat of its own host (as ``TEAM_ROLE`` could anyway), never a seat of
another machine: that needs a secret which is not on its machine.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from fabrikito.base import statedir
from fabrikito.base.errors import StateFileError
from fabrikito.team.teamfile import ORIGIN_MACHINE, Team

ORIGIN = ORIGIN_MACHINE
SECRET_FILE = "route-secret"  # noqa: S105 -- a file name
PEERS_FILE = "route-peers.json"


def machine_name(here: str | None) -> str:
    """How the team names the machine this copy is on."""
    return ORIGIN if here is None else here


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii", "replace")).hexdigest()


def _secret_path(team: Team) -> Path:
    return team.state_dir / SECRET_FILE


def secret(team: Team) -> str:
    """This machine's secret for the team, made on first use."""
    path = _secret_path(team)
    try:
        raw = statedir.read_plain(path)
    except (OSError, StateFileError):
        raw = None
    if raw and len(raw.strip()) == 64:
        return raw.strip().decode("ascii", "replace")
    statedir.ensure_state_dir(team.base_dir, team.name)
    made = os.urandom(32).hex()
    statedir.write_atomic(path, made.encode())
    return made


def peers(team: Team) -> dict[str, str]:
    """The other machines' secret hashes, by machine name."""
    try:
        raw = statedir.read_plain(team.state_dir / PEERS_FILE)
        data = json.loads(raw) if raw else {}
    except (OSError, StateFileError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def add_peers(team: Team, more: dict[str, str]) -> None:
    statedir.ensure_state_dir(team.base_dir, team.name)
    table = {**peers(team), **{k: v for k, v in more.items() if isinstance(k, str) and isinstance(v, str)}}
    statedir.write_atomic(team.state_dir / PEERS_FILE, json.dumps(table, sort_keys=True).encode())


def vouched(team: Team, machine: str, given: str) -> bool:
    """Whether ``given`` is the secret of ``machine`` as this copy knows it."""
    import hmac

    known = peers(team).get(machine)
    return known is not None and hmac.compare_digest(known, digest(given))
