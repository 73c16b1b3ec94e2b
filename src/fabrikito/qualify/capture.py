"""Driving a real agent into a state and capturing its screen: one renderer and pane size at a time.

A :class:`Job` owns a private tmux server, an isolated HOME and a stand-in
model, and starts seats of one agent binary on them.  The catalogue
(:mod:`fabrikito.qualify.catalogue`) drives each seat into a state and calls
:meth:`Job.save`, which reads the pane (plain, with escapes, and the pane's
tmux fields) into a :class:`Capture`, written to disk when the job has an
``out`` folder.  ``scripts/capture_screens.py`` and ``fabrikito qualify``
both run jobs.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabrikito.base.errors import TmuxError
from fabrikito.base.tmux import Server
from fabrikito.offline import claude_setup, other_setup, seatkit
from fabrikito.offline.claude_setup import Renderer
from fabrikito.offline.other_setup import OtherSeat
from fabrikito.offline.seatkit import LiveSeat
from fabrikito.offline.standin import StandIn
from fabrikito.screen import PaneSnapshot

META_FIELDS = (
    "pane_in_mode",
    "pane_mode",
    "alternate_on",
    "cursor_x",
    "cursor_y",
    "cursor_flag",
    "pane_width",
    "pane_height",
    "history_size",
    "mouse_any_flag",
    "pane_current_command",  # the one text value, last (base.tmux.split_fields)
)
LABEL = "[from em] "
WORDS = "the quick brown fox jumps over the lazy dog while the build runs and the tests keep passing one after another "


def text_of(length: int) -> str:
    """A readable single-line text of exactly ``length`` characters, ending in a marker."""
    body = (WORDS * (length // len(WORDS) + 2))[: max(0, length - 4)]
    return (body + "#END")[:length]


@dataclass(frozen=True, slots=True)
class Capture:
    """One saved screen: ``capture-pane -p``, ``-p -e``, and the pane's tmux fields."""

    name: str  # <renderer>-<cols>x<rows>-<case>
    case: str
    renderer: str
    text: str
    ansi: str
    meta: dict[str, object]

    def snapshot(self) -> PaneSnapshot:
        return snapshot_of(self.ansi, self.meta)

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.name}.txt").write_text(self.text, encoding="utf-8")
        (folder / f"{self.name}.ansi").write_text(self.ansi, encoding="utf-8")
        (folder / f"{self.name}.json").write_text(json.dumps(self.meta, indent=1, sort_keys=True) + "\n", "utf-8")


def snapshot_of(ansi: str, meta: dict[str, object]) -> PaneSnapshot:
    """The :class:`PaneSnapshot` a recogniser reads, from a capture and its tmux fields."""

    def num(key: str) -> int:
        return int(str(meta.get(key, "0")))

    return PaneSnapshot(
        ansi=ansi,
        width=num("pane_width"),
        height=num("pane_height"),
        alternate_on=str(meta.get("alternate_on")) == "1",
        in_mode=str(meta.get("pane_in_mode")) == "1",
        cursor_x=num("cursor_x"),
        cursor_y=num("cursor_y"),
    )


@dataclass
class Job:
    """One renderer and size: its own tmux server, HOME and stand-in."""

    renderer: Renderer
    width: int
    height: int
    root: Path
    binary: Path
    release: str
    out: Path | None = None
    log: Callable[[str], None] = print
    agent: str = "claude"  # or another agent of :mod:`fabrikito.offline.other_setup` (seats by :meth:`other`)
    other_env: dict[str, str] = field(default_factory=dict)  # set for every seat :meth:`other` starts
    captures: list[Capture] = field(default_factory=list)
    server: Server = field(init=False)
    standin: StandIn = field(init=False)
    home: Path = field(init=False)
    pids: list[int] = field(default_factory=list, init=False)
    others: list[OtherSeat] = field(default_factory=list, init=False)
    started: int = field(default=0, init=False)  # seats started, for the benchmark

    def __post_init__(self) -> None:
        self.binary = self.binary.absolute()  # seats start in folders of their own
        shutil.rmtree(self.root, ignore_errors=True)
        self.server = Server(socket_name=f"fab-cap-{secrets.token_hex(4)}", timeout=10.0)
        self.standin = StandIn().start()
        self.home = claude_setup.make_home(self.root / "home")

    @property
    def prefix(self) -> str:
        return f"{self.renderer}-{self.width}x{self.height}"

    # -- seats ---------------------------------------------------------------

    def seat(
        self,
        role: str = "a",
        *,
        mode: str = "acceptEdits",
        env: dict[str, str] | None = None,
        home: Path | None = None,
        settings: dict[str, object] | None = None,
        wait: bool = True,
        width: int | None = None,
        height: int | None = None,
    ) -> LiveSeat:
        seat = seatkit.start_seat(
            self.server,
            binary=self.binary,
            role=role,
            session=f"seat-{role}",
            home=home or self.home,
            cwd=self.root / "w" / f"seat-{role}",
            base_url=self.standin.base_url(role),
            permission_mode=mode,
            renderer=self.renderer,
            width=width or self.width,
            height=height or self.height,
            settings=settings,
            env=env,
            wait=wait,
        )
        self.pids.append(seat.pid)
        self.started += 1
        return seat

    def other(
        self,
        role: str = "a",
        *,
        wait: bool = True,
        width: int | None = None,
        answered: bool = True,
        args: Sequence[str] = (),
    ) -> OtherSeat:
        """A seat of this job's (other) agent, with its own HOME under the job's folder."""
        seat = other_setup.start_seat(
            self.server,
            self.agent,
            self.binary,
            role=role,
            root=self.other_root(role),
            base_url=self.standin.base_url(role),
            session=f"seat-{role}",
            width=width or self.width,
            height=self.height,
            wait=wait,
            answered=answered,
            args=args,
            extra_env=self.other_env,
        )
        self.others.append(seat)
        self.started += 1
        return seat

    def other_root(self, role: str) -> Path:
        """The folder of the next seat :meth:`other` starts (its HOME and its working folder ``work/<role>``)."""
        return self.root / f"{role}-{self.started}"

    def end(self) -> None:
        """Kill every session of this job's server (the seats exit on SIGHUP), then whatever a seat left."""
        try:
            self.server.kill_server()
        except TmuxError:
            pass
        # The next seat starts a server on the same socket: not while this one is still going away.
        seatkit.wait_until(lambda: not self.server.listening(), 10, what="the job's tmux server to exit")
        seatkit.stop_pids(self.pids)
        self.pids.clear()
        other_setup.stop_seats(self.others)
        self.others.clear()

    def close(self) -> None:
        self.end()
        seatkit.stop_pids(seatkit.home_pids(self.home))
        self.standin.stop()

    # -- screens -------------------------------------------------------------

    def wait_screen(self, pane: str, check: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        def screen() -> str | None:
            text = self.server.capture(pane)
            return text if check(text) else None

        return seatkit.wait_until(
            screen, timeout, describe=lambda: self.server.capture(pane), what=f"{what} ({self.prefix})"
        )

    def settle(self, pane: str, quiet: float = 0.6, timeout: float = 6.0) -> None:
        """Wait until the screen stops changing for ``quiet`` seconds (or ``timeout`` passes)."""
        deadline = time.monotonic() + timeout
        last = self.server.capture(pane, escapes=True)
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.server.capture(pane, escapes=True)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return

    def changed(self, pane: str, before: str, what: str, timeout: float = 10.0) -> str:
        return self.wait_screen(pane, lambda s: s != before, what, timeout)

    def paste_and_save(self, pane: str, text: str, case: str, *, note: str, what: str) -> None:
        """Paste ``text``, wait for the screen to change (``what`` names it) and settle, then save it as ``case``."""
        before = self.server.capture(pane)
        self.server.paste(pane, text)
        self.changed(pane, before, what)
        self.settle(pane)
        self.save(pane, case, note=note)

    def label_then(self, pane: str, case: str, message: str, note: str, *, save_label: bool) -> None:
        """Paste the label, wait for it in the box (saved as ``label-alone`` with ``save_label``), then paste
        ``message`` and save the screen as ``case``."""
        self.server.paste(pane, LABEL)
        self.wait_screen(pane, lambda s: "[from em]" in s, "the label in the box")
        self.settle(pane, quiet=0.3)
        if save_label:
            self.save(pane, "label-alone", note="paste '[from em] '")
        self.paste_and_save(pane, message, case, note=note, what=f"the message after the label for {case}")

    def save(self, pane: str, case: str, note: str = "") -> Capture:
        text = self.server.capture(pane)
        ansi = self.server.capture(pane, escapes=True)
        meta: dict[str, object] = dict(self.server.pane_fields(pane, META_FIELDS))
        if self.agent == "claude":
            meta.update(renderer=self.renderer, case=case, claude_code=self.release)
        else:
            meta.update(renderer=self.renderer, case=case, agent=self.agent, release=self.release)
            if self.other_env:
                meta["env"] = " ".join(f"{k}={v}" for k, v in sorted(self.other_env.items()))
        if note:
            meta["note"] = note
        width, height = meta.get("pane_width", self.width), meta.get("pane_height", self.height)
        capture = Capture(f"{self.renderer}-{width}x{height}-{case}", case, self.renderer, text, ansi, meta)
        self.captures.append(capture)
        if self.out is not None:
            capture.write(self.out)
            self.log(f"  wrote {capture.name}")
        return capture
