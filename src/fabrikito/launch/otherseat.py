"""What ``up`` starts a Codex CLI or Gemini CLI seat with: unattended and clean, the user's own
authentication and model settings left alone.

**Codex CLI** runs as ``<command> --no-daemon -c … <args>``.  Every setting
fabrikito needs is a ``-c key=value`` override on its command line, which
Codex applies to that run only and never writes back: nothing in
``$CODEX_HOME/config.toml`` is read or changed by fabrikito.

* ``--no-daemon``: without it Codex starts a shared background app-server
  (processes in sessions of their own that outlive the pane and the tmux
  server, and a copy of its binary in ``$CODEX_HOME/packages``);
* ``check_for_update_on_startup=false``: no update check;
* ``projects={"<cwd>"={trust_level="trusted"}, …}``: the seat's folder (and
  the root of the git repository it is in, which is what Codex keys its trust
  by there) trusted for this run, as the "Trust this folder?" screen would
  record it.  The value is an inline table: a dotted key
  (``projects."<path>".trust_level``) is cut at every dot of the path;
* ``developer_instructions="<the shared prompt and the roster>"``: the
  team's prompt, as a developer message of every turn.  No ``AGENTS.md`` is
  written, so a user's own ``AGENTS.md`` is read as always and never
  clobbered.

**Gemini CLI** runs as ``<command> --skip-trust <args>``: the workspace
trusted for this session only (``trustedFolders.json`` is not touched).  Its
standing instructions can come only from ``GEMINI.md`` files (in the working
folder, its parents up to the repository root, and ``~/.gemini/``; files in
sub-folders are read only when the agent works there, and a *system
defaults* file, the one settings layer under the user's, is accepted only
when root owns it and every folder above it).  So ``up`` writes the shared
prompt and the roster to ``GEMINI.md`` in the seat's working folder, with a
first line that marks it as fabrikito's; a ``GEMINI.md`` there without that
line is the user's own, which ``up`` never overwrites: the seat is not
started, and the advice is to move it one folder up (Gemini reads it there
too) or to give the seat a folder of its own.  Update checks are a setting
of the user's (``general.enableAutoUpdate``,
``general.enableAutoUpdateNotification``): ``check`` warns when the seat's
``~/.gemini/settings.json`` leaves them on.  ``COLORTERM=truecolor`` is set
unless the seat's env sets it (without it Gemini prints a warning into its
history).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from fabrikito.base.errors import FabrikitoError
from fabrikito.team.agents import GEMINI_MARK, command_for, gemini_prompt_path, is_ours
from fabrikito.team.teamfile import Seat, Team


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's, for what ``json.dumps`` writes)."""
    return json.dumps(text, ensure_ascii=False)


def trusted_folders(cwd: Path) -> list[Path]:
    """The seat's folder and the root of the git repository it is in (when it is in one)."""
    folders = [cwd]
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            if folder != cwd:
                folders.append(folder)
            break
    return folders


def codex_argv(team: Team, seat: Seat, prompt: str, conversation: Sequence[str] = ()) -> list[str]:
    projects = ", ".join(f'{toml_string(str(p))}={{trust_level="trusted"}}' for p in trusted_folders(seat.cwd))
    return [
        *command_for(team, seat),
        "--no-daemon",
        "-c",
        "check_for_update_on_startup=false",
        "-c",
        f"projects={{{projects}}}",
        "-c",
        f"developer_instructions={toml_string(prompt)}",
        *seat.args,
        *conversation,  # `resume <id>`: a subcommand, after every option of the program's own
    ]


class UsersOwnFile(FabrikitoError):
    """The seat's folder holds the user's own ``GEMINI.md``: it is never overwritten."""


def gemini_prompt_text(seat: Seat, prompt: str) -> str:
    return GEMINI_MARK.format(role=seat.role) + "\n\n" + prompt


def gemini_argv(team: Team, seat: Seat, conversation: Sequence[str] = ()) -> list[str]:
    return [*command_for(team, seat), "--skip-trust", *seat.args, *conversation]


def argv(team: Team, seat: Seat, prompt: str, conversation: Sequence[str] = ()) -> list[str]:
    """The agent's argv for a seat that is not Claude Code; ``conversation``: its options that fix or resume
    its conversation (Gemini's ``--session-id``/``--resume``, Codex's ``resume <id>``)."""
    if seat.agent == "codex":
        return codex_argv(team, seat, prompt, conversation)
    if seat.agent == "gemini":
        return gemini_argv(team, seat, conversation)
    raise ValueError(f"no command line for agent kind {seat.agent!r}")


def extra_env(team: Team, seat: Seat) -> dict[str, str]:
    """What the pane's environment gets besides the seat's own table and fabrikito's variables."""
    if seat.agent == "gemini" and "COLORTERM" not in seat.env:
        return {"COLORTERM": "truecolor"}
    return {}


def write_files(team: Team, seat: Seat, prompt: str) -> None:
    """The file a Gemini CLI seat reads its prompt from (Codex needs none); raises :class:`UsersOwnFile`."""
    if seat.agent != "gemini":
        return
    target = gemini_prompt_path(seat)
    if target.is_symlink() or not is_ours(target):
        raise UsersOwnFile(
            f"{target} is not one fabrikito wrote, and it is never overwritten: Gemini CLI takes its instructions "
            f"only from GEMINI.md files, so move yours one folder up (Gemini reads it there too) or give seat "
            f"{seat.role} a folder of its own (cwd in the team file)"
        )
    tmp = target.with_name(f".GEMINI.md.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, gemini_prompt_text(seat, prompt).encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, target)
