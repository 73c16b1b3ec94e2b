"""``fabrikito init [DIR] [--roles em,api,web]``: a starting team of one's own.

It writes, in ``DIR`` (the current directory by default; made when missing):

* ``team.toml``: a commented team file, one ``[[seat]]`` per role, the team
  named after the directory, on its own tmux server;
* ``roles/common.md``: the shared prompt, the same text as the example team's;
* ``.state/`` appended to ``DIR/.gitignore`` when that file exists and does not
  ignore it yet (the team's state and message log are not source).

It refuses, before writing anything, when ``team.toml`` or
``roles/common.md`` is already there: nothing is overwritten.  Each file is
created with ``O_EXCL``, so one appearing meanwhile is not overwritten
either, and a file written by this run is removed again when a later one
fails: nothing is left half-written.

The example team (``example/team.toml`` and ``example/roles/common.md``
beside this module) ships as package data; the checkout's ``examples/`` is a
link to it, and ``demo`` reads it from here too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabrikito.base.errors import FabrikitoError, UsageError
from fabrikito.base.values import frozen
from fabrikito.team.reserved import reserved_role
from fabrikito.team.teamfile import DEFAULT_SHARED_PROMPT, DEFAULT_TEAM_FILE, ROLE_RE, SESSION_RE

DEFAULT_ROLES = ("em", "api", "web")
STATE_IGNORE = ".state/"
_NAME_JUNK = re.compile(r"[^A-Za-z0-9_-]+")


class InitRefused(FabrikitoError):
    """``init`` would overwrite a file; nothing was written."""

    exit_code = 1


def example_dir() -> Path:
    """The example team shipped with fabrikito: ``team.toml`` and ``roles/common.md``."""
    return Path(__file__).resolve().parent / "example"


def example_team() -> dict[str, Any]:
    """The example team file, parsed (TOML)."""
    import tomllib

    return tomllib.loads((example_dir() / DEFAULT_TEAM_FILE).read_text(encoding="utf-8"))


def shared_prompt_text() -> str:
    return (example_dir() / DEFAULT_SHARED_PROMPT).read_text(encoding="utf-8")


def parse_roles(value: str) -> tuple[str, ...]:
    """``em,api,web`` -> the role ids; a usage error naming every bad one."""
    roles = tuple(r.strip() for r in value.split(","))
    problems: list[str] = []
    if not any(roles):
        problems.append("no roles given")
    seen: set[str] = set()
    for role in roles:
        if not role:
            if any(roles):
                problems.append("an empty role between commas")
        elif not ROLE_RE.match(role):
            problems.append(f"{role!r} is not a role id (lower-case letters, digits and _)")
        elif (reserved := reserved_role(role)) is not None:
            reads = "" if reserved == role else f" reads as {reserved!r}, which"
            problems.append(f"{role!r}{reads} is fabrikito's own sender label, not a role")
        elif role in seen:
            problems.append(f"{role!r} is given twice")
        seen.add(role)
    if problems:
        raise UsageError("--roles: " + "; ".join(dict.fromkeys(problems)) + ". Example: --roles em,api,web")
    return roles


def team_name_for(directory: Path) -> str:
    """A team name (and tmux server name) from the directory's name: ``My App`` -> ``My-App``."""
    name = _NAME_JUNK.sub("-", directory.name).strip("-_")[:40].rstrip("-_")
    return name or "team"


def _toml_str(value: str) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _toml_multiline(value: str) -> str:
    if '"""' in value or "\\" in value:
        return _toml_str(value)
    return '"""' + value + '"""'


def team_text(name: str, roles: Sequence[str]) -> str:
    """The commented ``team.toml`` ``init`` writes."""
    example = example_team()
    em_kickoff = next((s.get("kickoff") for s in example.get("seat", []) if s.get("role") == "em"), None)
    lines = [
        '# A team of Claude Code sessions ("seats"), one per [[seat]] below, each in',
        "# its own tmux session.  Written by `fabrikito init`: edit it, then",
        "#   fabrikito check    # what each seat may do, and anything missing",
        "#   fabrikito up       # start the seats and give each its kickoff",
        "",
        f"name = {_toml_str(name)}{' ' * max(1, 20 - len(name))}# the team's state and log: .state/{name}/",
        f"tmux_socket = {_toml_str(name)}{' ' * max(1, 13 - len(name))}# its own tmux server: tmux -L {name} attach",
        'agent = "claude"             # the command Claude Code seats run (a string, or a list with options)',
        f"shared_prompt = {_toml_str(DEFAULT_SHARED_PROMPT)}   # added to every seat's system prompt, with the roster",
        "# Typed into each seat once it is up, labelled [from launcher]; a seat's own",
        "# kickoff replaces it.  Say what to read and what to do first.",
        f"kickoff = {_toml_multiline(str(example.get('kickoff', 'Read roles/common.md and start.')))}",
        "",
        "# One block per seat.",
        "#   role             the id messages use: `fabrikito say <role> ...` (a-z, 0-9, _)",
        "#   session          the name other seats address with SendMessage",
        "#   cwd              its working directory, relative to this file",
        "#   permission_mode  acceptEdits, default, plan, ... (bypassPermissions makes",
        "#                    messages from other seats wait for approval: see `fabrikito check`)",
        "#   args, env        more options for the agent; variables for it",
        '#   agent            "claude" (the default), "codex" or "gemini": the agent the seat runs',
        "#   command          its program, when not claude/codex/gemini on PATH (a string, or a list)",
    ]
    for role in roles:
        session = f"{name}-{role}"
        if not SESSION_RE.match(session):
            raise UsageError(f"the session name {session!r} would be too long: use a shorter role id than {role!r}")
        lines += [
            "",
            "[[seat]]",
            f"role = {_toml_str(role)}",
            f"session = {_toml_str(session)}",
            'cwd = "."',
            'permission_mode = "acceptEdits"',
        ]
        if role == "em" and isinstance(em_kickoff, str):
            lines.append(f"kickoff = {_toml_multiline(em_kickoff)}")
    return "\n".join(lines) + "\n"


@frozen
class Written:
    directory: Path
    team_file: Path
    shared_prompt: Path
    gitignore: Path | None  # the .gitignore that .state/ was added to


def init(directory: Path, roles: Sequence[str] = DEFAULT_ROLES) -> Written:
    """Write the starting team in ``directory``; raise :class:`InitRefused` rather than overwrite."""
    directory = directory.absolute()
    team_file = directory / DEFAULT_TEAM_FILE
    prompt = directory / DEFAULT_SHARED_PROMPT
    there = [p for p in (team_file, prompt) if os.path.lexists(p)]
    if there:
        raise InitRefused(
            f"{' and '.join(str(p) for p in there)} already "
            f"{'exist' if len(there) > 1 else 'exists'}: init never overwrites. Edit the team that is there "
            "(then `fabrikito check`), or give init another directory."
        )
    text = team_text(team_name_for(directory), roles)
    shared = shared_prompt_text()
    try:
        prompt.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FabrikitoError(f"cannot make {prompt.parent} ({exc.strerror}): nothing was written") from None
    made: list[Path] = []
    try:
        for path, content in ((prompt, shared), (team_file, text)):
            _create(path, content)
            made.append(path)
    except BaseException:
        for path in made:
            try:
                path.unlink()
            except OSError:
                pass
        raise
    return Written(directory, team_file, prompt, _ignore_state(directory / ".gitignore"))


def _create(path: Path, content: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise InitRefused(f"{path} appeared while init ran: init never overwrites; nothing was kept") from None
    except OSError as exc:
        raise FabrikitoError(f"cannot create {path} ({exc.strerror}): nothing was kept") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(content)


def _ignore_state(gitignore: Path) -> Path | None:
    """Append ``.state/`` to an existing ``.gitignore`` that does not ignore it yet."""
    try:
        current = gitignore.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return None
    except OSError:
        return None
    patterns = {line.strip() for line in current.splitlines()}
    if patterns & {".state", ".state/", "/.state", "/.state/"}:
        return None
    sep = "" if not current or current.endswith("\n") else "\n"
    with gitignore.open("a", encoding="utf-8") as f:
        f.write(f"{sep}# fabrikito's team state and message log\n{STATE_IGNORE}\n")
    return gitignore


def next_steps(written: Written, *, cwd: Path, command: str) -> list[str]:
    """What ``init`` prints after writing: what to edit, then check and up."""
    here = written.directory == cwd.absolute()
    team_flag = "" if here else f" --team {written.team_file}"
    lines = [f"wrote {written.team_file}", f"wrote {written.shared_prompt}"]
    if written.gitignore is not None:
        lines.append(f"added {STATE_IGNORE} to {written.gitignore}")
    lines += [
        "",
        "Next:",
        f"  1. edit {written.team_file}: the seats (role, session, cwd, permission_mode) and the kickoff;",
        f"     and {written.shared_prompt}: how your team works (every seat reads it).",
        f"  2. {command} check{team_flag}     what each seat may do, and anything missing",
        f"  3. {command} up{team_flag}        start the seats (needs the `claude` command and tmux)",
    ]
    return lines
