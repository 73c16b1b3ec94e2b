"""Rotating the message log: generations shift under a lock, and no line is lost, torn or doubled."""

from __future__ import annotations

import multiprocessing
import os
import stat
import time
from pathlib import Path

import pytest

from fabrikito.base import rotate
from fabrikito.base.errors import StateFileError, TeamFileError
from fabrikito.log import logline, logread, upkeep
from fabrikito.log.msglog import Record, parse_line
from fabrikito.team import teamfile

WRITERS = 16


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_generations_shift_and_the_oldest_goes(tmp_path: Path) -> None:
    log = tmp_path / "messages.log"
    for round_ in range(5):
        log.write_bytes(f"round {round_}\n".encode() * 10)
        assert rotate.rotate(log, max_size=10, keep=3)
    assert names(tmp_path) == ["messages.log.1", "messages.log.2", "messages.log.3", "messages.log.lock"]
    assert [Path(f"{log}.{n}").read_bytes()[:7] for n in (1, 2, 3)] == [b"round 4", b"round 3", b"round 2"]
    assert stat.S_IMODE(os.stat(rotate.lock_path(str(log))).st_mode) == 0o600
    log.write_bytes(b"small\n")
    assert not rotate.rotate(log, max_size=1000, keep=3)
    assert not rotate.rotate(tmp_path / "missing.log", max_size=1, keep=3)
    assert rotate.read_all(log).startswith(b"round 2\n") and rotate.read_all(log).endswith(b"small\n")
    assert rotate.tail(log, 13) == b"round 4\nsmall\n"[-13:]


def test_a_writer_that_opened_the_log_before_the_rename_lands_in_the_rotated_file(tmp_path: Path) -> None:
    log = tmp_path / "messages.log"
    log.write_bytes(b"first\n")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        assert rotate.rotate(log, max_size=1, keep=2)
        os.write(fd, b"late\n")
    finally:
        os.close(fd)
    assert logline.append_hook(log, b"next\n")
    assert (tmp_path / "messages.log.1").read_bytes() == b"first\nlate\n"
    assert rotate.read_all(log) == b"first\nlate\nnext\n"


def test_a_link_in_place_of_a_generation_is_refused_by_readers_and_never_written_through(tmp_path: Path) -> None:
    log = tmp_path / "messages.log"
    outside = tmp_path / "outside"
    outside.write_bytes(b"not the team's\n")
    log.write_bytes(b"a line\n")
    (tmp_path / "messages.log.1").symlink_to(outside)
    with pytest.raises(StateFileError, match="symlink"):
        rotate.read_all(log)
    assert rotate.rotate(log, max_size=1, keep=1)  # the link is removed as the oldest, not followed
    assert outside.read_bytes() == b"not the team's\n"
    assert rotate.read_all(log) == b"a line\n"


def _writer(path: str, who: int, count: int) -> None:
    for n in range(count):
        line = f"2026-12-02T20:00:00\tw{who}\ttl\tsent\tline {n} of writer {who} {'x' * (n % 97)}\n".encode()
        while not logline.append_hook(path, line):  # the hook's own append: one write() per line
            time.sleep(0.001)


def _rotator(path: str, stop_at: float, max_size: int) -> None:
    while time.monotonic() < stop_at:
        rotate.rotate(path, max_size=max_size, keep=999)


def test_rotation_racing_sixteen_writers_loses_tears_and_doubles_nothing(tmp_path: Path) -> None:
    """16 processes append as the hook does while two others rotate as fast as they can (two helpers
    at once): afterwards every line is in exactly one generation, whole."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    log = str(state / "messages.log")
    count = 400
    ctx = multiprocessing.get_context("fork")
    rotators = [ctx.Process(target=_rotator, args=(log, time.monotonic() + 60, 4 * 1024)) for _ in range(2)]
    writers = [ctx.Process(target=_writer, args=(log, who, count)) for who in range(WRITERS)]
    for proc in rotators + writers:
        proc.start()
    for proc in writers:
        proc.join(120)
    for proc in rotators:
        proc.terminate()
        proc.join(10)
    assert all(proc.exitcode == 0 for proc in writers)
    generations = sorted(p for p in state.iterdir() if p.name.startswith("messages.log") and p.suffix != ".lock")
    assert len(generations) >= 5, "the rotators hardly rotated: the race was not run"
    seen: dict[bytes, str] = {}
    for path in generations:
        data = path.read_bytes()
        assert data.endswith(b"\n"), path
        for line in data.split(b"\n")[:-1]:
            assert line.startswith(b"2026-12-02T20:00:00\tw") and line.count(b"\t") == 4, line
            assert line not in seen, (line, path.name, seen.get(line))
            seen[line] = path.name
    wanted = {
        f"2026-12-02T20:00:00\tw{who}\ttl\tsent\tline {n} of writer {who} {'x' * (n % 97)}".encode()
        for who in range(WRITERS)
        for n in range(count)
    }
    assert set(seen) == wanted
    items = list(logread.read_all(log))  # the log's reader: every generation, oldest first
    assert len(items) == WRITERS * count
    for who in range(WRITERS):  # each writer's lines in its own order across the generations
        mine = [it.message for _, it in items if isinstance(it, Record) and it.sender == f"w{who}".encode()]
        assert [int(m.split(b" ")[1]) for m in mine] == list(range(count))


def test_upkeep_follows_the_team_file(tmp_path: Path) -> None:
    team_file = tmp_path / "team.toml"
    team_file.write_text('name = "t"\nlog_max_size = "64K"\nlog_keep = 2\n[[seat]]\nrole = "tl"\nsession = "t-tl"\n')
    team = teamfile.load(team_file)
    assert (team.log_max_size, team.log_keep) == (65536, 2)
    team.state_dir.mkdir(parents=True, mode=0o700)
    assert upkeep.upkeep(team) == []
    for _ in range(4):
        team.log_path.write_bytes(b"y\n" * 40_000)
        (team.state_dir / "say-refusals.log").write_bytes(b"r\n" * 40_000)
        assert upkeep.upkeep(team) == ["messages.log", "say-refusals.log"]
    assert names(team.state_dir) == sorted(
        [f"{n}{g}" for n in ("messages.log", "say-refusals.log") for g in (".1", ".2", ".lock")]
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [("log_max_size = 100", "at least 64K"), ('log_max_size = "lots"', "at least 64K"), ("log_keep = 0", "1 to 99")],
)
def test_bad_rotation_keys_are_refused(tmp_path: Path, text: str, why: str) -> None:
    team_file = tmp_path / "team.toml"
    team_file.write_text(f'name = "t"\n{text}\n[[seat]]\nrole = "tl"\nsession = "t-tl"\n')
    with pytest.raises(TeamFileError, match=why):
        teamfile.load(team_file)


def _line(at: float, message: str) -> bytes:
    from fabrikito.log.msglog import Outcome, format_line

    return format_line(at, "em", "tl", Outcome.SENT, message)


def test_the_watch_view_and_qualify_read_the_log_across_its_generations(tmp_path: Path) -> None:
    """Right after a rotation messages.log holds few lines: the LOG of fabrikito watch shows the last ones
    from messages.log.1 too, and qualify's check of the log sees every generation."""
    from fabrikito.qualify import messaging
    from fabrikito.watch import layout

    state = tmp_path / ".state" / "t"
    state.mkdir(parents=True)
    log = state / "messages.log"
    t0 = time.time()
    log.write_bytes(b"".join(_line(t0 + i, f"old {i}") for i in range(400)))
    assert rotate.rotate(log, max_size=1, keep=3)
    log.write_bytes(_line(t0 + 400, "new"))
    shown = layout.log_tail(log, 5)
    assert len(shown) == 5 and all("em -> tl  sent" in row for row in shown)
    assert layout.log_tail(state / "missing.log", 5) == []  # a missing log shows nothing
    one = state / "one.log"  # the same lines in a single file read the same
    one.write_bytes(rotate.read_all(log))
    assert layout.log_tail(one, 5) == shown
    assert layout.log_tail(log, 1000) == layout.log_tail(one, 1000)
    assert len(layout.log_tail(log, 1000)) > 100  # its last 16 KiB, across both files

    class _Team:
        state_dir = state

    rows = messaging._log_rows(_Team())  # type: ignore[arg-type]
    assert len(rows) == 401 and rows[-1][-1] == "new" and rows[0][-1] == "old 0"


def test_follow_goes_on_across_a_rotation_and_misses_no_late_writer(tmp_path: Path) -> None:
    """log --follow: the rotated file read to its end (a writer that opened it before the rename lands
    there), then the new messages.log from its top; every line once, in order."""
    log = tmp_path / "messages.log"
    t0 = time.time()
    log.write_bytes(_line(t0, "before"))
    lines = logread.follow(log, interval=0.01, opened=logread.open_end(log))
    with log.open("ab") as handle:
        handle.write(_line(t0 + 1, "a"))
    assert next(lines) == (None, parse_line(_line(t0 + 1, "a")))
    late = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(late, _line(t0 + 2, "b"))
        assert rotate.rotate(log, max_size=1, keep=2)
        os.write(late, _line(t0 + 3, "late"))  # opened before the rename: lands in messages.log.1
    finally:
        os.close(late)
    assert logline.append_hook(log, _line(t0 + 4, "c"))  # the next writer makes a new messages.log
    got = [next(lines) for _ in range(3)]
    assert got == [(None, parse_line(_line(t0 + n, m))) for n, m in ((2, "b"), (3, "late"), (4, "c"))]
    assert logline.append_hook(log, _line(t0 + 5, "d"))
    assert next(lines) == (None, parse_line(_line(t0 + 5, "d")))
