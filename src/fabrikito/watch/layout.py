"""What ``fabrikito watch`` draws, as plain lines: no terminal, no colour needed to read it.

:func:`frame` lays out one refresh from what the watcher wrote (``watcher.json``)
and the log's last lines; the curses view (:mod:`fabrikito.watch.view`) only
puts these lines on the screen and marks the chosen row.  ``watch --once`` prints
one frame as text.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fabrikito.base import durations, statedir
from fabrikito.base.errors import StateFileError
from fabrikito.base.values import frozen

MIN_WIDTH = 40
WIDE_HEADER = " RELEASE   CONV      R"
HOST_HEADER = " HOST"
WIDE = 67 + len(WIDE_HEADER)  # a seat row with the release, conversation and restarts columns
MIN_HEIGHT = 12
LOG_TAIL = 1 << 14
STALE = 10.0


@frozen
class Row:
    text: str
    seat: str | None = None  # the seat the row is about (a, f act on it)
    message: str | None = None  # the queued message the row is about (r, d act on it)
    detail: str | None = None  # more about the row's seat, shown under the rows while it is chosen


@frozen
class Frame:
    lines: tuple[Row, ...]
    choices: tuple[int, ...]  # indexes of the rows a cursor can be on


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(statedir.read_plain(path) or b"null")
    except (OSError, ValueError, StateFileError):
        return None
    return data if isinstance(data, dict) else None


def log_tail(path: Path, lines: int) -> list[str]:
    """The log's last ``lines`` lines as ``time  from -> to  outcome``, read from its end only, across
    its rotated generations (right after a rotation ``messages.log`` holds few: the rest are in
    ``messages.log.1``...)."""
    from fabrikito.base import rotate
    from fabrikito.log import msglog

    try:
        data = rotate.tail(os.fspath(path), LOG_TAIL)
    except (OSError, StateFileError):
        return []
    raw = data.split(b"\n")
    if len(data) >= LOG_TAIL:
        raw = raw[1:]  # the first may be the end of a line
    out = []
    for line in [r for r in raw if r][-lines:] if lines > 0 else []:
        record = msglog.parse_line(line + b"\n")
        if isinstance(record, msglog.Foreign):
            continue
        who = f"{record.sender.decode('utf-8', 'replace')} -> {record.recipient.decode('utf-8', 'replace')}"
        out.append(f"{record.time[11:]}  {who}  {record.outcome}")
    return out


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces where it can be."""
    lines: list[str] = []
    line = ""
    for whole in text.split(" "):
        word = whole
        while len(word) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:width])
            word = word[width:]
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def frame(
    team_name: str,
    state: Mapping[str, Any] | None,
    log: Sequence[str],
    *,
    width: int,
    height: int,
    now: float | None = None,
) -> Frame:
    """One refresh of the view at ``width`` x ``height``."""
    now = time.time() if now is None else now
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        text = f"terminal too small ({width}x{height}): make it at least {MIN_WIDTH}x{MIN_HEIGHT}"
        return Frame(tuple(Row(line) for line in wrap(text, max(1, width - 1))[: max(1, height - 1)]), ())
    rows: list[Row] = []
    choices: list[int] = []

    def add(
        text: str,
        *,
        seat: str | None = None,
        message: str | None = None,
        detail: str | None = None,
        choose: bool = False,
    ) -> None:
        if choose:
            choices.append(len(rows))
        rows.append(Row(clip(text, width - 1), seat, message, detail))

    clock = time.strftime("%H:%M:%S", time.localtime(now))
    if state is None:
        add(f"team {team_name}  {clock}  watcher: NOT RUNNING (./fabrikito up starts it)")
        add("nothing to show until the watcher has run a round")
        return Frame(tuple(rows), ())
    age = now - float(state.get("at", 0))
    live = "watcher: running" if age <= STALE else f"watcher: NO ROUND FOR {durations.short(age)} (see watcher.err)"
    add(f"team {team_name}  {clock}  {live}")
    items = list(state.get("open") or [])
    add(f"NEEDS YOU ({len(items)})" if items else "NEEDS YOU: nothing")
    for item in items[: max(1, (height - 8) // 2)]:
        key = str(item.get("key", ""))
        message = key.split(" ", 1)[1] if key.startswith("queued-") else None
        since = float(item.get("since_at", item.get("at", now)))
        where = f" on {item['host']}" if item.get("host") else ""
        add(
            f"! {item.get('seat')}{where} {item.get('kind')} ({durations.short(now - since)}): {item.get('detail')}",
            seat=str(item.get("seat")),
            message=message,
            choose=True,
        )
    seats = list(state.get("seats") or [])
    add("")
    hosted = any(s.get("host") for s in seats)
    wide = width - 1 >= WIDE + (len(HOST_HEADER) if hosted else 0)  # room for release, conversation, restarts
    header = f"  {'ROLE':<10} {'STATE':<22} {'CLASS':<10}  Q {'TO/FROM':<17}"
    add(header + (WIDE_HEADER if wide else "") + (HOST_HEADER if hosted else ""))
    queued = {str(m.get("role")): str(m.get("id")) for m in reversed(state.get("queued") or [])}
    for s in seats:
        since = s.get("since")
        state_text = str(s.get("state")) + (
            f" {durations.short(now - float(since))}" if isinstance(since, int | float) else ""
        )
        cells = [
            f"{s.get('role')!s:<10.10}",
            f"{state_text:<22.22}",
            f"{s.get('class')!s:<10.10}",
            f"{int(s.get('queued') or 0):>2}",
            f"{str(s.get('last_to')) + '/' + str(s.get('last_from')):<17.17}",
        ]
        conversation = str(s.get("conversation") or "-")
        restarts = int(s.get("restarts") or 0)
        if wide:
            cells += [f"{s.get('release') or '-'!s:<9.9}", f"{conversation:<8.8}", f"{restarts:>2}"]
        if hosted:
            cells.append(str(s.get("host") or "here"))
        detail = (
            f"{s.get('role')}: release {s.get('release') or '-'}  conversation {conversation}  "
            f"restarted {restarts} time{'' if restarts == 1 else 's'}" + (f"  on {s['host']}" if s.get("host") else "")
        )
        role = str(s.get("role"))
        add("  " + " ".join(cells), seat=role, message=queued.get(role), detail=detail, choose=True)
    room = height - len(rows) - 3
    if room > 0 and log:
        add("LOG")
        for line in log[-room:]:
            add("  " + line)
    return Frame(tuple(rows), tuple(choices))


KEYS_LINE = "keys: up/down choose  a attach  f flush  r release  d drop  q quit"
