"""The agent kinds a seat can run: Claude Code, Codex CLI, Gemini CLI.

Data only, read by every layer above: what each kind is called, which
program it runs by default, how its process is told apart in a pane (the
program's name, or the npm package a ``node`` script belongs to) and where its
release is written, which file it reads its standing instructions from,
whether it has the ``SendMessage`` hook, how long ``say`` waits between the
paste and the Enter, what an Enter does while it is busy, and how its
conversation is fixed at start and resumed.

What was measured (``../shared/other-agents/README.md``):

* Codex CLI 0.171: an npm shim (``node …/@openai/codex/bin/codex.js``) that
  spawns a static binary named ``codex`` (``…/@openai/codex-linux-x64/vendor/
  <triple>/bin/codex``, whose ``package.json`` says ``0.171.0-linux-x64``). An
  Enter while it works is sent at once as a correction of the running turn,
  and the reply it was writing is dropped.
* Gemini CLI 0.61: ``node …/@google/gemini-cli/bundle/gemini.js``, which
  relaunches itself once (a second ``node`` with ``--max-old-space-size``).
  An Enter within about 40 ms of a bracketed paste becomes a newline in its
  box; half a second later it submits reliably.  An Enter while it works is
  queued by Gemini itself.  Both agents' busy screens are read as not
  typable (``screen/codex_0_171.py``, ``screen/gemini_0_61.py``), so ``say``
  waits for the turn's end with either.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fabrikito.base.values import frozen

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:  # what this module reads of a team file's seat and team, so that it imports no teamfile
    from typing import Protocol

    class Seat(Protocol):
        @property
        def agent(self) -> str: ...
        @property
        def command(self) -> tuple[str, ...] | None: ...
        @property
        def cwd(self) -> Path: ...

    class Team(Protocol):
        @property
        def agent(self) -> tuple[str, ...]: ...


@frozen
class Conversations:
    """How an agent's conversation is fixed at start and resumed: arguments with ``{id}`` in them, added
    after the seat's own (measured offline; docs/decisions/0035-resume-codex-gemini.md)."""

    fixed: tuple[str, ...]  # start a new conversation with this id; () when the agent picks it (read after)
    resume: tuple[str, ...]  # resume conversation {id}


@frozen
class AgentKind:
    name: str  # as the team file names it: agent = "codex"
    display: str  # for people
    default_command: tuple[str, ...]
    program_names: frozenset[str]  # the program's base name (/proc/<pid>/exe or argv[0])
    package: str  # the npm package its program or script belongs to
    prompt_file: str | None  # the file in its working directory up writes the prompt to (None: a flag)
    sendmessage_hook: bool  # SendMessage and the hook that logs it (Claude Code only)
    enter_delay: float  # seconds between the message's paste and the Enter
    busy_enter: str  # what an Enter does while a turn runs, for people
    deliver_while_busy: bool  # whether say may submit while a turn runs (the agent queues it itself)
    conversations: Conversations | None = None  # None: never resumed by fabrikito


CLAUDE = AgentKind(
    name="claude",
    display="Claude Code",
    default_command=("claude",),
    program_names=frozenset({"claude", "claude.exe"}),
    package="@anthropic-ai/claude-code",
    prompt_file=None,  # --append-system-prompt-file
    sendmessage_hook=True,
    enter_delay=0.0,
    busy_enter="queued by Claude Code and given to the agent when its turn ends",
    deliver_while_busy=True,
    conversations=Conversations(("--session-id", "{id}"), ("--resume", "{id}")),
)
CODEX = AgentKind(
    name="codex",
    display="Codex CLI",
    default_command=("codex",),
    program_names=frozenset({"codex"}),
    package="@openai/codex",
    prompt_file=None,  # -c developer_instructions=…
    sendmessage_hook=False,
    enter_delay=0.1,
    busy_enter="sent at once as a correction of the running turn (the reply being written is dropped)",
    deliver_while_busy=False,
    # No option fixes a new session's id: it is read from $CODEX_HOME/sessions/ once the first turn is sent.
    conversations=Conversations((), ("resume", "{id}")),
)
GEMINI = AgentKind(
    name="gemini",
    display="Gemini CLI",
    default_command=("gemini",),
    program_names=frozenset({"gemini"}),
    package="@google/gemini-cli",
    prompt_file="GEMINI.md",
    sendmessage_hook=False,
    enter_delay=0.5,
    busy_enter="queued by Gemini CLI and given to the agent when its turn ends (its busy screen is not typable)",
    deliver_while_busy=False,
    conversations=Conversations(("--session-id", "{id}"), ("--resume", "{id}")),
)

KINDS: Mapping[str, AgentKind] = {k.name: k for k in (CLAUDE, CODEX, GEMINI)}
BY_PACKAGE: Mapping[str, AgentKind] = {k.package: k for k in KINDS.values()}
DEFAULT_KIND = CLAUDE.name


def kind(name: str) -> AgentKind:
    """The kind called ``name``; an unknown name (never one a valid team file holds) fails closed as Claude
    Code's rules would not: it gets the strictest rules, those of an agent that cannot take a busy Enter."""
    found = KINDS.get(name)
    if found is not None:
        return found
    return AgentKind(
        name=name,
        display=name,
        default_command=(name,),
        program_names=frozenset({name}),
        package="",
        prompt_file=None,
        sendmessage_hook=False,
        enter_delay=0.5,
        busy_enter="unknown",
        deliver_while_busy=False,
    )


def command_for(team: Team, seat: Seat) -> tuple[str, ...]:
    """The program (and its leading arguments) a seat runs: its ``command``, else the team's ``agent``
    command for a Claude Code seat, else the kind's own program name."""
    if seat.command is not None:
        return seat.command
    if seat.agent == CLAUDE.name:
        return team.agent
    return kind(seat.agent).default_command


def agent_in_package(path: Path) -> tuple[str, str | None] | None:
    """(kind, release) of the agent whose npm package ``path`` (resolved) lies in: the first
    ``package.json`` above it decides; ``None`` when that is another package's, or there is none.
    The release is ``None`` when the package names none."""
    import json

    for folder in path.parents:
        try:
            raw = (folder / "package.json").read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        name = data.get("name") if isinstance(data, dict) else None
        version = data.get("version") if isinstance(data, dict) else None
        found = BY_PACKAGE.get(name) if isinstance(name, str) else None
        if found is None:
            return None
        return found.name, release_from_package(version) if isinstance(version, str) and version else None
    return None


def release_from_package(version: str) -> str:
    """``0.171.0`` from a platform package's ``0.171.0-linux-x64`` (the release the shim names)."""
    for os_name in ("-linux-", "-darwin-", "-win32-"):
        head, sep, _ = version.rpartition(os_name)
        if sep:
            return head
    return version


#: The first line of the ``GEMINI.md`` ``up`` writes in a Gemini CLI seat's folder (see launch/otherseat.py).
GEMINI_MARK = (
    "<!-- fabrikito: the team's prompt for seat {role}, written by `fabrikito up`; it is rewritten at each start. -->"
)


def gemini_prompt_path(seat: Seat) -> Path:
    return seat.cwd / "GEMINI.md"


def is_ours(path: Path) -> bool:
    """Whether ``path`` is absent, or a ``GEMINI.md`` fabrikito wrote (by its first line)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(4096).decode("utf-8", "replace")
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return first.startswith(GEMINI_MARK.partition("{role}")[0])
