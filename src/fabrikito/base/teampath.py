"""Which team file a command means: the one rule, for the command line, the command server's asker (which
must not import the team file's parser) and every helper started with a team file's path.

The path given (``--team``), else ``$FABRIKITO_TEAM`` (which ``up`` sets in every seat), else
``./team.toml``; made absolute from the working folder as ``pathlib.Path.absolute`` does (``..``
kept, ``.`` parts dropped), so every process names one team file by one string.  A program the team
file names (``agent``, ``command``) is placed from the team file's folder by :func:`program_path`.
"""

from __future__ import annotations

import os

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_TEAM_FILE = "team.toml"


def resolve(named: str | None, env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """The team file's absolute path; ``env`` and ``cwd`` default to this process's."""
    if named is None:
        named = (os.environ if env is None else env).get("FABRIKITO_TEAM") or DEFAULT_TEAM_FILE
    return absolute(named, cwd)


def absolute(path: str, cwd: str | None = None) -> str:
    """``path`` made absolute as ``pathlib.Path.absolute`` does (no ``..`` resolved, ``.`` parts dropped),
    from ``cwd`` (default: this process's working folder)."""
    joined = path if os.path.isabs(path) else os.path.join(os.getcwd() if cwd is None else cwd, path)
    lead = "//" if joined.startswith("//") and not joined.startswith("///") else "/"
    return lead + "/".join(part for part in joined.split("/") if part not in ("", "."))


def program_path(program: str, base: str | os.PathLike[str]) -> str:
    """The program of ``agent`` or ``command`` as it is checked and run: a name (no ``/``) is looked up on
    PATH; a path is taken from the team file's folder (``./bin/claude``) or the home folder (``~/…``) and
    made absolute, so the program ``check`` and ``up`` look at is the one tmux starts in the seat's folder."""
    if "/" not in program:
        return program
    path = os.path.expanduser(program)
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))
