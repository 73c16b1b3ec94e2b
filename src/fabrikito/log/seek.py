"""Finding a place in the message log without reading it all: by time, or N lines from the end.

The log is written in time order, so ``--since`` bisects on line starts: it
reads one line near the middle of what is left, and halves.  Clocks do step
back (a daylight-saving change steps local time back an hour; NTP corrects a
few seconds), so the search looks for a line older than the time asked
**less** :data:`SLACK`: every line before such a line is older than the time
asked as long as no clock stepped back by more than that.  The block before the
place found is then checked; if a line in it is not older (a larger step
back), the search walks back a block at a time until a whole block is, and
reads linearly from there: slower, never wrong about what it checked.

``--until`` stops reading at the first line later than the time asked plus
:data:`SLACK`.  A line whose time cannot be read (torn, foreign) neither
moves the bisection nor stops the reading.

Everything here works on read descriptors (:func:`fabrikito.base.rotate.open_generations`)
with ``pread``, so what a writer appends meanwhile does not move anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

#: How far a clock may step back without a line being missed (a DST change is one hour).
SLACK = 2 * 3600
#: The bisection stops when this much is left; the block check reads this much back.
BLOCK = 64 * 1024
_PROBE = 4096
_TIME_LEN = 19  # 2026-10-30T14:05:09
_DIGITS = frozenset(b"0123456789")
_SEPARATORS = {4: 45, 7: 45, 10: 84, 13: 58, 16: 58}  # - - T : :


def line_time(line: bytes) -> bytes | None:
    """The time a line starts with (``b"2026-10-30T14:05:09"``), or ``None`` when it has none."""
    if len(line) <= _TIME_LEN or line[_TIME_LEN] != 9:  # a tab after the time
        return None
    for i in range(_TIME_LEN):
        c = line[i]
        if _SEPARATORS.get(i, -1) != c and (i in _SEPARATORS or c not in _DIGITS):
            return None
    return line[:_TIME_LEN]


def shifted(when: str, seconds: int) -> str:
    """A log time moved by ``seconds`` (the log's naive local form stays naive)."""
    from datetime import datetime, timedelta

    from fabrikito.log.logline import TIME_FORMAT

    try:
        return (datetime.strptime(when, TIME_FORMAT) + timedelta(seconds=seconds)).strftime(TIME_FORMAT)
    except OverflowError:
        return "0000-01-01T00:00:00" if seconds < 0 else "9999-12-31T23:59:59"


def _line_at(fd: int, start: int, end: int) -> bytes:
    """The line starting at ``start`` (up to ``end``), newline included when it has one."""
    out = b""
    offset = start
    while offset < end:
        data = os.pread(fd, min(_PROBE, end - offset), offset)
        if not data:
            break
        cut = data.find(b"\n")
        if cut >= 0:
            return out + data[: cut + 1]
        out += data
        offset += len(data)
    return out


def _next_start(fd: int, offset: int, end: int) -> int:
    """The first line start at or after ``offset`` (``end`` when none before it)."""
    if offset <= 0:
        return 0
    position = offset - 1
    while position < end:
        data = os.pread(fd, min(_PROBE, end - position), position)
        if not data:
            return end
        cut = data.find(b"\n")
        if cut >= 0:
            return position + cut + 1
        position += len(data)
    return end


def _timed_line(fd: int, start: int, end: int) -> tuple[int, bytes] | None:
    """The first line at or after the line start ``start`` that has a time: (its start, its time)."""
    while start < end:
        line = _line_at(fd, start, end)
        if not line:
            return None
        when = line_time(line)
        if when is not None:
            return start, when
        start += len(line)
    return None


def since_offset(fd: int, since: str, *, end: int | None = None) -> int:
    """A line start before which no line is at or after ``since`` (0 when it cannot tell)."""
    size = os.fstat(fd).st_size if end is None else end
    lowered = shifted(since, -SLACK).encode()
    lo, hi = 0, size
    while hi - lo > BLOCK:
        mid = (lo + hi) // 2
        found = _timed_line(fd, _next_start(fd, mid, hi), hi)
        if found is None or found[1] >= lowered:
            hi = mid
        else:
            lo = found[0]
    return _checked_back(fd, lo, since.encode())


def _checked_back(fd: int, offset: int, since: bytes) -> int:
    """``offset``, or further back while the block before it holds a line at or after ``since``."""
    while offset > 0:
        start = _next_start(fd, max(0, offset - BLOCK), offset)
        if start >= offset:  # one line longer than a block: look further back
            start = 0 if offset <= BLOCK else _next_start(fd, offset - 2 * BLOCK, offset)
        block = os.pread(fd, offset - start, start)
        if all((t := line_time(line)) is None or t < since for line in block.splitlines(keepends=True)):
            return offset
        offset = start
    return 0


def starts_before(fd: int, since: str) -> bool:
    """Whether the file's first timed line is older than ``since`` less the slack (older files need no look)."""
    found = _timed_line(fd, 0, os.fstat(fd).st_size)
    return found is not None and found[1] < shifted(since, -SLACK).encode()


def tail_offset(fd: int, count: int, *, end: int | None = None) -> tuple[int, int]:
    """Where the last ``count`` lines start, and how many there are (fewer when the file holds fewer).

    A last line without its newline counts as a line (it is shown as torn).
    """
    size = os.fstat(fd).st_size if end is None else end
    if count <= 0 or size == 0:
        return size, 0
    position = size - 1 if os.pread(fd, 1, size - 1) == b"\n" else size  # a final newline starts no line
    found = 0
    while position > 0:
        start = max(0, position - BLOCK)
        data = os.pread(fd, position - start, start)
        cut = len(data)
        while (cut := data.rfind(b"\n", 0, cut)) >= 0:
            found += 1
            if found == count:
                return start + cut + 1, count
        position = start
    return 0, found + 1


def lines(fd: int, start: int = 0, *, chunk: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """(offset, line) from the line start ``start`` to the end; the last one may lack its newline."""
    from fabrikito.base.rotate import read_fd

    pending = b""
    pending_at = start
    for data in read_fd(fd, start=start, chunk=chunk):
        pending += data
        at = 0
        while True:
            cut = pending.find(b"\n", at)
            if cut < 0:
                break
            yield pending_at + at, pending[at : cut + 1]
            at = cut + 1
        pending_at += at
        pending = pending[at:]
    if pending:
        yield pending_at, pending


def lines_backward(fd: int, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(offset, line) from the last line back to the first; the last one may lack its newline."""
    stop = os.fstat(fd).st_size if end is None else end
    while stop > 0:
        low = max(0, stop - BLOCK)
        while True:
            data = os.pread(fd, stop - low, low)
            if low == 0:
                break
            cut = data.find(b"\n", 0, len(data) - 1)  # not the newline that ends the last line
            if cut >= 0:
                low += cut + 1
                data = data[cut + 1 :]
                break
            low = max(0, low - BLOCK)  # a line longer than a block
        pieces = data.split(b"\n")
        rest = pieces.pop()
        found = [piece + b"\n" for piece in pieces]
        if rest:
            found.append(rest)
        offsets = []
        at = low
        for line in found:
            offsets.append(at)
            at += len(line)
        yield from zip(reversed(offsets), reversed(found), strict=True)
        stop = low
