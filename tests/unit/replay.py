"""A tmux server whose one pane replays recorded Claude Code screens.

The delivery engine talks to tmux only through :class:`fabrikito.base.tmux.Server`
``run`` and ``start``; :class:`ReplayServer` answers those commands (a started one
at once, when it is started) from
``tests/fixtures/screens/2.1.316`` instead of a real tmux: ``list-panes`` shows
one seat, a look (``display-message`` ; ``capture-pane``) shows the current
screen with its recorded metadata, and each paste or key moves the pane to the
next screen of its script while being recorded.  So the engine's decisions
(which check refuses, whether Enter is sent, what is logged) are tested on
real screens; the live tier stays the proof against Claude Code itself.

The pane's process is a real one whose ``argv[0]`` is ``claude``, with a session
registry entry naming its release (started by :func:`claude_process`), so the
engine's foreground check reads /proc and the registry as usual.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Pending, Server
from fabrikito.delivery.seatpane import SEP, SNAP_FIELDS

RELEASE = "2.1.316"
SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / RELEASE


@dataclass(frozen=True, slots=True)
class Screen:
    name: str
    ansi: str
    meta: Mapping[str, str]


def screen(name: str) -> Screen:
    """A recorded screen by its file name without extension (``fullscreen-120x40-label-alone``)."""
    meta = json.loads((SCREENS / f"{name}.json").read_text(encoding="utf-8"))
    return Screen(name, (SCREENS / f"{name}.ansi").read_text(encoding="utf-8"), meta)


@dataclass(slots=True)
class Pane:
    """What the pane shows now and what was sent to it.

    ``script`` maps an event (``paste``, ``Enter``) to the screens shown after
    each occurrence in turn; an event with no screen left keeps the current
    one.  ``on_call(n, argv)`` runs before the n-th tmux command (from 1).
    """

    now: Screen
    script: dict[str, list[Screen]] = field(default_factory=dict)
    session: str = "t-dev"
    pid: int = 0
    pastes: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    calls: list[list[str]] = field(default_factory=list)
    on_call: Callable[[int, list[str]], None] | None = None
    started: list[Answered] = field(default_factory=list)  # the calls begun by ``start``, to see each is read

    def after(self, event: str) -> None:
        queue = self.script.get(event)
        if queue:
            self.now = queue.pop(0)


class ReplayServer(Server):
    """A :class:`Server` answering from a :class:`Pane` (its socket path must exist)."""

    pane: Pane

    def __init__(self, *, socket_path: str, pane: Pane | None = None) -> None:
        super().__init__(socket_path=socket_path)
        object.__setattr__(self, "pane", pane or Pane(screen("fullscreen-120x40-empty-box-fresh-start")))

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        argv = list(args)
        pane = self.pane
        pane.calls.append(argv)
        if pane.on_call is not None:
            pane.on_call(len(pane.calls), argv)
        command = argv[0]
        if command == "list-panes":
            fields = argv[argv.index("-F") + 1].split(SEP)
            values = {
                "#{pane_id}": "%1",
                "#{pane_pid}": str(pane.pid),
                "#{session_name}": pane.session,
                "#{pane_dead}": "0",
                "#{pid}": "1",
                "#{window_id}": "@1",
            }
            return SEP.join(values[f] for f in fields) + "\n"
        if command == "display-message":
            meta = dict(pane.now.meta)
            values = {
                "pane_id": "%1",
                "pane_dead": "0",
                "pane_in_mode": meta.get("pane_in_mode", "0"),
                "alternate_on": meta.get("alternate_on", "0"),
                "pane_width": meta["pane_width"],
                "pane_height": meta["pane_height"],
                "cursor_x": meta.get("cursor_x", "0"),
                "cursor_y": meta.get("cursor_y", "0"),
                "window_width": meta["pane_width"],
                "window_height": meta["pane_height"],
                "pane_pid": str(pane.pid),
            }
            return SEP.join(values[f] for f in SNAP_FIELDS) + "\n" + pane.now.ansi
        if command == "load-buffer":
            pane.pastes.append((input or b"").decode("utf-8"))
            pane.after("paste")
            return ""
        if command == "send-keys":
            keys = argv[argv.index("--") + 1 :]
            pane.keys.extend(keys)
            for key in keys:
                pane.after(key)
            return ""
        if command in ("resize-window", "set-option", "delete-buffer"):
            return ""
        if command == "show-options":
            return ""
        raise TmuxError(argv, returncode=1, stderr=f"the replay pane does not know {command}")

    def start(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None) -> Pending:
        """The command answered now (the pane's screen as it is when the call starts); read by ``result``."""
        try:
            answered = Answered(list(args), self.run(*args, input=input, env=env))
        except TmuxError as exc:
            answered = Answered(list(args), exc)
        self.pane.started.append(answered)
        return answered


class Answered(Pending):
    """A :class:`Pending` whose answer is known: its output, or the error tmux would have raised."""

    __slots__ = ("answer", "read")

    def __init__(self, argv: list[str], answer: str | TmuxError) -> None:
        super().__init__(argv, TmuxError(argv, returncode=None, stderr="", reason="not run"), 0.0)
        self.answer = answer
        self.read = False

    def result(self, timeout: float | None = None) -> str:
        self.read = True
        if isinstance(self.answer, TmuxError):
            raise self.answer
        return self.answer


@contextmanager
def claude_process() -> Iterator[int]:
    """A process named ``claude`` (what the engine's foreground check looks for); killed afterwards."""
    config = Path(tempfile.mkdtemp(prefix="fabrikito-replay-"))
    proc = subprocess.Popen(
        ["bash", "-c", "exec -a claude sleep 600"],
        start_new_session=True,
        env={**os.environ, "CLAUDE_CONFIG_DIR": str(config)},
    )
    # Its session registry entry, as Claude Code writes one: the engine reads the release from it.
    (config / "sessions").mkdir()
    (config / "sessions" / f"{proc.pid}.json").write_text(json.dumps({"pid": proc.pid, "version": RELEASE}))
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] != b"claude":  # until bash exec'd
            assert time.monotonic() < deadline, "the stand-in claude process did not start"
            time.sleep(0.01)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(config, ignore_errors=True)


def replay_server(tmp_path: Path, pane: Pane) -> ReplayServer:
    socket = tmp_path / "replay.sock"
    socket.touch()
    return ReplayServer(socket_path=str(socket), pane=pane)


def names(*screens: str) -> list[Screen]:
    return [screen(n) for n in screens]


def delivering_pane(pid: int, on_call: Callable[[int, list[str]], None] | None = None) -> Pane:
    """A fullscreen 120x40 pane with an empty box whose pastes draw the label, then the message, and
    whose Enter starts the turn: a ``say`` of "please review the patch" from em delivered."""
    full = "fullscreen-120x40"
    return Pane(
        screen(f"{full}-empty-box-fresh-start"),
        {"paste": names(f"{full}-label-alone", f"{full}-label-then-short"), "Enter": names(f"{full}-after-turn")},
        pid=pid,
        on_call=on_call,
    )


def sent(pane: Pane) -> Sequence[str]:
    """Every paste and key in the order the engine sent them."""
    order = []
    for argv in pane.calls:
        if argv[0] == "load-buffer":
            order.append("paste")
        elif argv[0] == "send-keys":
            order.extend(argv[argv.index("--") + 1 :])
    return order
