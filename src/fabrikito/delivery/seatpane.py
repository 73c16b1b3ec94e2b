"""A seat's pane as tmux and the process table see it, and its screen.

The screen alone is not enough: copy mode does not show in a capture, and a
pane whose Claude Code was killed can still show a stale box.  So a look at a
seat asks tmux for the pane's state (dead, in a mode, size, renderer) and the
process table for what runs in the foreground of its terminal, and reads the
screen in the same tmux call as the pane's state.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from fabrikito.base import hostos, procs
from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import FIELD_SEP, PANE_FIELDS, Pending, Server, format_of, split_fields
from fabrikito.base.values import frozen
from fabrikito.screen import PaneSnapshot

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any

LIST_FIELDS = PANE_FIELDS  # the order PaneRow reads
SNAP_FIELDS = (
    "pane_id",
    "pane_dead",
    "pane_in_mode",
    "alternate_on",
    "pane_width",
    "pane_height",
    "cursor_x",
    "cursor_y",
    "window_width",
    "window_height",
    "pane_pid",
)
CLAUDE_NAMES = frozenset({"claude", "claude.exe"})
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
MAX_WALK = 64  # processes looked at under a pane, nearest first
SEP = FIELD_SEP


@frozen
class PaneRow:
    pane_id: str
    pane_pid: int
    session: str
    dead: bool
    server_pid: int
    window_id: str


@frozen
class Agent:
    """The agent running in the foreground of a pane's terminal."""

    pid: int
    name: str
    version: str | None
    registry: Mapping[str, Any] | None  # its session registry entry (status, waitingFor...), when readable
    exe: str | None = (
        None  # the program it runs (:func:`fabrikito.base.hostos.exe_path`), for a local qualification's fingerprint
    )


@frozen
class Look:
    """One look at a pane: its tmux state and its screen, taken in one tmux call."""

    pane_id: str
    dead: bool
    snapshot: PaneSnapshot
    window_width: int
    window_height: int
    pane_pid: int


def list_panes(server: Server, started: Pending | None = None) -> list[PaneRow]:
    """Every pane of the server, in one tmux call (``started``: that call, begun earlier)."""
    rows = []
    for row in server.list_panes(LIST_FIELDS, started=started):
        try:
            rows.append(
                PaneRow(
                    pane_id=row["pane_id"],
                    pane_pid=pane_pid_of(row["pane_pid"], row["pane_dead"]),
                    session=row["session_name"],
                    dead=row["pane_dead"] == "1",
                    server_pid=int(row["pid"]),
                    window_id=row["window_id"],
                )
            )
        except ValueError:
            continue
    return rows


def pane_of_session(rows: list[PaneRow], session: str) -> PaneRow | None:
    """The seat's pane: the first pane of its session (a seat has one)."""
    for row in rows:
        if row.session == session:
            return row
    return None


def look(server: Server, pane_id: str, started: Pending | None = None) -> Look:
    """The pane's state and its screen (with escapes), read in one tmux invocation
    (``started``: that invocation, begun earlier by :func:`start_look`)."""
    out = server.run(*_look_args(pane_id)) if started is None else started.result()
    head, _, screen = out.partition("\n")
    values = split_fields(head, len(SNAP_FIELDS))
    if values is None:
        raise TmuxError(["display-message", "-t", pane_id], returncode=0, stderr=head, reason="unexpected answer")
    found = look_from(dict(zip(SNAP_FIELDS, values, strict=True)), screen)
    if found is None:
        raise TmuxError(["display-message", "-t", pane_id], returncode=0, stderr=head, reason="unexpected answer")
    return found


def start_look(server: Server, pane_id: str) -> Pending:
    """:func:`look`'s tmux call, started now and read later (``say`` reads ``/proc`` meanwhile)."""
    return server.start(*_look_args(pane_id))


def _look_args(pane_id: str) -> list[str]:
    fmt = format_of(SNAP_FIELDS)
    return ["display-message", "-p", "-t", pane_id, fmt, ";", "capture-pane", "-p", "-e", "-t", pane_id]


def look_from(meta: Mapping[str, str], screen: str) -> Look | None:
    """A :class:`Look` from the ``SNAP_FIELDS`` values tmux printed and the screen; ``None`` if malformed."""
    try:
        snap = PaneSnapshot(
            ansi=screen,
            width=int(meta["pane_width"]),
            height=int(meta["pane_height"]),
            alternate_on=meta["alternate_on"] == "1",
            in_mode=meta["pane_in_mode"] == "1",
            cursor_x=int(meta["cursor_x"]),
            cursor_y=int(meta["cursor_y"]),
        )
        return Look(
            pane_id=meta["pane_id"],
            dead=meta["pane_dead"] == "1",
            snapshot=snap,
            window_width=int(meta["window_width"]),
            window_height=int(meta["window_height"]),
            pane_pid=pane_pid_of(meta["pane_pid"], meta["pane_dead"]),
        )
    except (KeyError, ValueError):
        return None


#: A dead pane's process id when tmux does not say it (tmux 3.8 prints none): no process has it.
NO_PID = 0


def pane_pid_of(value: str, dead: str) -> int:
    """``#{pane_pid}`` as a number; :data:`NO_PID` for a dead pane's empty one (tmux 3.8: 3.3a and 3.5a
    print the pid of the process that exited).  ``ValueError`` for anything else."""
    if not value and dead == "1":
        return NO_PID
    return int(value)


def foreground_agent(pane_pid: int) -> Agent | None:
    """The agent process in the foreground of the pane's terminal, or ``None``.

    Users start agents through wrappers (``sh -c 'claude …; exec bash'``,
    ``npx``, a script without ``exec``, a copy of the binary under another
    name, an npm shim that spawns the real program), so the agent is looked
    for among the pane's process and its descendants that belong to the
    terminal's *foreground process group*: the first one (nearest the pane)
    that is an agent of a known kind (:mod:`fabrikito.team.agents`): Claude
    Code by its program's name or its session registry entry, any kind by the
    npm package its program or ``node`` script belongs to, or by its
    program's name.  A process outside the foreground group (a job in the
    background, a shell's children while the shell sits at its own prompt)
    never counts, so a shell at its prompt is not an agent, whatever its
    screen shows.
    """
    try:
        pane_info = procs.info(pane_pid)
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return None
    foreground = procs.foreground_group(pane_info)
    if foreground <= 0:
        foreground = pane_info.pgrp
    for pid in _descendants(pane_pid):
        try:
            group = pane_info.pgrp if pid == pane_pid else procs.info(pid).pgrp
        except (procs.ProcessGone, procs.ProcessUnreadable):
            continue
        found = agent_at(pid) if group == foreground else None
        if found is not None:
            return found
    return None


def _descendants(root: int) -> Iterator[int]:
    """``root`` and its descendants, nearest first (at most :data:`MAX_WALK`), read only as far as needed."""
    queue, seen = [root], 0
    while queue and seen < MAX_WALK:
        pid = queue.pop(0)
        seen += 1
        yield pid
        try:
            queue.extend(sorted(procs.children_of(pid)))
        except (procs.ProcessGone, procs.ProcessUnreadable):
            continue


def agent_at(pid: int) -> Agent | None:
    """An :class:`Agent` when ``pid`` runs an agent of a known kind, else ``None``."""
    from fabrikito.team.agents import CLAUDE

    try:
        exe = procs.exe_path(pid)
        name = os.path.basename(exe) if exe is not None else procs.info(pid).name  # procs.exe_name, read once
        argv = procs.cmdline(pid)
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return None
    argv0 = os.path.basename(argv[0]) if argv else ""
    entry = registry_entry(pid)
    if name in CLAUDE.program_names or argv0 in CLAUDE.program_names or entry is not None:
        version = entry.get("version") if entry is not None else None
        if not isinstance(version, str):
            version = package_version(exe)
        return Agent(pid=pid, name=CLAUDE.name, version=version, registry=entry, exe=exe)
    return _other_agent_at(pid, name, argv, exe)


def _other_agent_at(pid: int, name: str, argv: Sequence[str], exe: str | None) -> Agent | None:
    """A Codex or Gemini CLI process: its program, or the ``node`` script it runs, is in one of their
    npm packages (the release is that package's); or its program has one of their names (release unknown)."""
    from fabrikito.team.agents import KINDS, agent_in_package

    paths = [exe] if exe else []
    if name.startswith("node") or name.startswith("bun"):
        paths += [a for a in argv[1:4] if a.startswith("/") or a.startswith(".")]
    for path in paths:
        resolved = _resolved(path, pid)
        found = agent_in_package(Path(resolved)) if resolved is not None else None
        if found is not None and found[0] != "claude":
            # The program that was qualified: the binary, or for a script run by node the script itself.
            program = exe if path == exe else resolved
            return Agent(pid=pid, name=found[0], version=found[1], registry=None, exe=program)
    for other in KINDS.values():
        if other.name != "claude" and name in other.program_names:
            return Agent(pid=pid, name=other.name, version=None, registry=None, exe=exe)
    return None


def _resolved(path: str, pid: int) -> str | None:
    """``path`` as process ``pid`` sees it (relative to its working directory), links resolved."""
    if not os.path.isabs(path):
        where = hostos.cwd(pid)
        if where is None:
            return None
        path = os.path.join(where, path)
    try:
        return os.path.realpath(path)
    except OSError:
        return None


def package_version(exe: str | None) -> str | None:
    """The version in the ``package.json`` of the npm package a Claude Code binary came from, if any."""
    if not exe:
        return None
    manifest = Path(exe).parent.parent / "package.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("name") != CLAUDE_PACKAGE:
        return None
    version = data.get("version")
    return version if isinstance(version, str) else None


def registry_entry(pid: int) -> dict[str, Any] | None:
    """The session registry entry Claude Code process ``pid`` wrote, as that process's environment places it."""
    try:
        config = procs.config_dir_of(pid)
    except (procs.ProcessGone, procs.ProcessUnreadable):
        return None
    if config is None:
        return None
    try:
        with open(os.path.join(config, "sessions", f"{pid}.json"), "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def look_panes(server: Server, pane_ids: Sequence[str]) -> dict[str, Look]:
    """The state and screen of every pane in ``pane_ids``, in **one** tmux call.

    Each pane gets a ``display-message`` line (a random marker, then the
    fields :func:`look` reads) followed by its
    ``capture-pane -p -e``.  A pane that vanished makes tmux fail the chain;
    then each pane is looked at on its own, and one that cannot be read is
    left out of the answer.  Read-only: nothing is typed.
    """
    return start_looks(server, pane_ids, now=False).looks()


#: tmux refuses a command line past its message size (16 KiB: a look chain of 70 panes failed, 64
#: passed, measured on 3.3a), so the panes are looked at in chains of at most this many bytes each.
CHAIN_BYTES = 14_000


class Looking:
    """:func:`look_panes`'s tmux calls, started by :func:`start_looks`; :meth:`looks` reads their answers."""

    __slots__ = ("chains", "marker", "server")

    def __init__(
        self, server: Server, marker: str, chains: list[tuple[Sequence[str], list[str], Pending | None]]
    ) -> None:
        self.server = server
        self.marker = marker
        self.chains = chains  # (panes, their call, the call started or None: made by looks())

    def looks(self) -> dict[str, Look]:
        found: dict[str, Look] = {}
        for pane_ids, args, pending in self.chains:
            try:
                out = pending.result() if pending is not None else self.server.run(*args)
            except TmuxError:
                for pane in pane_ids:
                    try:
                        found[pane] = look(self.server, pane)
                    except TmuxError:
                        continue
                continue
            found.update(parse_looks(out, self.marker, pane_ids))
        return found


def start_looks(server: Server, pane_ids: Sequence[str], *, now: bool = True) -> Looking:
    """:func:`look_panes`'s tmux call, started now and read by :meth:`Looking.looks` (``status`` reads
    ``/proc`` meanwhile); ``now=False``: made by :meth:`Looking.looks`, through ``server.run``.  One call
    for up to about 55 panes (:data:`CHAIN_BYTES`); more are split into calls started together.  Through
    the command server's tmux control client, a call is written to it whole and read afterwards
    (:meth:`fabrikito.base.tmuxcontrol.Control.send`): no tmux process."""
    marker = f"@fabrikito-look-{os.urandom(8).hex()}"
    fmt = format_of(SNAP_FIELDS)
    chains: list[tuple[Sequence[str], list[str], Pending | None]] = []
    panes: list[str] = []
    args: list[str] = []
    size = 0

    def close() -> None:
        chains.append((list(panes), list(args), server.start(*args) if now else None))
        panes.clear()
        args.clear()

    for pane in pane_ids:
        one = ["display-message", "-p", "-t", pane, marker + SEP + fmt, ";", "capture-pane", "-p", "-e", "-t", pane]
        cost = sum(len(a) + 1 for a in one) + 2
        if args and size + cost > CHAIN_BYTES:
            close()
            size = 0
        if args:
            args.append(";")
        args += one
        panes.append(pane)
        size += cost
    if args:
        close()
    return Looking(server, marker, chains)


def parse_looks(out: str, marker: str, pane_ids: Sequence[str]) -> dict[str, Look]:
    """Split the output of :func:`look_panes` into one :class:`Look` per pane."""
    wanted = set(pane_ids)
    found: dict[str, Look] = {}
    head: dict[str, str] | None = None
    screen: list[str] = []

    def flush() -> None:
        if head is None:
            return
        look = look_from(head, "\n".join(screen) + ("\n" if screen else ""))
        if look is not None and look.pane_id in wanted:
            found[look.pane_id] = look

    prefix = marker + SEP
    for line in out.split("\n"):
        if line.startswith(prefix):
            flush()
            values = split_fields(line[len(prefix) :], len(SNAP_FIELDS))
            head = None if values is None else dict(zip(SNAP_FIELDS, values, strict=True))
            screen = []
        elif head is not None:
            screen.append(line)
    if screen and screen[-1] == "":
        screen.pop()
    flush()
    return found


def panes_if_running(server: Server, started: Pending | None = None) -> tuple[list[PaneRow], bool]:
    """The server's panes and whether it runs; no server is not an error, any other failure is.
    ``started``: the pane list's tmux call, begun earlier (``cmd_status`` starts it before importing this)."""
    import os

    try:
        return list_panes(server, started), True
    except TmuxError:
        if not os.path.exists(server.resolved_socket_path()):
            return [], False
        try:
            return list_panes(server), True
        except TmuxError as exc:
            if "no server running" in exc.stderr or "error connecting" in exc.stderr:
                return [], False
            raise
