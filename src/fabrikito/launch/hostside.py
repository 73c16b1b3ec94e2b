"""``fabrikito _host``: a host's side of a team that spans hosts, run over ssh by fabrikito itself.

Not a command for people (``--help`` does not list it).  The team's machine
runs, through :mod:`fabrikito.base.ssh`::

    fabrikito _host version                      the release here
    fabrikito _host put TEAM --host DEST         stdin: the team file, shared prompt, the machines' secret hashes
    fabrikito _host peers TEAM                   stdin: the other hosts' secret hashes (team/routekeys.py)
    fabrikito _host up TEAM [--timeout S] [--resume] [ROLE...]
    fabrikito _host down TEAM [--close] [ROLE...]     --close: and end this host's ssh connections
    fabrikito _host status TEAM                  status --json of the seats here
    fabrikito _host log TEAM                     the host's messages.log, as it is
    fabrikito _host events TEAM [--from N]       its size, then events.jsonl (and generations) from byte N
    fabrikito _host watch TEAM                   the host's watcher: whether it runs, and its watcher.json
    fabrikito _host say TEAM --sender S ROLE     stdin: the message (see delivery/route.py)
    fabrikito _host flush TEAM --sender S ROLE   flush there (see delivery/route.py)
    fabrikito _host gate                         the forced command of a host's restricted key (launch/routelogin.py)

TEAM is the team's name (this host's copy), or, for a say routed from a host
to the team's own machine, the path of the team file there.

The host's copy of the team is ``$XDG_STATE_HOME/fabrikito/teams/<team>/team.toml``
(:func:`fabrikito.team.hosts.host_team_dir`); its shared prompt is
``shared-prompt.md`` beside it, and relative ``cwd`` values are taken from
that directory.  Every operation acts on the seats of this host only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from fabrikito.base import statedir
from fabrikito.base.errors import UsageError
from fabrikito.team import hosts
from fabrikito.team.teamfile import Team

TEAM_FILE = "team.toml"
PROMPT_FILE = "shared-prompt.md"


def team_file(name: str) -> Path:
    return hosts.host_team_dir(name) / TEAM_FILE


def load_here(name: str) -> Team:
    """This host's copy of team ``name``, its shared prompt the copy beside it."""
    from fabrikito.base.values import replace
    from fabrikito.team import teamfile
    from fabrikito.team.teamfile import TEAM_NAME_RE

    if not TEAM_NAME_RE.match(name):
        raise UsageError(f"_host: {name!r} is not a team name")
    path = team_file(name)
    if not path.is_file():
        raise UsageError(
            f"team {name} was never brought up on this host: `fabrikito up` on the team's machine copies it"
        )
    team = teamfile.load(path)
    return replace(team, shared_prompt=path.parent / PROMPT_FILE)


def _load(ref: str) -> Team:
    """A host's copy by the team's name, or the origin's own team file by its path (a routed say to it)."""
    if "/" in ref:
        from fabrikito.team import teamfile

        return teamfile.load(ref)
    return load_here(ref)


def put(name: str, dest: str, data: bytes) -> None:
    """Write this host's copy of the team file and shared prompt; record which host this is."""
    try:
        given = json.loads(data)
        toml, prompt = str(given["team_toml"]), given.get("prompt")
        origin_team, origin_command = str(given["origin_team"]), str(given["origin_command"])
    except (ValueError, KeyError, TypeError):
        raise UsageError("_host put: stdin is not the team's JSON") from None
    from fabrikito.team.teamfile import TEAM_NAME_RE

    if not TEAM_NAME_RE.match(name):
        raise UsageError(f"_host put: {name!r} is not a team name")
    directory = hosts.host_team_dir(name)
    directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    statedir.ensure_dir(directory)
    statedir.write_atomic(directory / TEAM_FILE, toml.encode("utf-8"))
    statedir.write_atomic(directory / PROMPT_FILE, str(prompt or "").encode("utf-8"))
    team = load_here(name)
    if team.name != name:
        raise UsageError(f"_host put: the team file names team {team.name}, not {name}")
    hosts.mark_here(team, dest, origin_team=origin_team, origin_command=origin_command)
    from fabrikito.team import routekeys

    routekeys.add_peers(team, given.get("peers") or {})
    print(json.dumps({"secret_hash": routekeys.digest(routekeys.secret(team))}))


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="fabrikito _host", add_help=False)
    if list(argv[:1]) == ["gate"]:
        from fabrikito.launch import routelogin

        admitted = routelogin.gate()
        if isinstance(admitted, int):
            return admitted
        argv = admitted
    parser.add_argument(
        "op",
        choices=("version", "put", "peers", "up", "down", "status", "log", "events", "watch", "say", "flush"),
    )
    parser.add_argument("team", nargs="?")
    parser.add_argument("roles", nargs="*")
    parser.add_argument("--host")
    parser.add_argument("--sender")
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--close", action="store_true")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--from", dest="start", type=int)
    args = parser.parse_intermixed_args(list(argv))
    if args.op == "version":
        from fabrikito import __version__

        print(f"fabrikito {__version__}")
        return 0
    if not args.team:
        raise UsageError("_host: name the team")
    if args.op == "peers":  # the other machines' secret hashes, handed round by up
        from fabrikito.team import routekeys

        try:
            table = json.loads(sys.stdin.buffer.read())
        except ValueError:
            raise UsageError("_host peers: stdin is not JSON") from None
        routekeys.add_peers(load_here(args.team), table if isinstance(table, dict) else {})
        return 0
    if args.op == "put":
        if not args.host:
            raise UsageError("_host put: --host names this host")
        put(args.team, args.host, sys.stdin.buffer.read())
        return 0
    if args.op == "status" and not team_file(args.team).is_file():
        print(json.dumps({"seats": []}))  # never brought up here: every seat of this host is down
        return 0
    if args.op == "watch" and not team_file(args.team).is_file():
        print(json.dumps({"watcher": {"running": False, "pid": None, "stale": None}, "state": None}))
        return 0
    team = _load(args.team)
    here = hosts.this_host(team)
    local = hosts.local_team(team, here)
    if args.op in ("say", "flush"):
        return _say(team, args)
    if args.op == "log":
        from fabrikito.base import rotate
        from fabrikito.base.errors import StateFileError

        try:
            raw = rotate.read_all(team.log_path)  # messages.log and its rotated generations
        except (OSError, StateFileError) as exc:
            raise UsageError(f"the log {team.log_path} cannot be read: {exc}") from None
        sys.stdout.buffer.write(raw)
        return 0
    if args.op in ("events", "watch"):
        return _watched(team, args.op, args.start)
    if args.op == "status":
        from fabrikito.launch import status

        print(json.dumps(status.to_json(status.collect(local))))
        return 0
    from fabrikito.launch import lifecycle, teardown

    roles = [r for r in args.roles if (s := team.seat(r)) is not None and s.host == here] or None
    if args.close:
        roles = None  # the whole team goes down: this host's helpers (worker, watcher) with its seats
    if args.op == "down":
        code = teardown.down(local, roles, out=_line)
        if args.close:  # the whole team is going down: its connections from this host go too
            for dest in hosts.end_connections(team, here):
                _line(f"ended the ssh connection to {dest}")
        return code
    kwargs = {} if args.timeout is None else {"timeout": args.timeout}
    # The whole team, so each seat's roster lists every seat; only this host's are started.
    # Each seat's conversation record is kept here, on the host that runs it, and resumed from here.
    resume = True if args.resume else None
    result = lifecycle.up(team, roles or list(local.roles), out=_line, resume=resume, **kwargs)
    for failed in result.failed:
        _line(f"{failed.role} did not come up: {failed.detail}")
    return result.exit_code


def _watched(team: Team, op: str, start: int | None) -> int:
    """What the team's machine reads of this host's watcher: its events (``events``: the file's size on a line,
    then its bytes from ``start``, all its generations without one) or its state (``watch``: JSON)."""
    from fabrikito.base import rotate
    from fabrikito.base.errors import StateFileError
    from fabrikito.launch import watcherproc

    if op == "watch":
        found = watcherproc.info(team)
        try:
            state = json.loads(statedir.read_plain(watcherproc.state_path(team)) or b"null")
        except (OSError, ValueError, StateFileError):
            state = None
        watcher = {"running": found.running, "pid": found.pid, "stale": found.stale}
        print(json.dumps({"watcher": watcher, "state": state if found.running else None}))
        return 0
    from fabrikito.log import events

    path = events.path_for(team.state_dir)
    size = events.size(path)
    if start is not None and start > size:
        start = 0  # rotated or set aside since: the new file from its start
    try:
        if start is None:
            data = rotate.read_all(path)
        else:
            fd = statedir.open_plain(path, os.O_RDONLY)
            try:
                data = os.pread(fd, size - start, start)
            finally:
                os.close(fd)
    except FileNotFoundError:
        data = b""
    except (OSError, StateFileError) as exc:
        raise UsageError(f"the events file {path} cannot be read: {exc}") from None
    sys.stdout.buffer.write(f"{size}\n".encode() + data)
    return 0


def _say(team: Team, args: argparse.Namespace) -> int:
    from fabrikito.delivery import route

    if not args.sender or len(args.roles) != 1:
        raise UsageError(f"_host {args.op} TEAM --sender S ROLE")

    def write(data: bytes) -> None:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except OSError:
            pass  # the connection is gone: the engine carries on, its line is in this host's log

    data = sys.stdin.buffer.read()
    if args.op == "flush":
        from fabrikito.delivery import flush

        return flush.serve_flush(team, args.sender, args.roles[0], data, write=write)
    return route.serve_say(team, args.sender, args.roles[0], data, write=write)


def _line(text: str) -> None:
    try:
        print(text, flush=True)
    except OSError:
        pass
