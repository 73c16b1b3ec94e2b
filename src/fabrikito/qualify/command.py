"""``fabrikito qualify``: check the user's own Claude Code (or Codex CLI, or Gemini CLI) release offline, and
accept it when it passes."""

from __future__ import annotations

import argparse
import os

from fabrikito.base.errors import UsageError

EPILOG = (
    "exit status: 0 qualified (recorded: fabrikito accepts that binary from now on); 1 not qualified "
    "(what differs is listed and the screens are saved: attach the folder to a bug report); 2 no agent "
    "found, or it does not run"
)


def build_qualify(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--agent",
        metavar="PATH",
        help="the agent to check: Claude Code, Codex CLI or Gemini CLI, told by its npm package "
        "(default: the team file's agent, else claude)",
    )
    p.add_argument("--team", metavar="FILE", help="the team file whose agent to check (default: ./team.toml if any)")
    p.add_argument("--out", metavar="DIR", help="where to save the screens (default: a new folder in the cache)")
    p.add_argument("--no-record", action="store_true", help="check only: do not record a success")
    p.add_argument("-v", "--verbose", action="store_true", help="show each capture as it is saved")
    p.epilog = EPILOG


def find_agent(agent: str | None, team_file: str | None) -> str:
    """The binary to qualify: ``--agent``, else the team file's agent, else ``claude`` on PATH."""
    import shutil

    if agent is not None:
        where = shutil.which(agent) if os.sep not in agent else (agent if os.access(agent, os.X_OK) else None)
        if where is None:
            raise UsageError(f"--agent {agent}: no such executable")
        return os.path.realpath(where)
    from fabrikito.team import teamfile

    path = teamfile.resolve_team_path(team_file)
    program = "claude"
    if team_file is not None or path.exists():
        program = teamfile.load(path).agent[0]
    where = shutil.which(program)
    if where is None:
        raise UsageError(
            f"Claude Code ({program!r}) is not found on PATH: install it, or pass --agent PATH to the binary"
        )
    return os.path.realpath(where)


def cmd_qualify(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from fabrikito.base import xdg
    from fabrikito.offline import other_setup
    from fabrikito.qualify.run import qualify, release_of
    from fabrikito.screen import releases

    binary = find_agent(args.agent, args.team)
    release = release_of(binary)
    agent = other_setup.kind_of(Path(binary)) or "claude"
    if agent != "claude":
        binary = str(other_setup.program_for(agent, Path(binary)))
    name = releases.AGENT_NAMES[agent]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    prefix = release if agent == "claude" else f"{agent}-{release}"
    out = Path(args.out) if args.out else xdg.cache_home() / "qualify" / f"{prefix}-{stamp}"

    def line(text: str) -> None:
        print(text, flush=True)

    debug = line if args.verbose else lambda _t: None
    outcome = qualify(binary, agent=agent, out=out, log=line, debug=debug, release=release)
    if not outcome.qualified or outcome.dialect is None:
        line(f"\n{name} {release} is NOT qualified ({outcome.seconds:.0f}s): fabrikito still refuses it.")
        for problem in outcome.problems:
            line(f"  - {problem}")
        line(f"The screens (plain and with escapes) and the report are in {out}: attach that folder to a bug report.")
        return 1
    line(f"\n{name} {release} qualified as dialect {outcome.dialect} in {outcome.seconds:.0f}s.")
    if args.no_record:
        line("Not recorded (--no-record).")
        return 0
    exe = outcome.exe or binary
    st = os.stat(exe)
    entry = releases.LocalQualification(
        agent=agent,
        release=release,
        dialect=outcome.dialect,
        sha256=releases.file_sha256(exe),
        binary=exe,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        date=time.strftime("%Y-%m-%dT%H:%M:%S"),
    )
    path = releases.record_local(entry)
    line(f"Recorded in {path}: fabrikito accepts this binary ({exe}) from now on.")
    line(f"The screens are in {out}.")
    return 0
