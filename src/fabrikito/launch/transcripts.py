"""What each agent keeps of a conversation, read before ``up`` resumes it (and, for Codex CLI, to learn its id).

Each agent resumes an id from its own files; these checks are fabrikito's, so that a
seat never comes back on a conversation held in another folder or by another seat.
What was measured (offline, the qualified releases; docs/decisions/0035-resume-codex-gemini.md):

* **Claude Code** 2.1.316 keeps ``<config>/projects/<folder>/<id>.jsonl``, whose first
  lines give the folder (``cwd``) and the session name (``agentName``); it resumes an id
  from any folder, so the folder is checked here.
* **Codex CLI** 0.171.0 keeps ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``,
  written when the first turn is sent (not before: a seat killed before it has no
  conversation); its first line is ``session_meta`` with the id, ``cwd`` and the start time.
  Nothing fixes the id in advance, so it is read from there.
* **Gemini CLI** 0.61.0 keeps ``$HOME/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``
  (``--session-id`` writes it at start, before any turn), the project's folder in
  ``<project>/.project_root``; a turn is a line of ``"type": "user"``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from fabrikito.team.teamfile import Seat

HEAD = 1 << 18  # the first lines of a transcript name its folder (and session); a Codex session_meta is ~20 KiB
CODEX_SLACK = 5.0  # seconds: a rollout's start time against the record's (clocks read by two processes)


def _environ(seat: Seat, names: Iterable[str]) -> dict[str, str]:
    wanted = set(names)
    found = {k: v for k, v in os.environ.items() if k in wanted}
    found.update({k: v for k, v in seat.env.items() if k in wanted})
    return found


def refusal(seat: Seat, conversation: str) -> str:
    """Why the agent's own records do not let ``seat`` resume ``conversation`` (``""``: they do)."""
    if seat.agent == "claude":
        return claude_refusal(seat, conversation)
    if seat.agent == "codex":
        return codex_refusal(seat, conversation)
    if seat.agent == "gemini":
        return gemini_refusal(seat, conversation)
    return f"no way to resume a conversation of agent {seat.agent!r}"


def _lines(path: Path, limit: int = HEAD) -> list[dict[str, object]]:
    """The JSON objects among the first ``limit`` bytes' lines of ``path`` (``[]`` when unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(limit)
    except OSError:
        return []
    found = []
    for line in head.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


# -- Claude Code ---------------------------------------------------------------------------


def claude_refusal(seat: Seat, conversation: str) -> str:
    from fabrikito.base import procs

    config = procs.claude_config_dir(_environ(seat, ("HOME", "CLAUDE_CONFIG_DIR")))
    if config is None:
        return "no HOME to find Claude Code's conversations in"
    found = sorted(Path(config, "projects").glob(f"*/{conversation}.jsonl"))
    if not found:
        return f"Claude Code holds no conversation {conversation} in {config}/projects (gone, or never begun)"
    folder = name = None
    for entry in _lines(found[0]):
        if name is None and entry.get("type") == "agent-name" and isinstance(entry.get("agentName"), str):
            name = entry["agentName"]
        if folder is None and isinstance(entry.get("cwd"), str):
            folder = entry["cwd"]
    if folder is None:  # measured: killed before its first turn was written, only the title lines are there
        return f"conversation {conversation} holds no turn yet (the seat stopped before its first one was kept)"
    if folder != str(seat.cwd):
        return f"conversation {conversation} was held in {folder}, not {seat.cwd}: refused"
    if name is not None and name != seat.session:
        return f"conversation {conversation} belongs to session {name!r}, not {seat.session!r}: refused"
    return ""


# -- Codex CLI -----------------------------------------------------------------------------


def codex_home(seat: Seat) -> Path | None:
    env = _environ(seat, ("HOME", "CODEX_HOME"))
    if env.get("CODEX_HOME"):
        return Path(os.path.expanduser(env["CODEX_HOME"]))
    return Path(env["HOME"], ".codex") if env.get("HOME") else None


def codex_meta(path: Path) -> tuple[str, str, float] | None:
    """(id, folder, start time) from a rollout's first line, its ``session_meta``; ``None`` when it is not one."""
    from datetime import datetime

    lines = _lines(path, HEAD)
    if not lines or lines[0].get("type") != "session_meta" or not isinstance(lines[0].get("payload"), dict):
        return None
    meta: Mapping[str, object] = lines[0]["payload"]  # type: ignore[assignment]
    ident, folder, stamp = meta.get("id"), meta.get("cwd"), meta.get("timestamp")
    if not (isinstance(ident, str) and isinstance(folder, str) and isinstance(stamp, str)):
        return None
    try:
        at = datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None
    return ident, folder, at


def codex_rollouts(home: Path, since: float) -> list[Path]:
    """Rollout files changed since ``since`` (seconds), oldest first."""
    found = []
    for path in home.glob("sessions/*/*/*/rollout-*.jsonl"):
        try:
            changed = path.stat().st_mtime
        except OSError:
            continue
        if changed >= since - CODEX_SLACK:
            found.append((changed, path))
    return [p for _, p in sorted(found)]


def codex_conversation(seat: Seat, since: float, taken: Iterable[str] = ()) -> tuple[str, str]:
    """The id of the conversation Codex CLI began for ``seat`` at or after ``since``, read from its rollouts:
    held in the seat's folder, not one of ``taken`` (other seats'). ``("", why)`` when there is none, or
    more than one to choose from."""
    home = codex_home(seat)
    if home is None:
        return "", "no HOME to find Codex CLI's sessions in"
    others = set(taken)
    ids = []
    for path in codex_rollouts(home, since):
        meta = codex_meta(path)
        if meta is not None and meta[1] == str(seat.cwd) and meta[2] >= since - CODEX_SLACK and meta[0] not in others:
            ids.append(meta[0])
    ids = list(dict.fromkeys(ids))
    if not ids:
        return "", f"Codex CLI holds no conversation begun in {seat.cwd} since the seat started (in {home}/sessions)"
    if len(ids) > 1:
        return (
            "",
            f"Codex CLI holds {len(ids)} conversations begun in {seat.cwd} since the seat started: not one to resume",
        )
    return ids[0], ""


def codex_refusal(seat: Seat, conversation: str) -> str:
    home = codex_home(seat)
    if home is None:
        return "no HOME to find Codex CLI's sessions in"
    found = sorted(home.glob(f"sessions/*/*/*/rollout-*-{conversation}.jsonl"))
    meta = codex_meta(found[0]) if found else None
    if meta is None or meta[0] != conversation:
        return f"Codex CLI holds no conversation {conversation} in {home}/sessions (gone, or never begun)"
    if meta[1] != str(seat.cwd):
        return f"conversation {conversation} was held in {meta[1]}, not {seat.cwd}: refused"
    return ""


# -- Gemini CLI ----------------------------------------------------------------------------


def gemini_refusal(seat: Seat, conversation: str) -> str:
    env = _environ(seat, ("HOME", "GEMINI_CLI_HOME"))
    if env.get("GEMINI_CLI_HOME"):
        return "its Gemini CLI keeps its conversations under GEMINI_CLI_HOME, where fabrikito does not look"
    if not env.get("HOME"):
        return "no HOME to find Gemini CLI's conversations in"
    tmp = Path(env["HOME"], ".gemini", "tmp")
    for path in sorted(tmp.glob(f"*/chats/session-*-{conversation[:8]}.jsonl")):
        lines = _lines(path)
        if not lines or lines[0].get("sessionId") != conversation:
            continue
        try:
            folder = (path.parent.parent / ".project_root").read_text(encoding="utf-8").strip()
        except OSError:
            folder = ""
        if folder != str(seat.cwd):
            return f"conversation {conversation} was held in {folder or 'an unknown folder'}, not {seat.cwd}: refused"
        if not any(entry.get("type") == "user" for entry in _lines(path, 1 << 22)):
            continue  # measured: a resumed session also leaves a file of its header alone
        return ""
    return f"Gemini CLI holds no conversation {conversation} with a turn in {tmp} (gone, or never begun)"
