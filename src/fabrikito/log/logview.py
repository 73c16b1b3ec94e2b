"""``fabrikito log``: the message log read back for people.

Each line is decoded (:func:`fabrikito.log.msglog.parse_line`) and shown as time,
sender → recipient, outcome and message in aligned columns.  The message is
shown as text, its newlines as indented continuation lines; a control code, a
bidi override or a byte that is not UTF-8 is still shown as ``\\xHH``, so the
log can never drive the terminal.  A torn or foreign line is shown as such,
with its reason, and is never hidden by a filter (nothing says who wrote it).

``--json`` prints ``{"version": 1, "records": [...]}``; with ``--follow`` it
prints one JSON object per line, ``{"version": 1, "record": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base.errors import UsageError
from fabrikito.base.values import frozen
from fabrikito.log import logread, msglog
from fabrikito.log.msglog import Foreign, Outcome, Record

if TYPE_CHECKING:
    from typing import Any

JSON_VERSION = 1
FOLLOW_ROUTE_WIDTH = 24
NEWLINE = b"\n"
OUTCOME_WIDTH = max(len(o.value) for o in Outcome)
SPILL = 20_000  # rows of a table held in memory; past them the table goes to a temporary file
_RELATIVE = re.compile(r"(\d+)([smhd])\Z")
_ABSOLUTE = re.compile(r"(\d{4}-\d\d-\d\d)(?:[T ](\d\d:\d\d(?::\d\d)?))?\Z")
_TIME_ONLY = re.compile(r"\d\d:\d\d(?::\d\d)?\Z")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SHOW_AS_HEX = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")


@frozen
class Filters:
    senders: frozenset[str] = frozenset()
    recipients: frozenset[str] = frozenset()
    outcomes: frozenset[str] = frozenset()
    since: str | None = None
    until: str | None = None

    def keep(self, record: Record) -> bool:
        if self.senders and _text(record.sender) not in self.senders:
            return False
        if self.recipients and _text(record.recipient) not in self.recipients:
            return False
        if self.outcomes and record.outcome not in self.outcomes:
            return False
        if self.since is not None and record.time < self.since:
            return False
        return not (self.until is not None and record.time > self.until)


def cmd_log(args: argparse.Namespace) -> int:
    from fabrikito.team import teamfile

    team = teamfile.load(args.team)
    now = time.time()
    filters = Filters(
        senders=frozenset(args.sender or ()),
        recipients=frozenset(args.recipient or ()),
        outcomes=frozenset(parse_outcome(o) for o in args.outcome or ()),
        since=parse_when(args.since, now, "--since") if args.since else None,
        until=parse_when(args.until, now, "--until") if args.until else None,
    )
    out = sys.stdout
    window = logread.Window(since=filters.since, until=filters.until)
    last = args.last
    if last is not None and last < 0:
        raise UsageError(f"-n {last} is not a count of lines: give 0 or more")
    try:
        if args.follow:
            opened = logread.open_end(team.log_path)  # before the read: what comes meanwhile is followed
            if last or window.since is not None:
                for number, item in logread.select(team.log_path, window, last=last, keep=filters.keep):
                    _emit(out, number, item, filters, as_json=args.json, stream=True)
            for number, item in logread.follow(team.log_path, opened=opened):
                _emit(out, number, item, filters, as_json=args.json, stream=True)
            return 0
        if team.across_hosts:
            return _merged(team, [(n or 0, it) for n, it in read_log(team.log_path)], filters, as_json=args.json)
        items = logread.each(team.log_path, window, last=last, keep=filters.keep)
        if args.json:
            write_json(out, items)
        else:
            out.writelines(Table.of(items, Filters()).lines())
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    return 0


def _merged(team: Any, items: list[tuple[int, Record | Foreign]], filters: Filters, *, as_json: bool) -> int:
    """Every host's log with this machine's, by time (:mod:`fabrikito.log.hostlogs`), with a HOST column."""
    from fabrikito.log import hostlogs

    lines, problems = hostlogs.merged(team, items)
    kept = [(n, it, w) for n, it, w in lines if not isinstance(it, Record) or filters.keep(it)]
    if as_json:
        records = [{**item_json(n, it), "host": w} for n, it, w in kept]
        body = {"version": JSON_VERSION, "records": records, "unreachable": problems}
        sys.stdout.write(json_text(body, indent=2) + "\n")
    else:
        sys.stdout.write(render([(n, it) for n, it, _ in kept], filters, where=[w or "here" for _, _, w in kept]))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 0


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


# -- arguments ------------------------------------------------------------------


def parse_outcome(value: str) -> str:
    for outcome in Outcome:
        if value.casefold() == outcome.value.casefold():
            return outcome.value
    known = ", ".join(o.value for o in Outcome)
    raise UsageError(f"--outcome {value!r} is not an outcome of the log: use one of {known}")


def parse_when(value: str, now: float, option: str) -> str:
    """A time filter in the log's own form, from an age (``30s``, ``10m``, ``2h``, ``3d``),
    a date, a date and time, or a time today (all local)."""
    from datetime import datetime

    text = value.strip()
    if m := _RELATIVE.match(text):
        try:
            return msglog.local_time(now - int(m.group(1)) * _UNITS[m.group(2)])
        except (OSError, OverflowError, ValueError):
            raise UsageError(
                f"{option} {value!r} reaches back before any time this system can show: give a smaller age"
            ) from None
    when: str | None = None
    if m := _ABSOLUTE.match(text):
        clock = m.group(2) or "00:00:00"
        when = f"{m.group(1)}T{clock if len(clock) == 8 else clock + ':00'}"
    elif _TIME_ONLY.match(text):
        when = f"{msglog.local_time(now)[:10]}T{text if len(text) == 8 else text + ':00'}"
    if when is not None:
        try:
            datetime.strptime(when, msglog.TIME_FORMAT)
        except ValueError:
            raise UsageError(
                f"{option} {value!r} is not a real date or time (a month is 01-12, an hour 00-23, "
                "a minute and a second 00-59)"
            ) from None
        return when
    raise UsageError(
        f"{option} {value!r} is not a time: give a local time like 2026-10-30T14:05:09, "
        "2026-10-30, 14:05, or an age like 30s, 10m, 2h, 3d"
    )


# -- reading ------------------------------------------------------------------------


def read_log(path: Path) -> Iterator[logread.Item]:
    """Every line of the log and its rotated generations, oldest first, numbered from 1."""
    return logread.read_all(path)


# -- showing --------------------------------------------------------------------------


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def shown(data: bytes) -> str:
    """Bytes as safe terminal text: controls, bidi and bytes that are not UTF-8 as ``\\xHH``; tab as spaces."""
    text = _SHOW_AS_HEX.sub(_hex_of, _text(data))
    return text.replace("\t", "    ")


def _hex_of(m: re.Match[str]) -> str:
    return "".join(f"\\x{b:02X}" for b in m.group(0).encode("utf-8", "surrogateescape"))


def render(
    items: Sequence[logread.Item],
    filters: Filters,
    *,
    min_route: int = 0,
    where: Sequence[str] | None = None,
) -> str:
    """The aligned table: time, sender → recipient, outcome, message (each after its host, with ``where``)."""
    if where is not None:
        width = max(map(len, where), default=0)
        routes = [len(f"{shown(it.sender)} → {shown(it.recipient)}") for _, it in items if isinstance(it, Record)]
        min_route = max([min_route, *routes])
        return "".join(
            f"{host:<{width}}  {render([pair], filters, min_route=min_route)}"
            for host, pair in zip(where, items, strict=True)
            if not isinstance(pair[1], Record) or filters.keep(pair[1])
        )
    return "".join(Table.of(items, filters, min_route).lines())


class Table:
    """:func:`render`'s aligned table, built a line at a time: its columns are as wide as their widest cell,
    so nothing is written before the last line is in.  Up to :data:`SPILL` rows are held in memory, then
    every row goes to a temporary file: a query that shows a month of log holds no more than that."""

    def __init__(self, min_route: int = 0) -> None:
        self.rows: list[tuple[str, str, str, str] | str] = []
        self.spill: Any = None  # the temporary file, once there are more than SPILL rows
        self.route_width = min_route
        self.outcome_width = OUTCOME_WIDTH

    @classmethod
    def of(cls, items: Iterable[logread.Item], filters: Filters, min_route: int = 0) -> Table:
        """The table of ``items`` as ``filters`` keeps them (each read once, as it comes)."""
        table = cls(min_route)
        for number, item in items:
            table.add(number, item, filters)
        return table

    def add(self, number: int | None, item: Record | Foreign, filters: Filters) -> None:
        row: tuple[str, str, str, str] | str
        if isinstance(item, Foreign):
            where = "" if number is None else f"line {number}: "
            row = f"{where}{item.reason}: {shown(item.raw.removesuffix(NEWLINE))}"
        elif filters.keep(item):
            route = f"{shown(item.sender)} → {shown(item.recipient)}"
            row = (item.time, route, item.outcome, shown(item.message))
            self.route_width = max(self.route_width, len(route))
            self.outcome_width = max(self.outcome_width, len(item.outcome))
        else:
            return
        if self.spill is None and len(self.rows) < SPILL:
            self.rows.append(row)
            return
        if self.spill is None:
            import tempfile

            self.spill = tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogateescape")  # noqa: SIM115 (closed by lines())
            self.spill.writelines(json.dumps(r) + "\n" for r in self.rows)
            self.rows = []
        self.spill.write(json.dumps(row) + "\n")

    def lines(self) -> Iterator[str]:
        """The table's lines, each ending in a newline (the temporary file is closed after the last)."""
        if self.spill is None:
            yield from self._format(self.rows)
            return
        try:
            self.spill.seek(0)
            decoded = (json.loads(line) for line in self.spill)
            yield from self._format(r if isinstance(r, str) else tuple(r) for r in decoded)
        finally:
            self.spill.close()

    def _format(self, rows: Iterable[tuple[str, str, str, str] | str]) -> Iterator[str]:
        for row in rows:
            if isinstance(row, str):
                yield f"?? {row}\n"
                continue
            when, route, outcome, message = row
            head = f"{when}  {route:<{self.route_width}}  {outcome:<{self.outcome_width}}  "
            lines = message.split("\n")
            yield head + lines[0] + "\n"
            yield from (" " * len(head) + more + "\n" for more in lines[1:])


def write_json(out: Any, items: Iterable[logread.Item]) -> None:
    """``log --json``: the same document as :func:`json_text` of every record with ``indent=2``, written a
    record at a time."""
    out.write(f'{{\n  "version": {JSON_VERSION},\n  "records": [')
    first = True
    for number, item in items:
        body = json_text(item_json(number, item), indent=2).replace("\n", "\n    ")
        out.write(("\n    " if first else ",\n    ") + body)
        first = False
    out.write("]\n}\n" if first else "\n  ]\n}\n")


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_text(value: object, *, indent: int | None = None) -> str:
    """JSON with text kept readable (``ensure_ascii=False``) but no character a terminal acts on:
    DEL, C1 controls and bidi controls are written as ``\\uXXXX`` (JSON escapes the C0 ones itself)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def item_json(number: int | None, item: Record | Foreign) -> dict[str, Any]:
    """One line for ``--json``.  Text fields are decoded (bytes that are not UTF-8 become U+FFFD);
    ``escaped`` holds them exactly as the log has them."""
    if isinstance(item, Foreign):
        return {
            "kind": "foreign",
            "line": number,
            "reason": item.reason,
            "raw": msglog.escape_field(item.raw.removesuffix(NEWLINE)),
        }
    return {
        "kind": "record",
        "line": number,
        "time": item.time,
        "sender": item.sender.decode("utf-8", "replace"),
        "recipient": item.recipient.decode("utf-8", "replace"),
        "outcome": item.outcome,
        "message": item.message.decode("utf-8", "replace"),
        "escaped": {"sender": item.escaped[1], "recipient": item.escaped[2], "message": item.escaped[4]},
    }


def _emit(
    out: Any, number: int | None, item: Record | Foreign, filters: Filters, *, as_json: bool, stream: bool
) -> None:
    if isinstance(item, Record) and not filters.keep(item):
        return
    if as_json:
        out.write(json_text({"version": JSON_VERSION, "record": item_json(number, item)}))
        out.write("\n")
    else:
        out.write(render([(number, item)], filters, min_route=FOLLOW_ROUTE_WIDTH))
    if stream:
        out.flush()
