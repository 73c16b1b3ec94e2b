"""Codex CLI and Gemini CLI screens: the stored evidence of each qualified release, the research captures,
the paste placeholders, and variations that must fail closed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.unit import corpus as shared_corpus

from fabrikito.qualify import catalogue, corpus, others
from fabrikito.qualify.capture import LABEL, Capture, text_of
from fabrikito.screen import FailClosedRecogniser, PaneSnapshot, ScreenState, qualified, recogniser_for, releases
from fabrikito.screen.codex_0_171 import Codex0171
from fabrikito.screen.gemini_0_61 import Gemini061

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "releases"
MANIFESTS = {agent: corpus.manifests(FIXTURES / agent) for agent in corpus.OTHER_AGENTS}
CAPTURES = [
    (agent, m.release, m.dialect, name, key)
    for agent, found in MANIFESTS.items()
    for m in found
    if m.qualified
    for name, key in sorted(m.captures.items())
]
READY = ScreenState.READY
BOX_TEXT = ScreenState.BOX_TEXT
DIALOG = ScreenState.DIALOG
NOT_RECOGNISED = ScreenState.NOT_RECOGNISED


def load(agent: str, release: str, name: str) -> Capture:
    (m,) = [m for m in MANIFESTS[agent] if m.release == release]
    return corpus.load_capture(FIXTURES / agent, name, m.captures[name], release)


def snap(ansi: str, *, cursor: tuple[int, int] = (0, 0), alternate: bool = False, mode: bool = False) -> PaneSnapshot:
    return PaneSnapshot(
        ansi=ansi, width=120, height=40, alternate_on=alternate, in_mode=mode, cursor_x=cursor[0], cursor_y=cursor[1]
    )


# -- the evidence -------------------------------------------------------------------------------------


def test_the_tables_are_exactly_the_releases_with_evidence() -> None:
    assert {m.release: m.dialect for m in MANIFESTS["codex"] if m.qualified} == dict(qualified.CODEX)
    assert {m.release: m.dialect for m in MANIFESTS["gemini"] if m.qualified} == dict(qualified.GEMINI)
    assert qualified.CODEX["0.171.0"] == "codex-0.171" and qualified.GEMINI["0.61.0"] == "gemini-0.61"
    for agent, found in MANIFESTS.items():
        keys = {key for m in found for key in m.captures.values()}
        assert {p.stem for p in (FIXTURES / agent / "screens").glob("*.ansi")} == keys, agent


@pytest.mark.parametrize(
    ("agent", "release", "dialect", "name", "key"), CAPTURES, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CAPTURES]
)
def test_every_stored_capture_is_read_as_its_catalogue_expects(
    agent: str, release: str, dialect: str, name: str, key: str
) -> None:
    capture = corpus.load_capture(FIXTURES / agent, name, key, release)
    expected = others.expectation(agent, capture.case)
    assert expected is not None, capture.case
    recogniser = recogniser_for(agent, release)
    assert getattr(recogniser, "dialect", None) == dialect
    assert catalogue.judge(expected, recogniser.recognise(capture.snapshot()), recogniser) == []


def test_every_state_of_the_catalogue_has_evidence() -> None:
    for agent in corpus.OTHER_AGENTS:
        wanted = {name for case in others.cases_for(agent) for name in case.expects}
        (m,) = MANIFESTS[agent]
        assert {name.split("-", 2)[2] for name in m.captures} == wanted, agent


def test_a_busy_screen_is_never_typable() -> None:
    """Ready, box text and the checks say and flush apply all refuse every busy capture."""
    for agent in corpus.OTHER_AGENTS:
        (m,) = MANIFESTS[agent]
        recogniser = recogniser_for(agent, m.release)
        for name in [n for n in m.captures if "busy" in n]:
            reading = recogniser.recognise(load(agent, m.release, name).snapshot())
            assert reading.busy and reading.state is NOT_RECOGNISED, (name, reading)
            assert not recogniser.check_label(reading, LABEL) and not recogniser.check_after_paste(reading, "", "x")
            assert not recogniser.flush_matches(reading, "", reading.box_text or "x")


def test_unknown_releases_and_agents_fail_closed() -> None:
    unknown = recogniser_for("codex", "0.999.0")
    assert isinstance(unknown, FailClosedRecogniser) and "Codex CLI 0.999.0 is not a release" in unknown.reason
    no_release = recogniser_for("gemini", None)
    assert isinstance(no_release, FailClosedRecogniser) and "Gemini CLI" in no_release.reason
    assert isinstance(recogniser_for("aider", "1.0"), FailClosedRecogniser)
    assert releases.dialects("codex") == ["codex-0.171"] and releases.dialects("gemini") == ["gemini-0.61"]


# -- the research captures (no pane fields were kept: 120x40, the cursor given here) ------------------------

SHARED_STATES = {
    "01_codex_ready_empty": (READY, ""),
    "02_codex_warning_f2": (DIALOG, ""),
    "03_codex_typed_text": (BOX_TEXT, "hello typed text"),
    "04_codex_pasted_multiline": (BOX_TEXT, None),
    "05_codex_after_reply": (READY, ""),
    "06_codex_busy_working": (NOT_RECOGNISED, ""),
    "07_codex_approval_dialog": (DIALOG, ""),
    "08_codex_after_tool_reply": (READY, ""),
    "09_codex_large_paste_placeholder": (BOX_TEXT, "[Pasted Content 3039 chars]"),
    "10_codex_busy_with_text_in_box": (NOT_RECOGNISED, "second message typed while busy"),
    "11_codex_busy_message_queued": (NOT_RECOGNISED, ""),
    "12_codex_nodaemon_ready_empty": (READY, ""),
    "13_codex_trust_prompt_untrusted_dir": (DIALOG, ""),
    "20_gemini_startup_default": (DIALOG, ""),
    "21_gemini_ready_empty": (READY, ""),
    "22_gemini_pasted_multiline": (BOX_TEXT, None),
    "23_gemini_busy_thinking": (NOT_RECOGNISED, ""),
    "24_gemini_after_reply": (READY, ""),
    "25_gemini_approval_dialog": (DIALOG, ""),
    "26_gemini_after_tool_reply": (READY, ""),
    "27_gemini_large_paste": (BOX_TEXT, "[Pasted Text: 40 lines]"),
}
BUSY_SHARED = {"06_codex_busy_working", "10_codex_busy_with_text_in_box", "11_codex_busy_message_queued"}


def _shared(name: str) -> tuple[str, str]:
    agent = "codex" if "_codex_" in name else "gemini"
    path = shared_corpus.shared_dir("other-agents", "captures", f"{name}.ansi.txt")
    return agent, path.read_text(encoding="utf-8")


def _prompt_cell(agent: str, ansi: str) -> tuple[int, int]:
    """Where the cursor sits in an empty box: after ``› `` (Codex) or on the cell after `` > `` (Gemini)."""
    plain = [re.sub(r"\x1b\[[0-9;:]*m", "", line) for line in ansi.split("\n")]
    mark = "› Ask Codex" if agent == "codex" else " >   Type your message"
    return (2 if agent == "codex" else 3), max(i for i, line in enumerate(plain) if line.startswith(mark))


@pytest.mark.parametrize("name", sorted(SHARED_STATES))
def test_the_research_captures(name: str) -> None:
    agent, ansi = _shared(name)
    state, box = SHARED_STATES[name]
    recogniser = Codex0171() if agent == "codex" else Gemini061()
    cursor = _prompt_cell(agent, ansi) if state is READY else (0, 0)
    reading = recogniser.recognise(snap(ansi, cursor=cursor, alternate=agent == "codex"))
    assert reading.state is state, reading.detail
    if box is not None:
        assert reading.box_text == box
    assert reading.busy == (name in BUSY_SHARED or name == "23_gemini_busy_thinking")
    if state is READY:  # the same screen with the cursor anywhere else is not ready
        moved = recogniser.recognise(snap(ansi, cursor=(cursor[0] + 5, cursor[1]), alternate=agent == "codex"))
        assert moved.state is NOT_RECOGNISED
        in_copy_mode = recogniser.recognise(snap(ansi, cursor=cursor, alternate=agent == "codex", mode=True))
        assert in_copy_mode.state is ScreenState.COPY_MODE


# -- paste placeholders (measured: see docs/screen-recognition.md) ------------------------------------------


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("a" * 1000, None),
        ("a" * 1001, "[Pasted Content 1001 chars]"),
        ("é" * 1001, "[Pasted Content 1001 chars]"),  # code points, not bytes
        ("😀" * 600, None),  # code points, not UTF-16 units
        ("ab\n" * 333 + "ab", "[Pasted Content 1001 chars]"),
        ("\n".join(["line"] * 6), None),
    ],
)
def test_codex_collapses_a_paste_of_more_than_1000_code_points(message: str, shown: str | None) -> None:
    pattern = Codex0171().placeholder(message)
    assert (pattern is None) == (shown is None)
    if shown is not None:
        assert pattern is not None and re.fullmatch(pattern, "".join(shown.split()))


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("\n".join(["line"] * 5), None),
        ("\n".join(["line"] * 6), "[Pasted Text: 6 lines]"),
        ("\n".join(["line"] * 5) + "\n", "[Pasted Text: 6 lines]"),  # a trailing newline starts a 6th line
        ("x" * 500, None),
        ("x" * 501, "[Pasted Text: 501 chars]"),
        ("😀" * 251, "[Pasted Text: 502 chars]"),  # UTF-16 code units
        ("ab\n" * 333 + "ab", "[Pasted Text: 334 lines]"),  # lines win over characters
    ],
)
def test_gemini_collapses_more_than_5_lines_or_500_utf16_units(message: str, shown: str | None) -> None:
    pattern = Gemini061().placeholder(message)
    assert (pattern is None) == (shown is None)
    if shown is not None:
        assert pattern is not None and re.fullmatch(pattern, "".join(shown.split()))


def test_the_enter_rule_takes_only_the_placeholder_of_this_message() -> None:
    capture = load("codex", "0.171.0", "fullscreen-120x40-label-then-placeholder")
    recogniser = Codex0171()
    reading = recogniser.recognise(capture.snapshot())
    assert recogniser.check_after_paste(reading, LABEL, text_of(1001))
    assert not recogniser.check_after_paste(reading, LABEL, text_of(1002))  # another paste's placeholder
    assert not recogniser.check_after_paste(reading, LABEL, text_of(900))  # a paste that shows as itself
    assert recogniser.flush_matches(reading, LABEL, text_of(1001))
    assert not recogniser.flush_matches(reading, LABEL, text_of(1500))
    gemini = load("gemini", "0.61.0", "inline-120x40-label-then-placeholder")
    reading = Gemini061().recognise(gemini.snapshot())
    assert Gemini061().check_after_paste(reading, LABEL, others.COLLAPSES["gemini"])
    assert not Gemini061().check_after_paste(reading, LABEL, others.COLLAPSES["gemini"] + "\nseventh")


# -- variations of real screens that must fail closed -----------------------------------------------------


def _replace_row(ansi: str, row: int, new: str) -> str:
    lines = ansi.split("\n")
    lines[row] = new
    return "\n".join(lines)


def _codex_ready() -> tuple[str, tuple[int, int]]:
    capture = load("codex", "0.171.0", "fullscreen-120x40-after-turn")
    return capture.ansi, (int(str(capture.meta["cursor_x"])), int(str(capture.meta["cursor_y"])))


def test_codex_prompt_glyph_alone_is_not_the_composer() -> None:
    ansi, cursor = _codex_ready()
    row = cursor[1]
    # The same › row drawn as a dialog's chosen option (reverse video) or as a transcript echo (grey background).
    for drawn in ("\x1b[1;7m› 1. Yes, proceed (y)\x1b[0m", "\x1b[1;2;38;5;255;48;5;238m› \x1b[0mhello\x1b[49m"):
        reading = Codex0171().recognise(snap(_replace_row(ansi, row, drawn), cursor=cursor, alternate=True))
        assert reading.state not in (READY, BOX_TEXT), drawn


def test_codex_unknown_footer_or_text_under_the_composer_fails_closed() -> None:
    ansi, cursor = _codex_ready()
    for row, drawn in ((39, "\x1b[0m  something we never saw"), (cursor[1] + 1, "\x1b[0m  stray text under it")):
        reading = Codex0171().recognise(snap(_replace_row(ansi, row, drawn), cursor=cursor, alternate=True))
        assert reading.state is NOT_RECOGNISED, (row, reading.detail)


def test_codex_busy_signals() -> None:
    ansi, cursor = _codex_ready()
    lines = ansi.split("\n")
    worked = next(i for i, line in enumerate(lines) if "Worked for" in line)
    # A working line above the composer; the turn's end taken away (a reply still streaming).
    working = _replace_row(ansi, cursor[1] - 3, "• \x1b[2mWorking\x1b[0m (4s • \x1b[1mesc\x1b[0m to interrupt)")
    streaming = _replace_row(ansi, worked, "")
    for screen in (working, streaming):
        reading = Codex0171().recognise(snap(screen, cursor=cursor, alternate=True))
        assert reading.busy and reading.state is NOT_RECOGNISED, reading.detail


def test_codex_cannot_tell_with_nothing_but_reply_text_on_screen() -> None:
    ansi, cursor = _codex_ready()
    lines = ansi.split("\n")
    body = ["\x1b[2m• \x1b[0mreply text that scrolled its prompt away"] + ["  more reply text"] * (cursor[1] - 2)
    screen = "\n".join([*body, "", *lines[cursor[1] :]])
    reading = Codex0171().recognise(snap(screen, cursor=cursor, alternate=True))
    assert reading.busy and reading.state is NOT_RECOGNISED


def test_gemini_the_echo_box_alone_is_not_the_live_box() -> None:
    capture = load("gemini", "0.61.0", "inline-120x40-after-turn")
    lines = capture.ansi.split("\n")
    bottom = max(i for i, line in enumerate(lines) if "▀" in line)
    # Cut the screen after the transcript's echo box: no footer, no rule above it.
    echo_end = min(i for i, line in enumerate(lines) if "▀" in line)
    reading = Gemini061().recognise(snap("\n".join(lines[: echo_end + 1]), cursor=(3, 13)))
    assert reading.state is NOT_RECOGNISED
    # The live box without the rule over it.
    no_rule = "\n".join(line if "─" not in line else "" for line in lines)
    assert Gemini061().recognise(snap(no_rule, cursor=(3, bottom - 1))).state is NOT_RECOGNISED


def test_gemini_busy_status_on_an_empty_box() -> None:
    capture = load("gemini", "0.61.0", "inline-120x40-after-turn")
    lines = capture.ansi.split("\n")
    rule = max(i for i, line in enumerate(lines) if "────" in line)
    busy = _replace_row(capture.ansi, rule - 1, " ⠴ Thinking... (esc to cancel, 3s)")
    cursor = (int(str(capture.meta["cursor_x"])), int(str(capture.meta["cursor_y"])))
    reading = Gemini061().recognise(snap(busy, cursor=cursor))
    assert reading.busy and reading.state is NOT_RECOGNISED and reading.box_text == ""


def test_a_resumed_gemini_seat_shows_its_conversation_only_once_a_turn_is_drawn() -> None:
    """Resumed, Gemini CLI first draws its banner over an empty box that it then takes away while it loads
    the conversation (what is typed then is lost): the box is not ready for the restart notice until a turn
    is drawn over the rule, or a long reply has pushed it and the banner away."""
    gemini = Gemini061()
    fresh = load("gemini", "0.61.0", "inline-120x40-empty-box-fresh-start")
    assert gemini.recognise(fresh.snapshot()).state is READY
    assert not gemini.conversation_shown(fresh.snapshot())
    after = load("gemini", "0.61.0", "inline-120x40-after-turn")
    assert gemini.conversation_shown(after.snapshot())
    lines = after.ansi.split("\n")
    banner = [i for i, line in enumerate(after.text.split("\n")) if "Gemini CLI v" in line]
    assert banner
    scrolled = _replace_row(after.ansi, banner[0], " the last line of a long reply")
    assert gemini.conversation_shown(snap(scrolled))
    rule = max(i for i, line in enumerate(lines) if "────" in line)
    no_turn = "\n".join(line if i >= rule or i in banner else "" for i, line in enumerate(lines))
    assert not gemini.conversation_shown(snap(no_turn))
    box_only = "\n".join(line if i >= rule else "" for i, line in enumerate(lines))  # drawn before its banner
    assert gemini.recognise(snap(box_only, cursor=(3, 22))).state is READY
    assert not gemini.conversation_shown(snap(box_only))
    a_few = "\n".join(
        line if i >= rule else (" Tips for getting started:" if i in (3, 5) else "") for i, line in enumerate(lines)
    )
    assert not gemini.conversation_shown(snap(a_few))  # a partial frame, neither banner nor a turn
    long_reply = "\n".join(
        line if i >= rule else (f"  line {i} of a long reply" if i > 2 else "") for i, line in enumerate(lines)
    )
    assert gemini.conversation_shown(snap(long_reply))
    assert recogniser_for("codex", "0.171.0").conversation_shown(fresh.snapshot())  # loads before its box


# -- other pane sizes (scripts/capture_screens.py --agent ... --sizes 220x50,80x24,60x20) ---------------------

SIZED = sorted(
    (agent, path)
    for agent, release in (("codex", "0.171.0"), ("gemini", "0.61.0"))
    for path in (FIXTURES.parent / "screens" / f"{agent}-{release}").glob("*.json")
)


@pytest.mark.parametrize(("agent", "path"), SIZED, ids=[p.stem for _, p in SIZED])
def test_captures_at_other_sizes_are_read_as_expected(agent: str, path: Path) -> None:
    """At 80 columns Codex wraps its model line and cuts its hint row, and a long text pushes its footer
    out; at 220 the rows are wider: every state still reads as its catalogue expects."""
    meta = json.loads(path.read_text(encoding="utf-8"))
    ansi = path.with_suffix(".ansi").read_text(encoding="utf-8")
    capture = Capture(path.stem, str(meta["case"]), str(meta["renderer"]), "", ansi, meta)
    expected = others.expectation(agent, capture.case)
    assert expected is not None, capture.case
    recogniser = recogniser_for(agent, str(meta["release"]))
    assert catalogue.judge(expected, recogniser.recognise(capture.snapshot()), recogniser) == []
