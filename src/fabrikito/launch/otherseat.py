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

**Gemini CLI** runs as ``<command> --skip-trust <args>`` (the workspace
trusted for this session only; ``trustedFolders.json`` is not touched), with
``GEMINI_CLI_SYSTEM_DEFAULTS_PATH`` naming a generated *system defaults*
file, the settings layer of the lowest precedence, so the user's own settings
still win where they speak.  It holds the system defaults the machine already
has (``/etc/gemini-cli/system-defaults.json``), and over them: no automatic
update and no update notice, and ``context.fileName`` = ``GEMINI.md`` and
``.fabrikito-<role>.md``, the file ``up`` writes in the seat's working
directory with the shared prompt and the roster (a name of fabrikito's own:
a user's ``GEMINI.md`` is read as always and never clobbered).  A user whose
own settings set ``context.fileName`` replaces that list, and the seat then
starts without the team's prompt: ``check`` cannot see it, the kickoff still
arrives.  ``COLORTERM=truecolor`` is set unless the seat's env sets it (without
it Gemini prints a warning into its history).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fabrikito.base import statedir
from fabrikito.team.agents import command_for
from fabrikito.team.teamfile import Seat, Team

GEMINI_SYSTEM_DEFAULTS = Path("/etc/gemini-cli/system-defaults.json")


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


def codex_argv(team: Team, seat: Seat, prompt: str) -> list[str]:
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
    ]


def gemini_prompt_name(seat: Seat) -> str:
    return f".fabrikito-{seat.role}.md"


def gemini_defaults_path(team: Team, seat: Seat) -> Path:
    return team.state_dir / "seats" / f"{seat.role}.gemini-defaults.json"


def gemini_defaults(seat: Seat, machine: Path = GEMINI_SYSTEM_DEFAULTS) -> dict[str, Any]:
    """The machine's Gemini CLI system defaults with fabrikito's over them."""
    try:
        base = json.loads(machine.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        base = {}
    data: dict[str, Any] = base if isinstance(base, dict) else {}
    general = data.get("general")
    data["general"] = {
        **(general if isinstance(general, dict) else {}),
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
    }
    context = data.get("context")
    data["context"] = {
        **(context if isinstance(context, dict) else {}),
        "fileName": ["GEMINI.md", gemini_prompt_name(seat)],
    }
    return data


def gemini_argv(team: Team, seat: Seat) -> list[str]:
    return [*command_for(team, seat), "--skip-trust", *seat.args]


def argv(team: Team, seat: Seat, prompt: str) -> list[str]:
    """The agent's argv for a seat that is not Claude Code."""
    if seat.agent == "codex":
        return codex_argv(team, seat, prompt)
    if seat.agent == "gemini":
        return gemini_argv(team, seat)
    raise ValueError(f"no command line for agent kind {seat.agent!r}")


def extra_env(team: Team, seat: Seat) -> dict[str, str]:
    """What the pane's environment gets besides the seat's own table and fabrikito's variables."""
    if seat.agent != "gemini":
        return {}
    env = {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(gemini_defaults_path(team, seat))}
    if "COLORTERM" not in seat.env:
        env["COLORTERM"] = "truecolor"
    return env


def write_files(team: Team, seat: Seat, prompt: str) -> None:
    """The files a Gemini CLI seat reads (Codex needs none)."""
    if seat.agent != "gemini":
        return
    defaults = json.dumps(gemini_defaults(seat), indent=2, ensure_ascii=False) + "\n"
    statedir.write_atomic(gemini_defaults_path(team, seat), defaults.encode("utf-8"))
    target = seat.cwd / gemini_prompt_name(seat)
    if target.is_symlink():
        os.unlink(target)  # never written through
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, prompt.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, target)
