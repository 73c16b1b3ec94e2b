"""Screen recognition: the ANSI parser, the checks say and flush use, the project's own
captured screens (``tests/fixtures/screens/2.1.316``) and synthetic negatives built from them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fabrikito.base.values import replace
from fabrikito.screen import (
    PLACEHOLDER_RE,
    BoxReading,
    FailClosedRecogniser,
    PaneSnapshot,
    ScreenState,
    Verdict,
    check_after_paste,
    check_label,
    flush_matches,
    known_versions,
    may_collapse,
    normalise,
    recogniser_for,
)
from fabrikito.screen.ansi import PLAIN, Style, apply_sgr, parse, plain
from fabrikito.screen.claude_2_1_316 import Claude21316, fullscreen_max_rows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "2.1.316"
LABEL = "[from em] "
WORDS = "the quick brown fox jumps over the lazy dog while the build runs and the tests keep passing one after another "

READY = ScreenState.READY
BOX_TEXT = ScreenState.BOX_TEXT
DIALOG = ScreenState.DIALOG
COPY_MODE = ScreenState.COPY_MODE
NOT_RECOGNISED = ScreenState.NOT_RECOGNISED


def text_of(length: int) -> str:
    """The capture script's text of ``length`` characters (scripts/capture_screens.py)."""
    body = (WORDS * (length // len(WORDS) + 2))[: max(0, length - 4)]
    return (body + "#END")[:length]


# -- the ANSI parser -----------------------------------------------------------------------------


def test_sgr_basics() -> None:
    rows = parse("\x1b[38;5;244m──\x1b[39m \x1b[1mbold\x1b[22m \x1b[2mdim\x1b[0m\n\x1b[7mX\x1b[27my\n")
    assert [r.text for r in rows] == ["── bold dim", "Xy"]
    first = rows[0].runs
    assert first[0].text == "──" and first[0].style.fg == 244
    assert [run.text for run in first] == ["──", " ", "bold", " ", "dim"]
    assert first[2].style.bold and not first[2].style.dim
    assert first[4].style.dim
    assert rows[1].runs[0].style.inverse and not rows[1].runs[1].style.inverse


def test_style_carries_across_lines_as_tmux_writes_it() -> None:
    rows = parse("\x1b[38;5;246mgrey\nstill grey\x1b[39m plain\n")
    assert rows[1].runs[0].style.fg == 246
    assert rows[1].runs[1].style.fg is None


@pytest.mark.parametrize(
    ("body", "style"),
    [
        ("38;5;153", Style(fg=153)),
        ("48;5;237", Style(bg=237)),
        ("38;2;1;2;3", Style(fg=(1, 2, 3))),
        ("48;2;10;20;30", Style(bg=(10, 20, 30))),
        ("38:5:73", Style(fg=73)),
        ("38:2::1:2:3", Style(fg=(1, 2, 3))),
        ("31", Style(fg=1)),
        ("94", Style(fg=12)),
        ("42", Style(bg=2)),
        ("103", Style(bg=11)),
        ("0;2", Style(dim=True)),
        ("1;2;3;4;7", Style(bold=True, dim=True, italic=True, underline=True, inverse=True)),
        ("", PLAIN),
        ("38;5", PLAIN),  # cut short: ignored
        ("38;5;300", PLAIN),  # out of range: ignored
        ("x", PLAIN),  # malformed: ignored
        ("5;8;9;53", PLAIN),  # blink, hidden, strike, overline: not read
    ],
)
def test_sgr_parameters(body: str, style: Style) -> None:
    assert apply_sgr(PLAIN, body) == style


@pytest.mark.parametrize(
    ("reset", "left"),
    [
        ("0", PLAIN),
        ("22", Style(fg=1, bg=2, italic=True, inverse=True)),
        ("23", Style(fg=1, bg=2, bold=True, dim=True, inverse=True)),
        ("27", Style(fg=1, bg=2, bold=True, dim=True, italic=True)),
        ("39", Style(bg=2, bold=True, dim=True, italic=True, inverse=True)),
        ("49", Style(fg=1, bold=True, dim=True, italic=True, inverse=True)),
    ],
)
def test_sgr_resets(reset: str, left: Style) -> None:
    full = apply_sgr(PLAIN, "31;42;1;2;3;7")
    assert apply_sgr(full, reset) == left


def test_other_escapes_are_dropped() -> None:
    text = "a\x1b[2Kb\x1b]8;;https://x.test\x1b\\link\x1b]8;;\x07c\x1b(Bd\x1b7e\x07\x08f\x1b"
    assert plain(text) == "ablinkcdef"


def test_an_unterminated_escape_does_not_eat_the_next_row() -> None:
    assert [r.text for r in parse("ab\x1b[38;5\ncd\n")] == ["ab", "cd"]


def _render(segments: list[tuple[str, Style]]) -> str:
    out = []
    for text, style in segments:
        codes = ["0"]
        if style.bold:
            codes.append("1")
        if style.dim:
            codes.append("2")
        if style.italic:
            codes.append("3")
        if style.underline:
            codes.append("4")
        if style.inverse:
            codes.append("7")
        for base, color in ((38, style.fg), (48, style.bg)):
            if isinstance(color, int):
                codes.append(f"{base};5;{color}")
            elif color is not None:
                codes.append(f"{base};2;{color[0]};{color[1]};{color[2]}")
        out.append("\x1b[" + ";".join(codes) + "m" + text)
    return "".join(out)


colors = st.one_of(
    st.none(),
    st.integers(0, 255),
    st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)),
)
styles = st.builds(
    Style,
    fg=colors,
    bg=colors,
    bold=st.booleans(),
    dim=st.booleans(),
    italic=st.booleans(),
    underline=st.booleans(),
    inverse=st.booleans(),
)
texts = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=12)


@given(st.lists(st.tuples(texts, styles), max_size=8))
def test_plain_text_and_styles_round_trip(segments: list[tuple[str, Style]]) -> None:
    (row,) = parse(_render(segments) + "\n") or (None,)
    expected_text = "".join(text for text, _ in segments)
    if row is None:
        assert expected_text == ""
        return
    assert row.text == expected_text
    expected = [style for text, style in segments for _ in text]
    assert [row.style_at(i) for i in range(len(expected_text))] == expected
    for a, b in zip(row.runs, row.runs[1:], strict=False):
        assert a.style != b.style  # adjacent runs are merged


@given(st.lists(st.lists(st.tuples(texts, styles), max_size=4), min_size=1, max_size=5))
def test_rows_round_trip(lines: list[list[tuple[str, Style]]]) -> None:
    capture = "".join(_render(segments) + "\n" for segments in lines)
    assert [r.text for r in parse(capture)] == ["".join(t for t, _ in segments) for segments in lines]


@given(st.text(max_size=60))
def test_the_parser_never_raises(text: str) -> None:
    rows = parse(text)
    assert all("\x1b" not in r.text for r in rows)


# -- the checks ------------------------------------------------------------------------------------


def box(text: str, **kw: object) -> BoxReading:
    fields: dict[str, object] = {
        "state": BOX_TEXT if normalise(text) else READY,
        "renderer": "inline",
        "box_text": text,
        "box_rows": text.count("\n") + 1,
        "top_visible": True,
        "max_rows": 21,
        "full": False,
        "ends_screen": True,
    }
    fields.update(kw)
    return BoxReading(**fields)  # type: ignore[arg-type]


def test_normalise() -> None:
    assert normalise(" a b\n  c\u00a0d\te ") == "abcde"
    assert normalise("") == ""


@pytest.mark.parametrize(
    ("text", "n", "k"),
    [("[Pasted text #1]", "1", None), ("[Pasted text #12 +3 lines]", "12", "3")],
)
def test_placeholder_re(text: str, n: str, k: str | None) -> None:
    m = PLACEHOLDER_RE.fullmatch(text)
    assert m is not None and m["n"] == n and m["k"] == k


@pytest.mark.parametrize("text", ["[Pasted text #0]", "[Pasted text]", "[Pasted text #1 +1 line]", "[pasted text #1]"])
def test_placeholder_re_rejects(text: str) -> None:
    assert PLACEHOLDER_RE.fullmatch(text) is None


def test_may_collapse() -> None:
    assert not may_collapse("x" * 800)
    assert may_collapse("x" * 801)
    assert may_collapse("é" * 801)
    assert not may_collapse("😀" * 400)
    assert may_collapse("😀" * 401)
    assert may_collapse("a\nb")
    assert not may_collapse("")


def test_enter_rule_accepts() -> None:
    assert check_after_paste(box("[from em] please review\nthe patch"), LABEL, "please review the patch").ok
    assert check_after_paste(box("[from em] [Pasted text #3 +2 lines]"), LABEL, "a\nb\nc").ok
    assert check_after_paste(box("[from em] [Pasted text #4]"), LABEL, "x" * 1000).ok
    tail = text_of(800)[-60:]
    assert check_after_paste(box(tail, full=True, top_visible=False), LABEL, text_of(800)).ok
    assert check_after_paste(box(tail, full=True, renderer="fullscreen", max_rows=3, box_rows=3), "", text_of(800)).ok


@pytest.mark.parametrize(
    ("reading", "message", "reason"),
    [
        (box("[from em] hi", ends_screen=False), "hi", "the screen no longer ends with the box"),
        (box("[from em] hi", state=DIALOG), "hi", "the screen no longer ends with the box"),
        (box("[from em] hi", state=NOT_RECOGNISED), "hi", "the screen no longer ends with the box"),
        (box("[from em] hi", state=COPY_MODE), "hi", "the screen no longer ends with the box"),
        (box("[from em] hi", dim_text="run the test suite"), "hi", "dim text was drawn next to the message"),
        (box("[from em] hi there"), "hi", "the box shows fewer rows than it can and not just the message"),
        (box("typed [from em] hi"), "hi", "the box shows fewer rows than it can and not just the message"),
        (box(""), "hi", "the box shows fewer rows than it can and not just the message"),
        (box("[from em] [Pasted text #1]"), "short", "the box shows fewer rows than it can and not just the message"),
        (
            box("[from em] [Pasted text #1] [Pasted text #2]"),
            "x" * 900,
            "the box shows fewer rows than it can and not just the message",
        ),
        (
            box("the end", full=True, top_visible=False),
            text_of(500) + " the end",
            "too little of the message's end is visible",
        ),
        (
            box(text_of(500)[-80:] + "x", full=True, top_visible=False),
            text_of(500),
            "the box does not end with the message",
        ),
    ],
)
def test_enter_rule_refuses(reading: BoxReading, message: str, reason: str) -> None:
    assert check_after_paste(reading, LABEL, message) == Verdict(False, reason)


def test_label_check() -> None:
    assert check_label(box("[from em]"), LABEL).ok
    assert not check_label(box("[from em] x"), LABEL).ok
    assert not check_label(box(""), LABEL).ok
    assert check_label(box("[from em]", dim_text="x"), LABEL).reason == "dim text was drawn next to the label"
    assert not check_label(box("[from em]", ends_screen=False), LABEL).ok
    assert not check_label(box("[from em]", top_visible=False, full=True), LABEL).ok


def test_flush_matches() -> None:
    body = "please review the patch"
    assert flush_matches(box("[from em]"), LABEL, body)
    assert flush_matches(box("[from em] please re"), LABEL, body)
    assert flush_matches(box("[from em] please\nreview the patch"), LABEL, body)
    assert flush_matches(box("[from em] [Pasted text #2]"), LABEL, "x" * 1000)
    assert not flush_matches(box("[from em] [Pasted text #2]"), LABEL, "")  # sec: only the label is kept
    assert flush_matches(box("[from em]"), LABEL, "")
    assert not flush_matches(box(""), LABEL, body)
    assert not flush_matches(box("[from em] please rex"), LABEL, body)
    assert not flush_matches(box("hello [from em]"), LABEL, body)
    assert not flush_matches(box("[from em]", dim_text="x"), LABEL, body)
    assert not flush_matches(box("[from em]", ends_screen=False), LABEL, body)
    assert not flush_matches(box("[from em]", state=DIALOG), LABEL, body)
    # A tall message say left: only its end shows in the full box, and say's own Enter rule decides.
    tall = text_of(300)
    assert flush_matches(box(tall[-100:], full=True, top_visible=False), LABEL, tall)
    assert not flush_matches(box(tall[-30:], full=True, top_visible=False), LABEL, tall)  # too little shows
    assert not flush_matches(box(tall[-100:] + " mine", full=True, top_visible=False), LABEL, tall)  # typed after
    assert not flush_matches(box(tall[-100:], full=True, top_visible=False), LABEL, "")  # sec: label only


def test_the_recogniser_methods_are_the_checks() -> None:
    rec = recogniser_for("claude", "2.1.316")
    reading = box("[from em] hi")
    assert rec.check_after_paste(reading, LABEL, "hi") == check_after_paste(reading, LABEL, "hi")
    assert rec.check_label(reading, LABEL) == check_label(reading, LABEL)
    assert rec.flush_matches(reading, LABEL, "hi") is flush_matches(reading, LABEL, "hi")


def test_registry() -> None:
    assert isinstance(recogniser_for("claude", "2.1.316"), Claude21316)
    assert "2.1.316" in known_versions()
    unknown_release = recogniser_for("claude", None)
    assert isinstance(unknown_release, FailClosedRecogniser)
    assert "cannot tell which Claude Code release" in unknown_release.reason
    unknown = recogniser_for("claude", "2.2.0")
    assert isinstance(unknown, FailClosedRecogniser)
    assert unknown.reason.startswith(
        "Claude Code 2.2.0 is not a release fabrikito has qualified: run `fabrikito qualify`"
    )
    other = recogniser_for("codex", "1.0")
    snap = PaneSnapshot("", 80, 24, False, False, 0, 0)
    reading = other.recognise(snap)
    assert reading.state is NOT_RECOGNISED and "Codex CLI 1.0 is not a release" in reading.reason


def test_fullscreen_formula() -> None:
    measured = {50: 20, 41: 15, 40: 15, 27: 8, 26: 8, 24: 7, 16: 3, 15: 3, 13: 3, 10: 3}
    assert {rows: fullscreen_max_rows(rows) for rows in measured} == measured


# -- the project's own captures --------------------------------------------------------------------


@dataclass(frozen=True)
class Capture:
    name: str
    renderer: str
    width: int
    height: int
    case: str
    snapshot: PaneSnapshot
    typed: int = 0  # tall-box: how many characters were typed (from the capture's note)


def _captures() -> list[Capture]:
    out = []
    for path in sorted(FIXTURES.glob("*.ansi")):
        m = re.fullmatch(r"(inline|fullscreen)-(\d+)x(\d+)-(.+)", path.stem)
        meta_path = path.with_suffix(".json")
        if m is None or not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        snap = PaneSnapshot(
            ansi=path.read_text(encoding="utf-8"),
            width=int(meta["pane_width"]),
            height=int(meta["pane_height"]),
            alternate_on=str(meta["alternate_on"]) == "1",
            in_mode=str(meta["pane_in_mode"]) == "1",
            cursor_x=int(meta["cursor_x"]),
            cursor_y=int(meta["cursor_y"]),
        )
        typed = re.match(r"(\d+) characters typed", str(meta.get("note", "")))
        out.append(Capture(path.stem, m[1], int(m[2]), int(m[3]), m[4], snap, int(typed[1]) if typed else 0))
    return out


CAPTURES = _captures()

# The expected state of each case the capture script writes.
FIXTURE_STATES: dict[str, ScreenState] = {
    "empty-box-fresh-start": READY,
    "after-turn": READY,
    "busy": READY,
    "dim-hint-fresh-start": READY,
    "dim-hint-suggestion": READY,
    "typed-short-unsubmitted": BOX_TEXT,
    "paste-len799": BOX_TEXT,
    "paste-len800": BOX_TEXT,
    "paste-len801": BOX_TEXT,
    "paste-2lines": BOX_TEXT,
    "paste-3lines": BOX_TEXT,
    "label-then-short": BOX_TEXT,
    "label-alone": BOX_TEXT,
    "label-then-3lines": BOX_TEXT,
    "label-then-len1000": BOX_TEXT,
    "tall-box": BOX_TEXT,
    "permission-prompt-bash": DIALOG,
    "held-dialog": DIALOG,
    "bypass-dialog": DIALOG,
    "copy-mode": COPY_MODE,
    "shell": NOT_RECOGNISED,
}
FIXTURE_DIALOGS = {
    "permission-prompt-bash": "permission prompt",
    "held-dialog": "held-message dialog",
    "bypass-dialog": "bypass permissions acceptance dialog",
}
FIXTURE_MESSAGES = {
    "paste-len799": ("", text_of(799)),
    "paste-len800": ("", text_of(800)),
    "paste-len801": ("", text_of(801)),
    "paste-2lines": ("", "line one\nline two"),
    "paste-3lines": ("", "line one\nline two\nline three"),
    "label-then-short": (LABEL, "please review the patch"),
    "label-then-3lines": (LABEL, "line one\nline two\nline three"),
    "label-then-len1000": (LABEL, text_of(1000)),
}

needs_fixtures = pytest.mark.skipif(not CAPTURES, reason=f"no captured screens in {FIXTURES} yet")


def cases(*names: str) -> list[Capture]:
    return [c for c in CAPTURES if c.case in names]


def cids(captures: list[Capture]) -> list[str]:
    return [c.name for c in captures]


def recognise(snap: PaneSnapshot) -> BoxReading:
    return recogniser_for("claude", "2.1.316").recognise(snap)


@needs_fixtures
def test_every_captured_case_has_an_expected_state() -> None:
    assert sorted({c.case for c in CAPTURES} - set(FIXTURE_STATES)) == []


@pytest.mark.parametrize("capture", CAPTURES, ids=cids(CAPTURES))
def test_captured_state(capture: Capture) -> None:
    reading = recognise(capture.snapshot)
    assert reading.state is FIXTURE_STATES[capture.case], reading.detail
    if reading.state is DIALOG:
        assert reading.detail == FIXTURE_DIALOGS[capture.case]
    if capture.case == "busy":
        assert reading.busy
    if capture.case in ("empty-box-fresh-start", "after-turn"):
        assert not reading.busy and reading.dim_text == ""
    if capture.case == "dim-hint-suggestion":
        assert reading.dim_text == "run the test suite"
    if capture.case == "copy-mode":
        assert normalise(reading.box_text) == "hellofromem"


MESSAGES = cases(*FIXTURE_MESSAGES)


@pytest.mark.parametrize("capture", MESSAGES, ids=cids(MESSAGES))
def test_captured_enter_rule(capture: Capture) -> None:
    label, message = FIXTURE_MESSAGES[capture.case]
    reading = recognise(capture.snapshot)
    verdict = check_after_paste(reading, label, message)
    if reading.ends_screen:
        assert verdict.ok, verdict.reason
    else:
        assert verdict.reason == "the screen no longer ends with the box"
    if "[Pasted text #" in reading.box_text:
        # any message that can collapse matches a placeholder; a short one never does
        assert not check_after_paste(reading, label, "short").ok
    else:
        assert not check_after_paste(reading, label, message + " and more").ok
    if reading.top_visible and not reading.full:
        assert not check_after_paste(reading, "[from qa] ", message).ok
    # else the label has scrolled out of view: say checks it alone before the message's paste


TALL = cases("tall-box")


@pytest.mark.parametrize("capture", TALL, ids=cids(TALL))
def test_captured_tall_box(capture: Capture) -> None:
    reading = recognise(capture.snapshot)
    typed = text_of(capture.typed)
    if "[...Truncated text #" in reading.box_text:
        # Claude Code elides the middle of very long input (seen at 220x50 with 10,900 characters):
        # the box does not hold the text, so Enter is refused
        assert not check_after_paste(reading, "", typed).ok
        return
    assert normalise(typed).endswith(normalise(reading.box_text))
    if capture.renderer == "fullscreen":
        assert reading.top_visible
        assert reading.max_rows == fullscreen_max_rows(capture.height)
    verdict = check_after_paste(reading, "", typed)
    if not reading.ends_screen:  # fullscreen, 10 rows: the bottom rule is off the screen
        assert verdict.reason == "the screen no longer ends with the box"
    elif reading.full or normalise(reading.box_text) == normalise(typed):
        assert verdict.ok, verdict.reason
    else:
        assert verdict.reason == "the box shows fewer rows than it can and not just the message"


# -- synthetic negatives, built from real screens ------------------------------------------------


def _one(case: str, renderer: str = "inline") -> Capture:
    found = [c for c in CAPTURES if c.case == case and c.renderer == renderer]
    if not found:
        pytest.skip(f"no captured {renderer} {case} screen yet")
    return max(found, key=lambda c: c.height)


def _lines(capture: Capture) -> list[str]:
    lines = capture.snapshot.ansi.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _with_lines(capture: Capture, lines: list[str], **kw: object) -> PaneSnapshot:
    return replace(capture.snapshot, ansi="\n".join(lines) + "\n", **kw)


def _prompt_row(capture: Capture) -> int:
    rows = parse(capture.snapshot.ansi)
    return max(i for i, r in enumerate(rows) if r.text.startswith("❯\u00a0"))


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_the_real_empty_box_is_ready(renderer: str) -> None:
    assert recognise(_one("empty-box-fresh-start", renderer).snapshot).state is READY


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_an_unknown_menu_in_place_of_the_box(renderer: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    lines = _lines(capture)
    top = _prompt_row(capture) - 1
    menu = [
        "\x1b[38;5;244m" + "─" * capture.width + "\x1b[39m",
        " \x1b[1mPick a colour\x1b[0m",
        " \x1b[38;5;153m❯\x1b[39m 1. Red",
        "   2. Blue",
        "",
        " \x1b[38;5;246mEnter to choose · Esc to cancel\x1b[39m",
    ]
    lines[top:] = (menu + [""] * len(lines))[: len(lines) - top]
    reading = recognise(_with_lines(capture, lines))
    assert reading.state is NOT_RECOGNISED
    assert reading.reason == "screen not recognised as ready"


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
@pytest.mark.parametrize(
    "extra",
    [
        "user@host:~/w$ ",
        "  \x1b[38;5;246msomething new under the box\x1b[39m",
        "\x1b[2mResume this session with:\x1b[0m",
        "  \x1b[38;5;153m❯ /exit\x1b[39m",
    ],
)
def test_a_box_followed_by_unknown_rows_is_not_ready(renderer: str, extra: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    lines = _lines(capture)
    if renderer == "inline":
        at = next(i for i in range(_prompt_row(capture) + 3, len(lines)) if plain(lines[i]) == "")
        lines[at] = extra
    else:  # the box ends the screen: push it up one row
        lines = [*lines[1:], extra]
    snap = _with_lines(capture, lines, cursor_y=capture.snapshot.cursor_y - (renderer == "fullscreen"))
    assert recognise(snap).state is not READY


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_an_empty_screen(renderer: str) -> None:
    for ansi in ("", "\n" * 24, "   \n" * 24):
        snap = PaneSnapshot(ansi, 80, 24, renderer == "fullscreen", False, 0, 0)
        reading = recognise(snap)
        assert reading.state is NOT_RECOGNISED
        assert reading.reason == "screen not recognised as ready"


def test_a_stale_box_above_a_shell_prompt() -> None:
    capture = _one("empty-box-fresh-start", "inline")
    lines = _lines(capture)
    footer = _prompt_row(capture) + 2
    lines[footer + 1] = "user@host:~/w$ "
    snap = _with_lines(capture, lines, cursor_x=15, cursor_y=footer + 1)
    assert recognise(snap).state is NOT_RECOGNISED
    snap = _with_lines(capture, lines)  # even with the cursor left in the box
    assert recognise(snap).state is NOT_RECOGNISED


def test_the_shell_capture() -> None:
    for capture in cases("shell"):
        assert recognise(capture.snapshot).state is NOT_RECOGNISED
        # whatever tmux says about the screen
        assert recognise(replace(capture.snapshot, alternate_on=True)).state is NOT_RECOGNISED


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_the_prompt_needs_its_no_break_space(renderer: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    lines = _lines(capture)
    p = _prompt_row(capture)
    lines[p] = lines[p].replace("❯\u00a0", "❯ ")
    assert recognise(_with_lines(capture, lines)).state is NOT_RECOGNISED


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_the_rules_need_their_colour(renderer: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    assert recognise(replace(capture.snapshot, ansi=capture.snapshot.ansi.replace("38;5;244", "38;5;245"))).state is (
        NOT_RECOGNISED
    )


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_the_rules_must_span_the_pane(renderer: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    assert recognise(replace(capture.snapshot, width=capture.width + 1)).state is NOT_RECOGNISED
    assert recognise(replace(capture.snapshot, width=capture.width - 1)).state is NOT_RECOGNISED


def test_more_rows_than_the_pane_has() -> None:
    capture = _one("empty-box-fresh-start", "inline")
    reading = recognise(replace(capture.snapshot, height=capture.height - 5))
    assert reading.state is NOT_RECOGNISED


def test_a_fullscreen_box_without_its_end_is_not_ready() -> None:
    capture = _one("empty-box-fresh-start", "fullscreen")
    lines = _lines(capture)
    p = _prompt_row(capture)
    lines = [""] * (len(lines) - p - 1) + lines[: p + 1]  # the bottom rule and footer pushed off
    snap = _with_lines(capture, lines, cursor_y=len(lines) - 1)
    assert recognise(snap).state is NOT_RECOGNISED


def test_an_inline_box_without_its_end_is_not_ready() -> None:
    capture = _one("empty-box-fresh-start", "inline")
    lines = _lines(capture)
    p = _prompt_row(capture)
    lines[p + 1 :] = [""] * (len(lines) - p - 1)
    assert recognise(_with_lines(capture, lines)).state is NOT_RECOGNISED


def test_dim_text_on_two_rows_is_not_ready() -> None:
    capture = _one("dim-hint-suggestion", "inline")
    lines = _lines(capture)
    p = _prompt_row(capture)
    lines.insert(p + 1, "  \x1b[2mmore of it\x1b[0m")
    lines.pop()
    reading = recognise(_with_lines(capture, lines))
    assert reading.state is BOX_TEXT
    assert not check_after_paste(reading, "", "").ok


def test_typed_text_next_to_a_dim_line() -> None:
    capture = _one("dim-hint-suggestion", "inline")
    lines = _lines(capture)
    p = _prompt_row(capture)
    lines[p] = lines[p].replace("❯\u00a0", "❯\u00a0typed ", 1)
    reading = recognise(_with_lines(capture, lines))
    assert reading.state is BOX_TEXT
    assert reading.box_text == "typed" and reading.dim_text
    assert check_after_paste(reading, "", "typed").reason == "dim text was drawn next to the message"


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_ready_only_with_the_cursor_parked_in_the_box(renderer: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    snap = capture.snapshot
    assert recognise(snap).state is READY
    assert recognise(replace(snap, cursor_x=snap.cursor_x + 1)).state is NOT_RECOGNISED
    assert recognise(replace(snap, cursor_y=snap.cursor_y - 1)).state is NOT_RECOGNISED


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_copy_mode_wins(renderer: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    reading = recognise(replace(capture.snapshot, in_mode=True))
    assert reading.state is COPY_MODE
    assert not check_after_paste(reading, "", "").ok


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
def test_a_menu_above_the_box(renderer: str) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    lines = _lines(capture)
    p = _prompt_row(capture)
    lines[p - 2] = "  \x1b[38;5;153m❯ /diff\x1b[39m   Toggle the diff panel"
    lines[p] = lines[p].replace("❯\u00a0", "❯\u00a0/di", 1)
    reading = recognise(_with_lines(capture, lines))
    assert reading.state is NOT_RECOGNISED
    assert not check_after_paste(reading, "", "/di").ok


@pytest.mark.parametrize("renderer", ["inline", "fullscreen"])
@pytest.mark.parametrize(
    ("mode", "state"),
    [
        ("auto mode on", READY),  # a mode the captures lack: its line has the same shape
        ("don't ask mode on", READY),
        ("accept edits", NOT_RECOGNISED),  # not a mode line
        ("Update available! Run: claude update", NOT_RECOGNISED),
    ],
)
def test_footer_mode_lines(renderer: str, mode: str, state: ScreenState) -> None:
    capture = _one("empty-box-fresh-start", renderer)
    lines = _lines(capture)
    footer = _prompt_row(capture) + 2
    assert "accept" in plain(lines[footer])
    lines[footer] = f"\x1b[0m  \x1b[38;5;147m⏵⏵ {mode}\x1b[38;5;246m (shift+tab to cycle)\x1b[39m"
    assert recognise(_with_lines(capture, lines)).state is state


@given(st.text(alphabet=st.characters(codec=None, blacklist_categories=()), max_size=2500))
@settings(max_examples=300, deadline=None)
@example("x" * 1700 + "\U0001f600\udce9")  # long: the codec counts
@example("\U0001f600" * 400 + "\udce9")  # short in characters, long in code units
def test_utf16_length_counts_as_the_codec_does(text: str) -> None:
    from fabrikito.screen import utf16_length

    assert utf16_length(text) == len(text.encode("utf-16-le", "surrogatepass")) // 2
