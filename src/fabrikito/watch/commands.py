"""``fabrikito events``, ``fabrikito notify --test`` and ``fabrikito watch``: their arguments and handlers."""

from __future__ import annotations

import argparse
import json
import sys
import time

from fabrikito.base.errors import FabrikitoError, UsageError
from fabrikito.log import events
from fabrikito.team import teamfile

JSON_VERSION = 1


def _team_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--team", metavar="FILE", help="the team file (default: ./team.toml)")


def build_events(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("--since", metavar="WHEN", help="from this local time (2026-10-30T14:05, 14:05) or age (10m, 2h)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing events as the watcher writes them")
    p.add_argument("--json", action="store_true", help="print JSON (JSON lines with --follow)")
    p.add_argument("--open", action="store_true", help="only the conditions still open")
    p.epilog = "exit status: 0 shown (also when stopped with Ctrl-C, SIGTERM or SIGHUP); 2 bad usage or team file"


def event_line(e: events.Event) -> str:
    what = "OPEN" if e.event == events.OPENED else e.event
    seat = e.seat if e.host is None else f"{e.seat} on {e.host}"
    return f"{events.local_time(e.at)}  {seat}  {e.kind}  {what}  {e.detail}"


def cmd_events(args: argparse.Namespace) -> int:
    from fabrikito.log.logview import parse_when

    team = teamfile.load(args.team)
    path = events.path_for(team.state_dir)
    since = parse_when(args.since, time.time(), "--since") if args.since else None
    start = events.size(path)
    found = events.read(path)
    problems: list[str] = []
    if team.across_hosts:  # every host's watcher's events, merged by time, each named with its host
        from fabrikito.watch import remote

        found, problems = remote.events_of(team, found)
    found = [e for e in found if since is None or events.local_time(e.at) >= since]
    if args.open:
        found = sorted(events.open_items(found).values(), key=lambda e: e.at)
    out = sys.stdout
    if args.follow:
        from fabrikito.watch.view import stop_on_signals

        stop_on_signals()  # between two lines, status 0
    try:
        if args.json and not args.follow:
            out.write(json.dumps({"version": JSON_VERSION, "team": team.name, "events": [e.to_json() for e in found]}))
            out.write("\n")
        else:
            for e in found:
                out.write(e.line().decode() if args.json else event_line(e) + "\n")
            if not found and not args.follow:
                out.write("no events\n")
        out.flush()
        for problem in problems:
            print(problem, file=sys.stderr)
        if args.follow:
            if team.across_hosts:
                from fabrikito.watch import remote

                followed = remote.follow_all(team, start, lambda line: print(line, file=sys.stderr, flush=True))
            else:
                followed = events.follow(path, start=start)
            for e in followed:
                out.write(e.line().decode() if args.json else event_line(e) + "\n")
                out.flush()
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        return 0
    return 0


def build_notify(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("--test", action="store_true", required=True, help="send one test event to the notify command")
    p.epilog = "exit status: 0 the command ran and exited 0; 1 it failed (the output says how); 2 bad usage"


def cmd_notify(args: argparse.Namespace) -> int:
    from fabrikito.watch import notify

    team = teamfile.load(args.team)
    argv = team.watch.notify
    if argv is None:
        raise UsageError(f'{team.path} has no \'notify\': add notify = ["program", "args"...] at its top level')
    now = time.time()
    event = events.Event(
        now, "notify-test", "notice", events.OPENED, "a test event from fabrikito notify --test", now, "test"
    )
    done = notify.run_one(team, argv, event, team.watch.notify_timeout)
    print(done.what)
    return 0 if done.ok else 1


def build_watch(p: argparse.ArgumentParser) -> None:
    _team_arg(p)
    p.add_argument("--once", action="store_true", help="print one frame as text and exit (no terminal needed)")
    p.epilog = (
        "keys: up/down (or j/k) choose a seat or an item; a attach; f flush; r release; d drop "
        "(each asks y/n first); q quit.  exit status: 0 ended; 2 bad usage or team file"
    )


def cmd_watch(args: argparse.Namespace) -> int:
    from fabrikito.watch import view

    team = teamfile.load(args.team)
    if args.once:
        print(view.text_frame(team))
        return 0
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise FabrikitoError("fabrikito watch needs a terminal (or --once for one frame as text)")
    return view.run(team)
