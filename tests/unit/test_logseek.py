"""``log --since/--until/-n`` by bisection and reading back give what a linear scan of every line gives."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import pytest

from fabrikito.base import rotate
from fabrikito.log import logread, msglog, seek
from fabrikito.log.msglog import Foreign, Outcome, Record

T0 = 1_793_000_000.0  # a fixed moment; times are written in the local zone like the log's
ROLES = ("tl", "api", "em", "ux")


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few lines, so a log of a few thousand lines takes many bisection steps and long lines
    cross the probe's reads."""
    monkeypatch.setattr(seek, "BLOCK", 512)
    monkeypatch.setattr(seek, "_PROBE", 64)


def generated(rng: random.Random, count: int, *, step_back: float = 0.0, same: float = 0.3) -> list[bytes]:
    """``count`` log lines: many in the same second, some stepped back by up to ``step_back`` seconds,
    some long, some foreign (not UTF-8, not five fields)."""
    out = []
    when = T0
    for _ in range(count):
        if rng.random() > same:
            when += rng.choice((1, 1, 2, 7, 60))
        stamp = when - rng.uniform(0, step_back) if step_back and rng.random() < 0.1 else when
        kind = rng.random()
        if kind < 0.03:
            out.append(msglog.local_time(stamp).encode() + b"\tem\ttl\tsent\t\xff\xfe not utf-8\n")
        elif kind < 0.05:
            out.append(b"some text another program wrote\n")
        else:
            body = "x" * rng.choice((3, 20, 300))
            sender, recipient = rng.sample(ROLES, 2)
            out.append(msglog.format_line(stamp, sender, recipient, rng.choice(list(Outcome)), body))
    return out


def linear(path: Path, window: logread.Window, keep: object = None, last: int | None = None) -> list[object]:
    """The reference: every line of every generation parsed, then the same rules applied."""
    data = rotate.read_all(path)
    pieces = []
    for fd_data in [data]:
        *complete, torn = fd_data.split(b"\n")
        pieces += [line + b"\n" for line in complete] + ([torn] if torn else [])
    items: list[logread.Item] = [(None, msglog.parse_line(line)) for line in pieces]
    chosen = list(logread._shown(items, window, keep if callable(keep) else (lambda _r: True)))
    if last is not None:
        chosen = chosen[-last:] if last else []
    return [item for _, item in chosen]


def bisected(path: Path, window: logread.Window, keep: object = None, last: int | None = None) -> list[object]:
    kept = keep if callable(keep) else (lambda _r: True)
    return [item for _, item in logread.select(path, window, last=last, keep=kept)]


def times(lines: list[bytes]) -> list[str]:
    return sorted({t.decode() for line in lines if (t := seek.line_time(line)) is not None})


def write(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("step_back", [0.0, 600.0, 3600.0])
def test_since_and_until_equal_a_linear_scan(tmp_path: Path, seed: int, step_back: float) -> None:
    rng = random.Random(  # noqa: S311 -- seeded, reproducible logs
        seed
    )
    lines = generated(rng, 1500, step_back=step_back)
    if seed % 2:
        lines[-1] = lines[-1][:-7]  # a torn last line
    log = tmp_path / "state" / "messages.log"
    write(log, lines)
    known = times(lines)
    probes = [known[0], known[-1], "2000-01-01T00:00:00", "2999-01-01T00:00:00"]
    probes += [rng.choice(known) for _ in range(12)]
    for since in probes:
        for until in (None, rng.choice(known)):
            window = logread.Window(since=since, until=until)
            assert bisected(log, window) == linear(log, window), (since, until)
        window = logread.Window(until=since)
        assert bisected(log, window) == linear(log, window), since


@pytest.mark.parametrize("seed", range(4))
def test_last_lines_equal_a_linear_scan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(  # noqa: S311 -- seeded, reproducible logs
        100 + seed
    )
    lines = generated(rng, 900, step_back=900.0)
    lines[-1] = lines[-1].rstrip(b"\n") if seed % 2 else lines[-1]
    log = tmp_path / "state" / "messages.log"
    write(log, lines)
    known = times(lines)
    from_api = lambda record: record.sender == b"api"  # noqa: E731 -- a filter as the command line makes it
    for last in (0, 1, 2, 10, 100, 899, 900, 5000):
        for since in (None, rng.choice(known)):
            window = logread.Window(since=since)
            assert bisected(log, window, last=last) == linear(log, window, last=last), (last, since)
            assert bisected(log, window, from_api, last) == linear(log, window, from_api, last), (last, since)


def test_all_lines_in_the_same_second(tmp_path: Path) -> None:
    lines = [msglog.format_line(T0, "tl", "api", Outcome.SENT, f"m{i}") for i in range(2000)]
    log = tmp_path / "state" / "messages.log"
    write(log, lines)
    second = msglog.local_time(T0)
    assert len(bisected(log, logread.Window(since=second))) == 2000
    assert bisected(log, logread.Window(since=msglog.local_time(T0 + 1))) == []
    assert len(bisected(log, logread.Window(), last=7)) == 7


def test_a_clock_stepped_back_past_the_slack_is_found_by_the_block_check(tmp_path: Path) -> None:
    """Lines at or after --since, then the clock stepped back a day (past the slack) for a few lines,
    then on again: the bisection lands on one of those few, and the block before it holds the lines at
    or after --since, so reading starts further back and nothing is missed."""
    day = 86400
    early = [msglog.format_line(T0 + i, "tl", "api", Outcome.SENT, f"early {i}") for i in range(21)]
    ahead = [msglog.format_line(T0 + 2 * day + i, "api", "tl", Outcome.SENT, f"ahead {i}") for i in range(3)]
    back = [msglog.format_line(T0 + 1000 + i, "ux", "tl", Outcome.SENT, f"back {i}") for i in range(6)]
    late = [msglog.format_line(T0 + 2 * day + 100 + i, "em", "tl", Outcome.SENT, f"late {i}") for i in range(400)]
    log = tmp_path / "state" / "messages.log"
    write(log, early + ahead + back + late)
    fd = os.open(log, os.O_RDONLY)
    try:  # the case this test is about: the bisection alone would start after the first lines
        lowered = seek.shifted(msglog.local_time(T0 + 2 * day), -seek.SLACK).encode()
        lo, hi = 0, log.stat().st_size
        while hi - lo > seek.BLOCK:
            found = seek._timed_line(fd, seek._next_start(fd, (lo + hi) // 2, hi), hi)
            lo, hi = (lo, (lo + hi) // 2) if found is None or found[1] >= lowered else (found[0], hi)
        assert lo >= len(b"".join(early + ahead))  # it lands on a stepped-back line, after the ahead ones
    finally:
        os.close(fd)
    window = logread.Window(since=msglog.local_time(T0 + 2 * day))
    shown = bisected(log, window)
    assert shown == linear(log, window)
    assert [r.message for r in shown[:3] if isinstance(r, Record)] == [b"ahead 0", b"ahead 1", b"ahead 2"]


def test_only_foreign_or_empty_logs(tmp_path: Path) -> None:
    log = tmp_path / "state" / "messages.log"
    write(log, [b"\xff\xfe\n", b"no time here\n", b"torn"])
    window = logread.Window(since="2026-01-01T00:00:00")
    assert bisected(log, window) == linear(log, window) == []
    assert bisected(log, logread.Window(), last=2) == [
        Foreign(b"no time here\n", "1 tab-separated fields, not 5"),
        Foreign(b"torn", "torn: the line has no newline at its end"),
    ]
    write(log, [])
    assert bisected(log, window) == bisected(log, logread.Window(), last=3) == []
    assert logread.select(tmp_path / "missing" / "messages.log", window) == []


def test_generations_are_read_as_one_log(tmp_path: Path) -> None:
    rng = random.Random(  # noqa: S311 -- seeded, reproducible logs
        7
    )
    lines = generated(rng, 1200, step_back=60.0)
    log = tmp_path / "state" / "messages.log"
    cuts = [0, 300, 700, 1200]
    for number, (a, b) in enumerate(itertools.pairwise(cuts)):
        write(Path(rotate.generation_path(str(log), 2 - number)), lines[a:b])
    whole = tmp_path / "whole" / "messages.log"
    write(whole, lines)
    numbered = list(logread.read_all(log))
    assert [n for n, _ in numbered] == list(range(1, 1201))
    assert [it for _, it in numbered] == [it for _, it in logread.read_all(whole)]
    known = times(lines)
    for since in [known[0], *rng.sample(known, 15)]:
        window = logread.Window(since=since)
        assert bisected(log, window) == linear(whole, window), since
        assert bisected(log, window, last=50) == linear(whole, window, last=50), since
    assert bisected(log, logread.Window(), last=1000) == linear(whole, logread.Window(), last=1000)


def test_a_seeked_read_reads_little(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--since 10 lines from the end and -n 5 read a few blocks of a 2 MB log, not the log: the
    bisection lands the slack (two hours: 120 lines a minute apart) before the time asked."""
    lines = [msglog.format_line(T0 + 60 * i, "tl", "api", Outcome.SENT, "y" * 80) for i in range(20_000)]
    log = tmp_path / "state" / "messages.log"
    write(log, lines)
    fd = os.open(log, os.O_RDONLY)
    real = os.pread
    read = [0]

    def counting(fd_: int, size: int, offset: int) -> bytes:
        data = real(fd_, size, offset)
        read[0] += len(data)
        return data

    monkeypatch.setattr(os, "pread", counting)
    try:
        offset = seek.since_offset(fd, msglog.local_time(T0 + 60 * 19_990))
        assert log.stat().st_size - 140 * 113 < offset < log.stat().st_size - 120 * 113
        assert read[0] < 64 * 1024, read[0]
        read[0] = 0
        start, count = seek.tail_offset(fd, 5)
        assert (count, read[0] <= 2 * 512 + 1) == (5, True)
        assert real(fd, 10_000, start).count(b"\n") == 5
    finally:
        os.close(fd)


def test_line_time() -> None:
    assert seek.line_time(b"2026-10-30T14:05:09\tem\n") == b"2026-10-30T14:05:09"
    for bad in (b"2026-10-30T14:05:09", b"2026-10-30 14:05:09\t", b"2026-1x-30T14:05:09\t", b"\xff" * 30):
        assert seek.line_time(bad) is None
    assert isinstance(msglog.parse_line(msglog.format_line(T0, "a", "b", "sent", "c")), Record)
