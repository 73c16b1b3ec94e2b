"""What fabrikito reads about processes: parent, name, start time, terminal.

The reading itself is :mod:`fabrikito.base.hostos`'s (``/proc`` on Linux,
psutil elsewhere); this module names it for the rest of fabrikito and adds
what is the same everywhere.  "Could not look" is kept apart from "not
there": :class:`ProcessUnreadable` is raised when a process exists but cannot
be read, :class:`ProcessGone` when it does not exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fabrikito import TYPE_CHECKING
from fabrikito.base import hostos
from fabrikito.base.hostos import ProcessGone, ProcessUnreadable, ProcInfo

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "ProcInfo",
    "ProcessGone",
    "ProcessUnreadable",
    "alive",
    "children_of",
    "claude_config_dir",
    "cmdline",
    "config_dir",
    "config_dir_name",
    "config_dir_of",
    "environ",
    "exe_name",
    "exe_path",
    "foreground_group",
    "info",
    "parent",
    "pids",
    "session_members",
]

info = hostos.info
exe_path = hostos.exe_path
exe_name = hostos.exe_name
foreground_group = hostos.foreground_group
cmdline = hostos.cmdline
environ = hostos.environ
children_of = hostos.children_of
parent = hostos.parent
pids = hostos.pids
alive = hostos.alive


def claude_config_dir(env: Mapping[str, str]) -> str | None:
    """``${CLAUDE_CONFIG_DIR:-$HOME/.claude}`` in the environment ``env``; ``None`` with neither set."""
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return os.path.expanduser(configured)
    home = env.get("HOME")
    return os.path.join(home, ".claude") if home else None


def config_dir_of(pid: int) -> str | None:
    """:func:`claude_config_dir` of the environment process ``pid`` started with, from the two names it
    reads there (``status`` reads every seat's: the rest of the environment is not decoded)."""
    return claude_config_dir(hostos.environ_values(pid, ("CLAUDE_CONFIG_DIR", "HOME")))


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``${CLAUDE_CONFIG_DIR:-$HOME/.claude}`` as a path, from ``env`` (default: this process's)."""
    from pathlib import Path

    return Path(config_dir_name(env))


def config_dir_name(env: Mapping[str, str] | None = None) -> str:
    """:func:`config_dir` as a string (``send`` does not import pathlib)."""
    found = claude_config_dir(os.environ if env is None else env)
    return found if found is not None else os.path.join(os.path.expanduser("~"), ".claude")


def session_members(sid: int) -> list[ProcInfo]:
    """Every running process of session ``sid`` that can be read (zombies left out): what a process
    started in a tmux pane (the session's leader) and everything it started keep, whatever they are
    re-parented to, unless they start a session of their own."""
    found = []
    for pid in hostos.pids():
        try:
            proc = info(pid)
        except (ProcessGone, ProcessUnreadable, OSError):
            continue
        if proc.sid == sid and alive(pid):
            found.append(proc)
    return found
