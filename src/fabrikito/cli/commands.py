"""Handlers of the subcommands: parse nothing, print results, return exit codes.

Each handler imports the module it drives inside the function, so a command
loads only its own part of fabrikito.
"""

from __future__ import annotations

import os

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from fabrikito.cli.invocation import Invocation
    from fabrikito.launch.lifecycle import UpResult
    from fabrikito.team.teamfile import Team


def cmd_check(args: argparse.Namespace) -> int:
    from fabrikito.team import check, teamfile

    team = teamfile.load(args.team)
    report = check.run(team)
    agent, running = _releases(team)
    unqualified = agent.get("qualified") is False
    code = max(report.exit_code, 1) if unqualified else report.exit_code
    if args.json:
        data = check.to_json(report)
        data.update(agent=agent, running=running, exit_code=code)
        from fabrikito.log.logview import json_text

        print(json_text(data, indent=2))
        return code
    print(check.render(report))
    print("\nreleases:")
    print(f"  agent {agent['command']}: {agent['shown']}")
    for seat in running:
        print(f"  running {seat['role']}: {seat['shown']}")
    if unqualified:
        print(
            f"WARNING: the agent's release {agent['release']} is not qualified: say, flush and the kickoffs will "
            "refuse its seats. Run fabrikito qualify (about a minute, offline) to check it and accept it."
        )
    return code


def _releases(team: Team) -> tuple[dict[str, object], list[dict[str, object]]]:
    """The team's agent command's release and, for each running seat, its release; each with whether
    fabrikito has qualified it."""
    import shutil

    from fabrikito.base.errors import FabrikitoError
    from fabrikito.launch import status
    from fabrikito.qualify.run import release_of
    from fabrikito.screen import releases

    program = team.agent[0]
    where = shutil.which(program)
    agent: dict[str, object] = {"command": program, "path": where, "release": None, "qualified": None}
    if where is None:
        agent["shown"] = "not found on PATH"
    else:
        try:
            release = release_of(where)
        except FabrikitoError as exc:
            agent["shown"] = f"its release could not be told: {exc.message}"
        else:
            found = releases.lookup("claude", release, os.path.realpath(where))
            agent.update(release=release, qualified=found is not None)
            agent["shown"] = f"Claude Code {release}, " + (
                f"qualified ({found.source}, dialect {found.dialect})" if found else "NOT qualified"
            )
    running: list[dict[str, object]] = []
    if team.server().alive():
        for seat in status.collect(team, screens=False).seats:
            if seat.qualified is not None:
                shown = status.release_cell(seat.release, seat.qualified)
                running.append(
                    {"role": seat.role, "release": seat.release, "qualified": seat.qualified, "shown": shown}
                )
    return agent, running


def cmd_say(args: argparse.Namespace) -> int:
    from fabrikito.team import teamfile

    inv: Invocation = args.invocation
    team = teamfile.load(args.team)
    # Run by the team's command server, every tmux command goes through its control-mode client
    # (base.tmuxcontrol); else tmux lists the panes while the delivery engine is imported (say reads the list first).
    server = inv.tmux(team.server())
    listing = server.start_list_panes() if os.path.exists(server.resolved_socket_path()) else None
    from fabrikito.delivery import say
    from fabrikito.delivery.engine import no_trace

    expire = _expire(args)
    return say.run_say(
        team,
        server,
        args.role,
        say.Message(tuple(args.message), inv.stdin),  # read once the log line is owed: a usage error is logged too
        env_role=os.environ.get("TEAM_ROLE") or None,
        caller_pid=inv.pid,
        out=inv.out,
        err=inv.err,
        trace=inv.err if args.verbose else no_trace,
        expire=expire,
        listing=listing,
    )


def _expire(args: argparse.Namespace) -> float | None:
    """``--queue``'s expiry in seconds, or ``None`` without ``--queue``."""
    from fabrikito.base.errors import UsageError

    if not args.queue:
        if args.expire is not None:
            raise UsageError("--expire goes with --queue")
        return None
    from fabrikito.delivery import queue

    return queue.DEFAULT_EXPIRE if args.expire is None else queue.parse_duration(args.expire)


def cmd_queue(args: argparse.Namespace) -> int:
    import os

    from fabrikito.delivery import queueview
    from fabrikito.team import teamfile

    team = teamfile.load(args.team)
    return queueview.run(team, args.args, as_json=args.json, by=os.environ.get("TEAM_ROLE") or "owner", out=_line)


def cmd_flush(args: argparse.Namespace) -> int:
    from fabrikito.delivery import flush
    from fabrikito.team import teamfile

    inv: Invocation = args.invocation
    team = teamfile.load(args.team)
    return flush.run_flush(
        team,
        inv.tmux(team.server()),  # as say's
        args.role,
        env_role=os.environ.get("TEAM_ROLE") or None,
        caller_pid=inv.pid,
        out=inv.out,
        err=inv.err,
    )


def _failures(result: UpResult, what: str) -> int:
    """Say which seats of an ``up`` or ``restart`` failed (``ROLE what: why``): the command's exit status."""
    for failed in result.failed:
        _line(f"\n{failed.role} {what}: {failed.detail}")
    return result.exit_code


def cmd_up(args: argparse.Namespace) -> int:
    from fabrikito.launch import lifecycle, status
    from fabrikito.team import check, teamfile

    team = teamfile.load(args.team)
    report = check.run(team)
    for warning in report.warnings:
        _line(f"WARNING: {warning.message}")
    resume = True if args.resume else None
    if team.across_hosts:
        from fabrikito.launch import multihost

        return multihost.run_up(team, args.roles, out=_line, timeout=args.timeout, resume=resume)
    from fabrikito.cli import serverctl

    helpers = [serverctl.UP_HELPER]
    result = lifecycle.up(team, args.roles, out=_line, timeout=args.timeout, helpers=helpers, resume=resume)
    _line("")
    _line(status.render(status.collect(team)))
    return _failures(result, "did not come up")


def cmd_restart(args: argparse.Namespace) -> int:
    from fabrikito.base.errors import UsageError
    from fabrikito.launch import lifecycle
    from fabrikito.team import teamfile

    team = teamfile.load(args.team)
    if team.across_hosts:
        raise UsageError("restart runs on a team whose seats are all on this machine: use down and up --resume")
    result = lifecycle.restart(team, args.roles, out=_line, timeout=args.timeout)
    return _failures(result, "did not come back")


def cmd_down(args: argparse.Namespace) -> int:
    from fabrikito.launch import teardown
    from fabrikito.team import teamfile

    team = teamfile.load(args.team)
    if team.across_hosts:
        from fabrikito.launch import multihost

        return multihost.run_down(team, args.roles, out=_line)
    from fabrikito.cli import serverctl

    return teardown.down(team, args.roles, out=_line, stop_helpers=[serverctl.stop])


def cmd_status(args: argparse.Namespace) -> int:
    from fabrikito.team import teamfile

    inv: Invocation = args.invocation
    team = teamfile.load(args.team)
    server = inv.tmux(team.server())
    listing = None if team.across_hosts else server.start_list_panes()  # tmux answers meanwhile
    from fabrikito.launch import status

    if team.across_hosts:  # every host's status, merged
        from fabrikito.launch import multihost

        found = multihost.collect(team, screens=not args.no_screens)
    else:
        found = status.collect(team, server=server, screens=not args.no_screens, listing=listing)
    inv.out(status.report(found, as_json=args.json))
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fabrikito.launch.seatfiles import say_command
    from fabrikito.team import init

    written = init.init(Path(args.dir), init.parse_roles(args.roles))
    for line in init.next_steps(written, cwd=Path.cwd(), command=say_command()):
        _line(line)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from fabrikito.cli import serverctl
    from fabrikito.offline import demo

    helpers, stops = [serverctl.UP_HELPER], [serverctl.stop]  # the demo's team, as up and down run it
    if args.mixed:
        from pathlib import Path

        from fabrikito.offline import demo_mixed

        where = Path(args.dir).expanduser().absolute() if args.dir else demo_mixed.default_dir()
        if args.stop:
            return demo.stop(where, out=_line, stop_helpers=stops)
        return demo_mixed.run(where, out=_line, socket=args.tmux_socket or demo_mixed.SOCKET, helpers=helpers)
    if args.stop:
        return demo.stop(demo.demo_dir(args.dir), out=_line, stop_helpers=stops)
    return demo.run(demo.demo_dir(args.dir), out=_line, socket=args.tmux_socket or demo.SOCKET, helpers=helpers)


def _line(text: str) -> None:
    """Print a line; a closed stdout (``| head``) ends the output quietly, not the command."""
    import os
    import sys

    try:
        print(text, flush=True)
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
    except OSError:
        pass
