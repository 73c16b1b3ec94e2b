"""Every qualified release by its evidence, the dialects' rules, and the user's own qualifications.

The captures in ``tests/fixtures/releases/`` were taken from each release's
real binary by ``scripts/qualify_releases.py``; here every one is read again
with its release's dialect and must be read as the catalogue expects.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from fabrikito.qualify import catalogue, corpus
from fabrikito.qualify.capture import Capture, text_of
from fabrikito.screen import FailClosedRecogniser, ScreenState, qualified, recogniser_for, releases

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "releases"
MANIFESTS = corpus.manifests(FIXTURES)
QUALIFIED = [m for m in MANIFESTS if m.qualified]
CAPTURES = [(m.release, m.dialect, name, key) for m in QUALIFIED for name, key in sorted(m.captures.items())]


def load(release: str, name: str, key: str) -> Capture:
    return corpus.load_capture(FIXTURES, name, key, release)


def test_the_table_is_exactly_the_releases_with_evidence() -> None:
    assert {m.release: m.dialect for m in QUALIFIED} == dict(qualified.CLAUDE)
    assert "2.1.316" in qualified.CLAUDE
    assert all(m.captures for m in QUALIFIED)


@pytest.mark.parametrize(("release", "dialect", "name", "key"), CAPTURES, ids=[f"{c[0]}-{c[2]}" for c in CAPTURES])
def test_every_stored_capture_is_read_as_expected_by_its_releases_dialect(
    release: str, dialect: str, name: str, key: str
) -> None:
    capture = load(release, name, key)
    snap = capture.snapshot()
    expected = catalogue.expectation(capture.case, snap.width, snap.height)
    assert expected is not None, capture.case
    recogniser = recogniser_for("claude", release)
    assert getattr(recogniser, "dialect", None) == dialect
    assert catalogue.judge(expected, recogniser.recognise(snap), recogniser) == []


def test_each_later_dialect_is_needed_by_some_release() -> None:
    """A dialect exists because a release draws something its predecessor misreads."""
    names = releases.dialects()
    for older, newer in itertools.pairwise(names):
        users = [m for m in QUALIFIED if m.dialect == newer]
        assert users, f"no qualified release speaks {newer}"
        misread = [
            name
            for m in users
            for name, key in m.captures.items()
            if (cap := load(m.release, name, key))
            and (exp := catalogue.expectation(cap.case, cap.snapshot().width, cap.snapshot().height)) is not None
            and catalogue.judge(
                exp, releases.make(older, m.release).recognise(cap.snapshot()), releases.make(older, m.release)
            )
        ]
        assert misread, f"{newer} reads nothing differently from {older}"


def test_a_screen_drawn_alike_by_several_releases_is_stored_once() -> None:
    keys = [key for m in MANIFESTS for key in m.captures.values()]
    stored = {p.stem for p in (FIXTURES / "screens").glob("*.ansi")}
    assert stored == set(keys)  # nothing stored that no manifest names, nothing named that is missing
    assert len(stored) < len(keys)  # and some screens are shared


# -- dialect rules on synthetic variations of real captures ----------------------------------


def _scrolled_box_capture() -> Capture:
    for m in QUALIFIED:
        if m.dialect == "claude-2.1.331" and "fullscreen-120x40-tall-box" in m.captures:
            return load(m.release, "fullscreen-120x40-tall-box", m.captures["fullscreen-120x40-tall-box"])
    pytest.fail("no 2.1.331-dialect fullscreen tall box in the corpus")


def test_a_scrolled_fullscreen_box_is_full_with_its_top_out_of_view() -> None:
    cap = _scrolled_box_capture()
    assert "↑" in cap.text
    reading = releases.make("claude-2.1.331", "2.1.332").recognise(cap.snapshot())
    assert reading.state is ScreenState.BOX_TEXT and reading.full and not reading.top_visible and reading.ends_screen
    assert releases.make("claude-2.1.316", "2.1.316").recognise(cap.snapshot()).state is ScreenState.NOT_RECOGNISED


def test_rows_hidden_below_the_box_mean_its_end_is_not_on_the_screen() -> None:
    cap = _scrolled_box_capture()
    lines = cap.ansi.split("\n")
    width = cap.snapshot().width
    bottom = max(i for i, line in enumerate(lines) if "─" * 20 in line and "more" not in line)
    marker = " ↓ 3 more "
    lines[bottom] = (
        "\x1b[38;5;244m───\x1b[38;5;246m" + marker + "\x1b[38;5;244m" + "─" * (width - 3 - len(marker)) + "\x1b[39m"
    )
    snap = Capture(cap.name, cap.case, cap.renderer, cap.text, "\n".join(lines), cap.meta).snapshot()
    rec = releases.make("claude-2.1.331", "2.1.332")
    reading = rec.recognise(snap)
    assert reading.state is ScreenState.BOX_TEXT and not reading.ends_screen
    assert not rec.check_after_paste(reading, "", text_of(2400))  # no Enter: the end is not visible
    # A marker in another colour is not Claude Code's: the box is not recognised at all.
    lines[bottom] = lines[bottom].replace("\x1b[38;5;246m", "\x1b[38;5;244m")
    other = Capture(cap.name, cap.case, cap.renderer, cap.text, "\n".join(lines), cap.meta).snapshot()
    assert rec.recognise(other).state is ScreenState.NOT_RECOGNISED


# -- the user's own qualifications -----------------------------------------------------------


def _record(tmp_path: Path, binary: Path, release: str) -> dict[str, str]:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}
    st = binary.stat()
    entry = releases.LocalQualification(
        agent="claude",
        release=release,
        dialect="claude-2.1.331",
        sha256=releases.file_sha256(str(binary)),
        binary=str(binary),
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        date="2026-12-01T10:00:00",
    )
    path = releases.record_local(entry, env)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    return env


def test_a_local_qualification_counts_for_that_binary_only(tmp_path: Path) -> None:
    binary = tmp_path / "claude.exe"
    binary.write_bytes(b"the qualified build" * 100)
    env = _record(tmp_path, binary, "2.1.400")
    found = releases.lookup("claude", "2.1.400", str(binary), env)
    assert found is not None and found.dialect == "claude-2.1.331" and found.source.startswith("qualified here on")
    copy = tmp_path / "copy.exe"
    copy.write_bytes(binary.read_bytes())
    assert releases.lookup("claude", "2.1.400", str(copy), env) is not None  # the same bytes elsewhere: by sha256
    other = tmp_path / "other.exe"
    other.write_bytes(b"another build of it" * 100)  # same size, other bytes
    assert releases.lookup("claude", "2.1.400", str(other), env) is None
    assert releases.lookup("claude", "2.1.401", str(binary), env) is None  # another release
    assert releases.lookup("claude", "2.1.400", None, env) is None  # the binary unknown: not recognised


def test_a_damaged_record_file_recognises_nothing_and_is_replaced(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}
    path = releases.local_file(env)
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text("{not json", encoding="utf-8")
    assert releases.read_local(env) == []
    binary = tmp_path / "claude.exe"
    binary.write_bytes(b"x" * 10)
    _record(tmp_path, binary, "2.1.400")
    assert [q.release for q in releases.read_local(env)] == ["2.1.400"]


def test_the_record_is_not_written_through_a_link(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}
    path = releases.local_file(env)
    path.parent.mkdir(parents=True, mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("keep", encoding="utf-8")
    os.symlink(target, path)
    binary = tmp_path / "claude.exe"
    binary.write_bytes(b"x" * 10)
    with pytest.raises(Exception, match="link"):
        _record(tmp_path, binary, "2.1.400")
    assert target.read_text(encoding="utf-8") == "keep"


def test_an_unqualified_release_fails_closed_and_says_what_to_do() -> None:
    rec = recogniser_for("claude", "2.1.999")
    assert isinstance(rec, FailClosedRecogniser)
    assert "run `fabrikito qualify`" in rec.reason
