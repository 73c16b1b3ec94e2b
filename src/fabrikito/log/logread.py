"""Reading the message log for ``fabrikito log``: every generation, only what is shown.

The log is ``messages.log`` and its rotated generations ``messages.log.1`` …
(:mod:`fabrikito.base.rotate`), read oldest first as one log.  A query reads
only what it shows: ``--since`` finds its place by bisection
(:mod:`fabrikito.log.seek`), ``--until`` stops reading past its time, ``-n N``
reads back from the end until it has N lines, and the other filters stream.

A torn or foreign line has no time a filter could judge, so it is shown when
it lies among the lines the time window keeps: after the first of them (from
the top when there is no ``--since``) and before the last (to the end when
there is no ``--until``).  Lines are numbered from the top of the oldest
generation when the whole log is read; a query that skips part of it does not
count what it skipped (``None``).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from fabrikito.base import rotate
from fabrikito.base.values import frozen
from fabrikito.log import seek
from fabrikito.log.msglog import Foreign, Record, parse_line

Item = tuple[int | None, Record | Foreign]
FOLLOW_INTERVAL = 0.25


@frozen
class Window:
    """The time filters, in the log's own form (``2026-10-30T14:05:09``)."""

    since: str | None = None
    until: str | None = None

    def holds(self, when: str) -> bool:
        return (self.since is None or when >= self.since) and (self.until is None or when <= self.until)


EVERYTHING = Window()


def select(
    path: str | os.PathLike[str],
    window: Window = EVERYTHING,
    *,
    last: int | None = None,
    keep: Callable[[Record], bool] = lambda _record: True,
) -> list[Item]:
    """The lines a query shows, in log order: in ``window``, kept by ``keep``, the last ``last`` of them."""
    return list(each(path, window, last=last, keep=keep))


def each(
    path: str | os.PathLike[str],
    window: Window = EVERYTHING,
    *,
    last: int | None = None,
    keep: Callable[[Record], bool] = lambda _record: True,
) -> Iterator[Item]:
    """:func:`select`'s lines one at a time, read as they are taken (the files stay open until the end or
    until the iterator is closed): a query that shows the whole log holds one line of it."""
    fds = rotate.open_generations(path)
    try:
        if last is not None:
            yield from _last(fds, window, last, keep)
        else:
            yield from _shown(_forward(fds, _start(fds, window), window), window, keep)
    finally:
        rotate.close_all(fds)


def read_all(path: str | os.PathLike[str]) -> Iterator[Item]:
    """Every line of every generation, numbered from 1 (a list: the files are closed when it returns)."""
    return iter(select(path))


def _start(fds: list[int], window: Window) -> tuple[int, int]:
    """(generation index, offset) where reading starts: the top, or where ``--since`` places it."""
    if window.since is None or not fds:
        return 0, 0
    for index in range(len(fds) - 1, -1, -1):
        fd = fds[index]
        if index == 0 or seek.starts_before(fd, window.since):
            return index, seek.since_offset(fd, window.since)
    return 0, 0


def _forward(fds: list[int], start: tuple[int, int], window: Window) -> Iterator[Item]:
    """The lines from ``start``; before the window's first record, a line older than ``--since`` is
    skipped unparsed (a record there is not shown, nor is a foreign line before the window opens)."""
    counted = start == (0, 0)
    number = 0
    beyond = seek.shifted(window.until, seek.SLACK).encode() if window.until is not None else None
    before = window.since.encode() if window.since is not None else None
    first, offset = start
    for index in range(first, len(fds)):
        for _at, line in seek.lines(fds[index], offset if index == first else 0):
            number += 1
            when = seek.line_time(line)
            if when is not None:
                if beyond is not None and when > beyond:
                    return
                if before is not None and when < before:
                    continue
            item = parse_line(line)
            if before is not None and isinstance(item, Record) and window.holds(item.time):
                before = None
            yield (number if counted else None), item


def _shown(items: Iterable[Item], window: Window, keep: Callable[[Record], bool]) -> Iterator[Item]:
    """Records in the window that ``keep`` keeps, and the foreign lines among the window's records."""
    opened = window.since is None
    waiting: list[Item] = []
    for item in items:
        record = item[1]
        if isinstance(record, Foreign):
            if opened:
                waiting.append(item)
            continue
        if not window.holds(record.time):
            continue
        opened = True
        yield from waiting
        waiting.clear()
        if keep(record):
            yield item
    if window.until is None:
        yield from waiting


def _last(fds: list[int], window: Window, count: int, keep: Callable[[Record], bool]) -> list[Item]:
    """The last ``count`` lines shown: read back until ``count`` records are kept, then forward from there."""
    if count <= 0 or not fds:
        return []
    lowered = seek.shifted(window.since, -seek.SLACK) if window.since is not None else None
    start = (0, 0)
    kept = 0
    for index in range(len(fds) - 1, -1, -1):
        for offset, line in seek.lines_backward(fds[index]):
            record = parse_line(line)
            if isinstance(record, Foreign):
                continue
            if lowered is not None and record.time < lowered:
                start = (index, offset)
                break
            if window.holds(record.time) and keep(record):
                kept += 1
                if kept == count:
                    start = (index, offset)
                    break
        else:
            continue
        break
    tail: deque[Item] = deque(maxlen=count)
    tail.extend(_shown(_forward(fds, start, window), window, keep))
    return list(tail)


def follow(
    path: str | os.PathLike[str],
    *,
    interval: float = FOLLOW_INTERVAL,
    from_end: bool = True,
    opened: tuple[int | None, int] | None = None,
) -> Iterator[Item]:
    """The log's lines as they come, until interrupted; from its end (what is there is not shown).

    A line is taken once its newline is there.  When ``messages.log`` is
    rotated or replaced, the old file is read to its end (a writer that
    opened it just before still lands there) and reading goes on at the top
    of the new one.  Lines are not numbered.
    """
    name = os.fspath(path)
    fd, offset = _open_current(name, from_end=from_end) if opened is None else opened
    try:
        while True:
            if fd is None:
                time.sleep(interval)
                fd, offset = _open_current(name, from_end=False)
                continue
            pending = b""
            while True:
                data = os.pread(fd, 1 << 20, offset)
                if data:
                    offset += len(data)
                    pending += data
                    *complete, pending = pending.split(b"\n")
                    for line in complete:
                        yield None, parse_line(line + b"\n")
                    continue
                if _replaced(name, fd, offset):
                    time.sleep(interval)  # the last writers of the old file finish their write
                    *complete, torn = (pending + b"".join(rotate.read_fd(fd, start=offset))).split(b"\n")
                    for line in complete:
                        yield None, parse_line(line + b"\n")
                    if torn:
                        yield None, parse_line(torn)
                    break
                time.sleep(interval)
            os.close(fd)
            fd, offset = _open_current(name, from_end=False)
    finally:
        if fd is not None:
            os.close(fd)


def open_end(path: str | os.PathLike[str]) -> tuple[int | None, int]:
    """The log opened at its end, for :func:`follow` (``opened=``) to start exactly where a read made after
    this ends: a line appended after the read is shown, never skipped (one appended in the moment between
    this open and the read's end is shown by both: twice, which a reader can tell, rather than never)."""
    return _open_current(os.fspath(path), from_end=True)


def _open_current(name: str, *, from_end: bool) -> tuple[int | None, int]:
    from fabrikito.base import statedir
    from fabrikito.base.errors import StateFileError

    try:
        fd = statedir.open_plain(name, os.O_RDONLY)
    except (FileNotFoundError, StateFileError):
        return None, 0
    if not from_end:
        return fd, 0
    size = os.fstat(fd).st_size
    start, _count = seek.tail_offset(fd, 1, end=size)
    torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    return fd, start if torn else size  # a torn last line is read again once its writer ends it


def _replaced(name: str, fd: int, offset: int) -> bool:
    try:
        now = os.lstat(name)
    except FileNotFoundError:
        return True
    held = os.fstat(fd)
    return (now.st_ino, now.st_dev) != (held.st_ino, held.st_dev) or held.st_size < offset
