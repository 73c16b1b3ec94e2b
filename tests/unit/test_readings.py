"""Readings kept for the next look: an unchanged screen is read once, a changed recogniser reads it again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.screen import (
    BoxReading,
    FailClosedRecogniser,
    PaneSnapshot,
    ScreenState,
    ansi,
    readings,
    recogniser_for,
    releases,
)
from fabrikito.screen.claude_2_1_316 import Claude21316
from fabrikito.screen.claude_2_1_331 import Claude21331

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "2.1.316"


def screen(stem: str) -> PaneSnapshot:
    meta = json.loads((SCREENS / f"{stem}.json").read_text(encoding="utf-8"))
    return PaneSnapshot(
        ansi=(SCREENS / f"{stem}.ansi").read_text(encoding="utf-8"),
        width=int(meta["pane_width"]),
        height=int(meta["pane_height"]),
        alternate_on=str(meta["alternate_on"]) == "1",
        in_mode=str(meta["pane_in_mode"]) == "1",
        cursor_x=int(meta["cursor_x"]),
        cursor_y=int(meta["cursor_y"]),
    )


class Counting(Claude21316):
    """2.1.316's dialect, counting the screens it reads."""

    def __init__(self, version: str = "2.1.316") -> None:
        super().__init__(version)
        self.reads = 0

    def recognise(self, snapshot: PaneSnapshot) -> BoxReading:
        self.reads += 1
        return super().recognise(snapshot)


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    readings.forget()
    yield
    readings.forget()


def test_an_unchanged_screen_is_read_once_and_read_as_the_recogniser_reads_it() -> None:
    reader = Counting()
    idle = screen("inline-120x40-after-turn")
    first = readings.read(reader, idle)
    again = readings.read(Counting(), screen("inline-120x40-after-turn"))  # a new capture of the same screen
    assert first == again == Claude21316().recognise(idle) and first.state is ScreenState.READY
    assert reader.reads == 1
    busy = screen("inline-120x40-busy")
    assert readings.read(reader, busy).busy and reader.reads == 2
    # The same text at another cursor or size is another snapshot, read again.
    moved = PaneSnapshot(idle.ansi, idle.width, idle.height, idle.alternate_on, idle.in_mode, 0, 0)
    readings.read(reader, moved)
    assert reader.reads == 3 and readings.kept() == 3


def test_another_release_or_dialect_or_reason_reads_the_screen_again() -> None:
    idle = screen("inline-120x40-after-turn")
    keys = {
        Claude21316("2.1.316").key,
        Claude21316("2.1.320").key,
        Claude21331("2.1.331").key,
        FailClosedRecogniser("claude", "2.1.999", "not qualified").key,
        FailClosedRecogniser("claude", "2.1.999", "cannot tell").key,
    }
    assert len(keys) == 5
    assert readings.read(FailClosedRecogniser("claude", "2.1.999", "no"), idle).state is ScreenState.NOT_RECOGNISED
    assert readings.read(Claude21331("2.1.999"), idle).state is ScreenState.READY


def test_a_release_qualified_since_the_last_look_is_read_by_its_dialect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    binary = tmp_path / "claude.exe"
    binary.write_bytes(b"a build of 2.1.400" * 100)
    idle = screen("inline-120x40-after-turn")
    before = readings.read(recogniser_for("claude", "2.1.400", exe=str(binary)), idle)
    assert before.state is ScreenState.NOT_RECOGNISED and "fabrikito qualify" in before.reason
    st = binary.stat()
    releases.record_local(
        releases.LocalQualification(
            agent="claude", release="2.1.400", dialect="claude-2.1.331", sha256=releases.file_sha256(str(binary)),
            binary=str(binary), size=st.st_size, mtime_ns=st.st_mtime_ns, date="2026-12-04T10:00:00",
        )
    )  # fmt: skip
    after = readings.read(recogniser_for("claude", "2.1.400", exe=str(binary)), idle)
    assert after.state is ScreenState.READY, after


def test_at_most_the_limit_is_kept_the_least_recently_used_dropped_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readings, "LIMIT", 3)
    reader = Counting()
    base = screen("inline-120x40-after-turn")
    shots = [PaneSnapshot(base.ansi, base.width, base.height, False, False, x, 0) for x in range(4)]
    for shot in shots[:3]:
        readings.read(reader, shot)
    readings.read(reader, shots[0])  # used again: now the most recent
    readings.read(reader, shots[3])  # the fourth: shots[1] goes
    assert readings.kept() == 3 and reader.reads == 4
    readings.read(reader, shots[0])
    readings.read(reader, shots[2])
    assert reader.reads == 4
    readings.read(reader, shots[1])
    assert reader.reads == 5


def test_a_plain_text_is_kept_as_readings_are() -> None:
    idle = screen("inline-120x40-after-turn")
    text = readings.plain(idle.ansi)
    assert text == ansi.plain(idle.ansi) and "❯" in text
    assert readings.plain(idle.ansi) is text  # kept: the same string, not made again
