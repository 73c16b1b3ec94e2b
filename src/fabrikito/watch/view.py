"""``fabrikito watch``: the team, live, in a terminal (curses, from the standard library).

It reads only what the watcher writes (``watcher.json``) and the log's last
lines, once a second or on a key: a viewer adds no tmux call.  The chosen row
(up/down, j/k) is marked with ``>`` as well as reversed, so it reads without
colour; a chosen seat's release, conversation and restarts are on the line over
the keys (a wide terminal has them as columns too).  ``a`` attaches to the
row's seat (``switch-client`` inside the team's own tmux server, else ``tmux
attach`` until you detach), ``f`` runs ``fabrikito flush``, ``r``/``d``
release or drop the row's queued message; each asks ``y/n`` first.  Ctrl-C,
``q``, SIGTERM and SIGHUP end it with the terminal as it was (curses'
``wrapper`` restores it on the way out).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from fabrikito.launch import watcherproc
from fabrikito.team.teamfile import Team
from fabrikito.watch import layout

REFRESH_MS = 1000
LOG_LINES = 40


def current(team: Team, *, width: int, height: int) -> layout.Frame:
    state = layout.read_state(watcherproc.state_path(team))
    if state is not None and not watcherproc.info(team).running:
        state = None
    return layout.frame(team.name, state, layout.log_tail(team.log_path, LOG_LINES), width=width, height=height - 2)


def text_frame(team: Team) -> str:
    found = current(team, width=100, height=42)
    return "\n".join(r.text for r in found.lines)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP (a closed terminal) end the view, or ``events --follow``, as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)


def run(team: Team) -> int:
    import curses

    stop_on_signals()
    try:
        curses.wrapper(lambda scr: _loop(team, scr))
    except KeyboardInterrupt:
        pass
    return 0


def _loop(team: Team, scr: Any) -> None:
    import curses

    curses.curs_set(0)
    scr.timeout(REFRESH_MS)
    chosen = 0
    said = ""
    while True:
        height, width = scr.getmaxyx()
        shown = current(team, width=width, height=height)
        if shown.choices:
            chosen = min(chosen, len(shown.choices) - 1)
        _draw(scr, shown, chosen, said, width, height)
        key = scr.getch()
        if key == -1:
            continue
        said = ""
        if key in (ord("q"), ord("Q")):
            return
        if key in (curses.KEY_DOWN, ord("j")):
            chosen = min(chosen + 1, max(0, len(shown.choices) - 1))
        elif key in (curses.KEY_UP, ord("k")):
            chosen = max(0, chosen - 1)
        elif key in (ord("a"), ord("f"), ord("r"), ord("d")) and shown.choices:
            row = shown.lines[shown.choices[chosen]]
            said = _act(team, scr, chr(key), row, width, height)


def _draw(scr: Any, shown: layout.Frame, chosen: int, said: str, width: int, height: int) -> None:
    import curses

    scr.erase()
    marked = shown.choices[chosen] if shown.choices else -1
    for y, row in enumerate(shown.lines[: height - 2]):
        text = (">" + row.text[1:]) if y == marked else row.text
        try:
            scr.addstr(y, 0, text[: width - 1], curses.A_REVERSE if y == marked else curses.A_NORMAL)
        except curses.error:
            pass
    bottom = said or layout.KEYS_LINE
    about = shown.lines[marked].detail if marked >= 0 else None
    for y, line in ((height - 2, about), (height - 1, bottom if shown.choices or said else None)):
        if line:
            try:
                scr.addstr(y, 0, layout.clip(line, width - 1))
            except curses.error:
                pass
    scr.refresh()


def _ask(scr: Any, question: str, width: int, height: int) -> bool:
    scr.timeout(-1)
    try:
        scr.move(height - 1, 0)
        scr.clrtoeol()
        scr.addstr(height - 1, 0, layout.clip(question + " (y/n)", width - 1))
        scr.refresh()
        return scr.getch() in (ord("y"), ord("Y"))
    finally:
        scr.timeout(REFRESH_MS)


def _act(team: Team, scr: Any, key: str, row: layout.Row, width: int, height: int) -> str:
    seat = team.seat(row.seat) if row.seat else None
    if key in "rd":
        if row.message is None:
            return "no queued message on this row"
        verb = "release" if key == "r" else "drop"
        if not _ask(scr, f"{verb} queued message {row.message}?", width, height):
            return "nothing done"
        return _fabrikito(team, "queue", verb, row.message)
    if seat is None:
        return "no seat on this row"
    if key == "f":
        if not _ask(scr, f"flush {seat.role} (submit what say left in its box)?", width, height):
            return "nothing done"
        return _fabrikito(team, "flush", seat.role)
    if not _ask(scr, f"attach to {seat.role} (session {seat.session})?", width, height):
        return "nothing done"
    return _attach(team, scr, seat.session)


def _fabrikito(team: Team, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fabrikito", args[0], "--team", str(team.path), *args[1:]],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    said = (done.stdout.strip() or done.stderr.strip() or f"exit status {done.returncode}").splitlines()
    return said[0] if said else ""


def _attach(team: Team, scr: Any, session: str) -> str:
    import curses

    server = team.server()
    if os.environ.get("TMUX", "").split(",")[0] == server.resolved_socket_path():
        server.run("switch-client", "-t", session)  # inside the team's own server: switch to it
        return f"switched to {session}"
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    curses.def_prog_mode()
    curses.endwin()
    try:
        subprocess.run([server.binary, *server.server_flags, "attach", "-t", session], env=env, check=False)
    finally:
        curses.reset_prog_mode()
        scr.refresh()
    return f"back from {session}"
