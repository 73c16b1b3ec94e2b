"""The live bench: the real Claude Code binary, offline, in tmux.

Used by the live tests and by the offline demo.  It

* installs Claude Code (a pinned version) into ``<repo>/.tools/claude-code``
  with npm, never globally, and finds the binary (:func:`ensure_claude`);
* makes an isolated HOME whose ``.claude.json`` pre-answers onboarding, the
  API key question and the trust dialog (:func:`make_home`);
* builds a seat's environment (:func:`seat_env`) and starts a seat in a tmux
  session, waiting for its empty input box and its messaging registry entry
  (:func:`start_seat`).

Seats are told apart at the stand-in (:mod:`fabrikito.offline.standin`) by their base
URL: ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/seat/<role>``; Claude Code
keeps the path prefix.  Seats of one team share one HOME, because that is
where Claude Code's session registry (``$HOME/.claude/sessions``) lives, and
SendMessage finds peers only there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fabrikito.base import jsonfile, procs
from fabrikito.base.errors import FabrikitoError, TmuxError
from fabrikito.base.tmux import Server
from fabrikito.base.values import frozen, replace
from fabrikito.offline.claude_setup import (
    API_KEY,
    CLAUDE_VERSION,
    BenchError,
    Renderer,
    ensure_claude,
    seat_command,
    seat_env,
    trust_dir,
    write_json,
)
from fabrikito.offline.standin import StandIn

PROMPT = "\u276f\u00a0"  # the live box's prompt: ❯ + NO-BREAK SPACE
RULE = "\u2500"  # ─
SOCKET_DIR = Path("/tmp/cc-socks")  # where Claude Code 2.1.316 puts messaging sockets  # noqa: S108

T = TypeVar("T")


# -- waiting ------------------------------------------------------------------


def wait_until(
    check: Callable[[], T | None],
    timeout: float,
    *,
    interval: float = 0.1,
    describe: Callable[[], str] | None = None,
    what: str = "condition",
) -> T:
    """Call ``check`` until it returns something other than ``None``/``False``; monotonic clock."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() >= deadline:
            detail = describe() if describe is not None else ""
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}" + (f"\n{detail}" if detail else ""))
        time.sleep(interval)


# -- seats -------------------------------------------------------------------------


@frozen
class LiveSeat:
    """A running Claude Code seat in a tmux pane."""

    role: str
    session: str
    pane: str
    pid: int
    registry: Path
    socket_path: str
    home: Path
    cwd: Path
    permission_mode: str
    renderer: Renderer
    width: int
    height: int
    settings_file: Path
    started_in: float  # seconds from new-session to the ready box and registry

    def key_file(self) -> Path:
        digest = hashlib.sha256(self.socket_path.encode()).hexdigest()
        return self.registry.parent / f"{self.pid}.{digest}.key"

    def peer_token(self) -> str:
        data = json.loads(self.key_file().read_text(encoding="utf-8"))
        return str(data["peerToken"])

    def registry_entry(self) -> dict[str, Any]:
        data = json.loads(self.registry.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}


def box_row(screen: str, session: str | None = None) -> int | None:
    """The row of a one-row live input box under a top rule naming ``session``, or ``None``.

    Interim check (a proper screen recogniser comes later): a line starting
    with ``❯`` + NO-BREAK SPACE, right under a rule ending with
    `` <session> ─`` (any rule when ``session`` is ``None``) and right above
    a rule.  The last such row wins.
    """
    lines = screen.split("\n")
    found = None
    for i in range(1, len(lines) - 1):
        if not lines[i].startswith(PROMPT) or not lines[i + 1].startswith(RULE):
            continue
        above = lines[i - 1].rstrip(" ")
        if not above.startswith((RULE, " ")) or not above.endswith(RULE):
            continue
        if session is None or above.endswith(f" {session} {RULE}"):
            found = i
    return found


_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_OTHER_ESCAPE = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|[()][A-Za-z0-9])")


def styled_chars(line: str) -> list[tuple[str, bool, bool]]:
    """The characters of a ``capture-pane -e`` line with their (dim, inverse) attributes."""
    out: list[tuple[str, bool, bool]] = []
    dim = inverse = False
    pos = 0
    while pos < len(line):
        m = _SGR.match(line, pos)
        if m:
            codes = m.group(1).split(";") if m.group(1) else ["0"]
            k = 0
            while k < len(codes):
                code = codes[k]
                if code in ("38", "48", "58"):  # extended colour: 5;N or 2;R;G;B
                    k += 3 if codes[k + 1 : k + 2] == ["5"] else 5
                    continue
                if code in ("0", ""):
                    dim = inverse = False
                elif code == "2":
                    dim = True
                elif code == "22":
                    dim = False
                elif code == "7":
                    inverse = True
                elif code == "27":
                    inverse = False
                k += 1
            pos = m.end()
            continue
        other = _OTHER_ESCAPE.match(line, pos)
        if other:
            pos = other.end()
            continue
        out.append((line[pos], dim, inverse))
        pos += 1
    return out


def hint_only(ansi_line: str) -> bool:
    """Whether a box row shows only a dim hint: the prompt, one inverse cell, then dim text."""
    chars = styled_chars(ansi_line)
    text = "".join(c for c, _, _ in chars)
    if not text.startswith(PROMPT):
        return False
    rest = chars[len(PROMPT) :]
    if not rest or not rest[0][2]:
        return False
    return all(dim or ch == " " for ch, dim, _ in rest[1:])


def box_empty(screen: str, ansi: str, session: str | None = None) -> bool:
    """Whether the screen ends in an empty box (or one showing only a dim hint) named ``session``."""
    row = box_row(screen, session)
    if row is None:
        return False
    if not screen.split("\n")[row][len(PROMPT) :].strip(" "):
        return True
    ansi_lines = ansi.split("\n")
    return row < len(ansi_lines) and hint_only(ansi_lines[row])


def box_ready(server: Server, pane: str, session: str | None = None) -> bool:
    """Whether ``pane`` shows an empty input box (a dim hint allowed) named ``session``."""
    return box_empty(server.capture(pane), server.capture(pane, escapes=True), session)


def read_registry(path: Path) -> dict[str, Any] | None:
    """A seat's Claude Code registry entry; ``None`` while it is missing, unreadable or not an object."""
    return jsonfile.read_object(path)


def start_seat(
    server: Server,
    *,
    binary: Path,
    role: str,
    home: Path,
    cwd: Path,
    base_url: str,
    session: str | None = None,
    permission_mode: str = "acceptEdits",
    renderer: Renderer = "inline",
    width: int = 220,
    height: int = 50,
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    api_key: str = API_KEY,
    tmux_session: str | None = None,
    wait: bool = True,
    timeout: float = 60.0,
) -> LiveSeat:
    """Start Claude Code for ``role`` in a new tmux session; wait for its empty box and registry.

    ``session`` is the Claude session name (``-n``, default: the role) and
    the tmux session's name unless ``tmux_session`` says otherwise.  The
    ``--settings`` file holds ``settings`` (default ``{}``).  With
    ``wait=False`` the seat is returned at once (pid known, registry maybe
    not written yet: for seats that start in a dialog).
    """
    if permission_mode == "auto":
        raise BenchError("permission mode 'auto' needs a classifier the stand-in cannot answer; use another mode")
    name = session or role
    cwd.mkdir(parents=True, exist_ok=True)
    trust_dir(home, cwd)
    settings_file = home / ".fabrikito-bench" / f"{name}.settings.json"
    write_json(settings_file, dict(settings or {}))
    variables = seat_env(
        home=home, base_url=base_url, api_key=api_key, permission_mode=permission_mode, renderer=renderer, extra=env
    )
    command = seat_command(
        binary, settings_file=settings_file, permission_mode=permission_mode, session=name, keep=variables, args=args
    )
    started = time.monotonic()
    pane = server.new_session(tmux_session or name, command, cwd=str(cwd), width=width, height=height, env=variables)
    pid = int(server.display(pane, "#{pane_pid}"))
    registry = home / ".claude" / "sessions" / f"{pid}.json"
    seat = LiveSeat(
        role=role,
        session=name,
        pane=pane,
        pid=pid,
        registry=registry,
        socket_path="",
        home=home,
        cwd=cwd,
        permission_mode=permission_mode,
        renderer=renderer,
        width=width,
        height=height,
        settings_file=settings_file,
        started_in=0.0,
    )
    if not wait:
        return seat
    return wait_ready(server, seat, timeout=timeout, started=started)


def describe_pane(server: Server, pane: str) -> str:
    try:
        screen = server.capture(pane)
        dead = server.display(pane, "#{pane_dead} #{pane_current_command}")
    except FabrikitoError as exc:
        return f"(pane {pane} could not be read: {exc})"
    return f"pane {pane} (dead/command: {dead}); last screen:\n{screen.rstrip()}"


def wait_ready(server: Server, seat: LiveSeat, *, timeout: float = 60.0, started: float | None = None) -> LiveSeat:
    """Wait until ``seat`` shows its empty box and has a registry entry with a socket; fill those in."""
    t0 = time.monotonic() if started is None else started

    def ready() -> LiveSeat | None:
        entry = read_registry(seat.registry)
        if entry is None or not entry.get("messagingSocketPath"):
            return None
        if entry.get("nameSource") == "derived":
            return None  # the first write holds a derived name; the -n name follows it
        if not box_ready(server, seat.pane, seat.session):
            return None
        sock = str(entry["messagingSocketPath"])
        if not os.path.exists(sock):
            return None
        return replace(seat, socket_path=sock, started_in=time.monotonic() - t0)

    def describe() -> str:
        entry = read_registry(seat.registry)
        where = f"registry {seat.registry}: " + ("missing" if entry is None else json.dumps(entry)[:400])
        return f"seat {seat.role!r} (session {seat.session!r}, pid {seat.pid}); {where}\n" + describe_pane(
            server, seat.pane
        )

    return wait_until(
        ready,
        timeout,
        interval=0.1,
        describe=describe,
        what=f"seat {seat.role!r} to show its empty input box and register for messaging",
    )


# -- talking to seats -----------------------------------------------------------------


def submit(server: Server, seat: LiveSeat, text: str) -> None:
    """Paste ``text`` into the seat's box (bracketed paste) and press Enter."""
    server.paste(seat.pane, text)
    server.send_keys(seat.pane, "Enter")


def post_inbox(seat: LiveSeat, text: str, *, token: str | None = None, timeout: float = 5.0) -> None:
    """Post ``text`` to the seat's messaging socket, as an outside process would.

    Sends ``{"type":"auth","token":...}`` and ``{"type":"user","message":...}``,
    one JSON object a line.  The socket answers nothing; the post is done when
    the lines are written.
    """
    lines = [
        {"type": "auth", "token": seat.peer_token() if token is None else token},
        {"type": "user", "message": {"role": "user", "content": text}},
    ]
    payload = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(seat.socket_path)
        s.sendall(payload)
        # Half-close and wait (briefly) for the peer to close, so the lines are read before we go.
        s.shutdown(socket.SHUT_WR)
        s.settimeout(1.0)
        try:
            s.recv(1)
        except (TimeoutError, OSError):
            pass


def stop_pids(pids: Iterable[int], *, grace: float = 3.0) -> None:
    """SIGTERM ``pids`` (those still alive), then SIGKILL whatever is left after ``grace`` seconds.

    Afterwards the messaging sockets those (now dead) processes left in
    ``/tmp/cc-socks`` are removed: Claude Code leaves them behind when it is
    killed hard or exits from a startup dialog.
    """
    pids = list(pids)
    alive = [p for p in pids if procs.alive(p)]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(procs.alive(p) for p in alive):
        time.sleep(0.05)
    for pid in alive:
        if procs.alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    remove_stale_sockets(pids)


def remove_stale_sockets(pids: Iterable[int]) -> None:
    """Remove ``/tmp/cc-socks/<pid>.sock`` for each pid that is no longer running."""
    for pid in pids:
        if procs.alive(pid):
            continue
        path = SOCKET_DIR / f"{pid}.sock"
        try:
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()
        except OSError:
            pass  # not there: the usual case


def home_pids(home: Path) -> list[int]:
    """Pids of the registry entries under ``home`` (the Claude processes that used it)."""
    out = []
    for path in (home / ".claude" / "sessions").glob("*.json"):
        entry = read_registry(path)
        if entry is not None and isinstance(entry.get("pid"), int):
            out.append(int(entry["pid"]))
    return out


# -- a group of seats --------------------------------------------------------------


@dataclass
class SeatFactory:
    """Start seats on one tmux server, one HOME and one stand-in."""

    server: Server
    binary: Path
    home: Path
    standin: StandIn
    root: Path
    seats: list[LiveSeat] = field(default_factory=list)

    def start(
        self,
        role: str,
        *,
        session: str | None = None,
        width: int = 120,
        height: int = 40,
        permission_mode: str = "acceptEdits",
        renderer: Renderer = "inline",
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        wait: bool = True,
        timeout: float = 60.0,
    ) -> LiveSeat:
        seat = start_seat(
            self.server,
            binary=self.binary,
            role=role,
            session=session,
            home=self.home,
            cwd=self.root / "work" / role,
            base_url=self.standin.base_url(role),
            permission_mode=permission_mode,
            renderer=renderer,
            width=width,
            height=height,
            settings=settings,
            env=env,
            wait=wait,
            timeout=timeout,
        )
        self.seats.append(seat)
        return seat

    def start_many(self, roles: list[str], **options: Any) -> list[LiveSeat]:
        """Start all seats first, then wait for each (they boot in parallel)."""
        started = [self.start(role, wait=False, **options) for role in roles]
        return [wait_ready(self.server, seat) for seat in started]

    def close(self) -> None:
        pids = [seat.pid for seat in self.seats] + home_pids(self.home)
        try:
            self.server.kill_server()
        except TmuxError:
            pass
        stop_pids(pids)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fabrikito.offline.seatkit install``: install the pinned Claude Code into ``.tools/``."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["install"]:
        print("usage: python -m fabrikito.offline.seatkit install", file=sys.stderr)
        return 2
    try:
        binary = ensure_claude()
    except FabrikitoError as exc:
        print(f"fabrikito bench: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(f"Claude Code {CLAUDE_VERSION}: {binary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
