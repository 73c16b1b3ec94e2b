"""The recogniser over the shared corpus of real Claude Code 2.1.316 screens.

The corpus (``../shared/claude-code-2.1.316`` beside the repository) holds
``X.txt`` (``capture-pane -p``) and ``X.ansi`` (``capture-pane -p -e``) files
named ``<renderer>-<cols>x<rows>-<case>``; its README records what each shows.
It has no pane metadata, so the snapshot is built from the name: the renderer
gives ``alternate_on``, ``copy-mode`` in the case gives ``in_mode``, and the
cursor is put where Claude Code parks it in an idle box (column 2 of the
lowest ``❯``+NBSP row), since the corpus did not record it.

Every ``.ansi`` file must be named in the tables below, so a new capture
needs an explicit decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from tests.unit import corpus

from fabrikito.screen import (
    BoxReading,
    PaneSnapshot,
    ScreenState,
    check_after_paste,
    check_label,
    flush_matches,
    normalise,
    recogniser_for,
)
from fabrikito.screen.ansi import parse

CORPUS = corpus.SHARED / corpus.RELEASE


@pytest.fixture(autouse=True, scope="module")
def _corpus_present() -> None:
    corpus.shared_dir(corpus.RELEASE)


READY = ScreenState.READY
BOX_TEXT = ScreenState.BOX_TEXT
DIALOG = ScreenState.DIALOG
DIFF_NOTICE = ScreenState.DIFF_NOTICE
COPY_MODE = ScreenState.COPY_MODE
NOT_RECOGNISED = ScreenState.NOT_RECOGNISED

# The expected state of every case, whatever the renderer and size.
CASE_STATES: dict[str, ScreenState] = {
    # an empty box, idle
    "empty-box-fresh-start": READY,
    "after-first-reply": READY,
    "after-slow-reply": READY,
    "after-permission-yes": READY,
    "after-permission-declined-esc": READY,
    "after-queued-sent": READY,
    "after-rename": READY,
    "after-reply-suggestion-enabled": READY,
    "after-resize-with-diff-panel-open": READY,  # 89x40: the notice is above a whole box
    "after-slow-reply-and-queued-sent": READY,
    "after-submit-label-plus-placeholder": READY,
    "after-write-tool": READY,
    "bypass-after-accept": READY,
    "bypass-receiver-external-wrapped-from-mode-bypass": READY,  # delivered directly
    "ctrl-c-again-to-exit": READY,
    "ctrl-u-ctrl-y-hint": READY,
    "diff-panel-shown": READY,
    "diff-panel-too-narrow-notice": READY,  # the one-line notice is in the transcript
    "idle-notice-received": READY,
    "listagents-call": READY,
    "long-session-name": READY,
    "manual-mode-sendmessage": READY,
    "no-session-name": READY,
    "plan-mode-empty-box": READY,
    "plan-mode-receiver": READY,
    "receiver-after-deny": READY,
    "receiver-bypass-after-deliver": READY,
    "receiver-bypass-from-bypass": READY,
    "receiver-multiline-long-message": READY,
    "receiver-same-mode-delivered": READY,
    "after-pageup-scrolled": READY,  # fullscreen scrolled up: the box stays and takes input
    "sender-acceptEdits-to-bypass": READY,
    "sender-after-receiver-delivered": READY,
    "sender-after-receiver-denied": READY,
    "sender-bypass-to-acceptEdits": READY,
    "sender-same-mode": READY,
    "sendmessage-big-message-1MB": READY,
    "sendmessage-failure-unknown-target": READY,
    "sendmessage-invalid-input-missing-to": READY,
    "sendmessage-no-message-no-notify": READY,
    "sendmessage-notify-when-idle-no-message": READY,
    "sendmessage-notify-when-idle-with-message": READY,
    "sendmessage-success-same-mode": READY,
    "sendmessage-to-refusing-session": READY,
    "sendmessage-to-self": READY,
    "sendmessage-to-sigkilled-session": READY,
    "sendmessage-uds-address": READY,
    "sendmessage-uds-nonexistent-socket": READY,
    "sendmessage-uds-sniffer": READY,
    "sendmessage-uds-stale-socket-econnrefused": READY,
    "toolsearch-select-sendmessage": READY,
    # one dim line
    "empty-box-with-prompt-suggestion": READY,
    # busy, box empty (or the dim queued-message placeholder)
    "busy-spinner": READY,
    "busy-3s": READY,
    "busy-4s": READY,
    "busy-7s": READY,
    "busy-18s": READY,
    "busy-after-enter-queued": READY,
    # text in the box
    "typed-short-unsubmitted": BOX_TEXT,
    "typed-x-over-suggestion": BOX_TEXT,
    "typed-1000-chars-sendkeys": BOX_TEXT,
    "typed-2400-chars-box-scrolled": BOX_TEXT,
    "typed-long-box-scrolled": BOX_TEXT,
    "typed-while-scrolled": BOX_TEXT,
    "inline-typed-2400-chars-box-growth": BOX_TEXT,
    "long-box-cursor-at-top": BOX_TEXT,
    "history-browse-after-Up-keys": BOX_TEXT,
    "esc-again-to-clear": BOX_TEXT,
    "busy-typed-text-in-box": BOX_TEXT,
    "busy-typed-and-pasted-text-in-box": BOX_TEXT,
    "busy-then-single-escape": BOX_TEXT,  # the prompt is put back in the box
    "busy-with-draft-then-single-escape": BOX_TEXT,
    "receiver-busy-message-arrives": BOX_TEXT,
    "receiver-after-busy-message-processed": BOX_TEXT,
    "receiver-external-inbox-post": BOX_TEXT,  # a draft was left in that seat's box
    "receiver-external-inbox-post-wrapped": BOX_TEXT,
    "paste-over-suggestion": BOX_TEXT,
    "paste-again-to-expand": BOX_TEXT,
    "paste-oneline-short-noNL": BOX_TEXT,
    "paste-oneline-short-trailingNL": BOX_TEXT,
    "paste-2lines-noNL": BOX_TEXT,
    "paste-2lines-trailingNL": BOX_TEXT,
    "paste-3lines-noNL": BOX_TEXT,
    "paste-3lines-trailingNL": BOX_TEXT,
    "paste-3lines-crlf": BOX_TEXT,
    "paste-4lines-noNL": BOX_TEXT,
    "paste-5lines-noNL": BOX_TEXT,
    "paste-len200": BOX_TEXT,
    "paste-len799": BOX_TEXT,
    "paste-len799-plusNL": BOX_TEXT,
    "paste-len800": BOX_TEXT,
    "paste-len800-plusNL": BOX_TEXT,
    "paste-len801": BOX_TEXT,
    "paste-len801-trailingspaces": BOX_TEXT,
    "paste-len1000": BOX_TEXT,
    "paste-len3000": BOX_TEXT,
    "twopaste-label-then-short": BOX_TEXT,
    "twopaste-label-then-3lines": BOX_TEXT,
    "twopaste-label-then-len800": BOX_TEXT,
    "twopaste-label-then-len1000": BOX_TEXT,
    # dialogs
    "permission-prompt-bash": DIALOG,
    "permission-prompt-write": DIALOG,
    "permission-prompt-after-typing-hello": DIALOG,
    "bypass-permissions-acceptance-dialog": DIALOG,
    "receiver-bypass-held-dialog": DIALOG,
    "receiver-bypass-from-acceptEdits": DIALOG,
    "receiver-acceptEdits-from-bypass": DIALOG,
    "held-dialog-after-typing": DIALOG,
    "held-dialog-deliver-selected": DIALOG,
    "bypass-receiver-external-inbox-post": DIALOG,
    "bypass-receiver-external-wrapped-from-mode-prompting": DIALOG,
    "rewind-dialog-esc-esc-on-empty-box": DIALOG,
    # the diff-panel notice over a box whose end is off the screen (13 rows)
    "diff-panel-open-resize-notice": DIFF_NOTICE,
    "diff-notice-with-pasted-text": DIFF_NOTICE,
    "busy-spinner-with-diff-notice": DIFF_NOTICE,
    # copy mode
    "tmux-copy-mode": COPY_MODE,
    "tmux-copy-mode-after-sendkeys-and-paste": COPY_MODE,
    # anything else
    "after-sigkill-of-claude": NOT_RECOGNISED,  # the shell wrote over a stale box
    "after-sigterm": NOT_RECOGNISED,  # a stale box above the shell's "Resume this session with:"
    "after-slash-exit": NOT_RECOGNISED,  # the slash-command menu under the box
    "bypass-refused-as-root": NOT_RECOGNISED,  # a shell
    "receiver-after-ctrl-o": NOT_RECOGNISED,  # the detailed transcript view
    "typing-slash-diff": NOT_RECOGNISED,  # fullscreen: the slash-command menu above the box
}

# Files whose state differs from their case's.
FILE_STATES: dict[str, ScreenState] = {
    "fullscreen-89x16-diff-panel-open-resize-notice": READY,  # 16 rows: the whole box fits under the notice
}

DIALOG_NAMES = {
    "permission-prompt": "permission prompt",
    "held": "held-message dialog",
    "receiver-bypass-from": "held-message dialog",
    "receiver-acceptEdits-from": "held-message dialog",
    "external-inbox-post": "held-message dialog",
    "from-mode-prompting": "held-message dialog",
    "bypass-permissions-acceptance": "bypass permissions acceptance dialog",
    "rewind": "rewind dialog",
}

NAME_RE = re.compile(r"(?P<renderer>inline|fullscreen)-(?P<w>\d+)x(?P<h>\d+)-(?P<case>.+)")
SENTENCE = "The quick brown fox jumps over the lazy dog. "
LABEL = "[from em] "


@dataclass(frozen=True)
class Screen:
    name: str
    renderer: str
    width: int
    height: int
    case: str
    ansi: str


def _screens() -> list[Screen]:
    out = []
    for path in sorted(CORPUS.glob("*.ansi")):
        m = NAME_RE.fullmatch(path.stem)
        assert m is not None, path.name
        out.append(
            Screen(
                name=path.stem,
                renderer=m["renderer"],
                width=int(m["w"]),
                height=int(m["h"]),
                case=m["case"],
                ansi=path.read_text(encoding="utf-8"),
            )
        )
    return out


SCREENS = _screens()


def parked_cursor(ansi: str) -> tuple[int, int]:
    """Where Claude Code parks the cursor in an idle box: after ``❯``+NBSP on the lowest prompt row."""
    rows = parse(ansi)
    prompt_rows = [i for i, row in enumerate(rows) if row.text.startswith("❯\u00a0")]
    return 2, (prompt_rows[-1] if prompt_rows else 0)


def snapshot(screen: Screen, *, cursor: tuple[int, int] | None = None, ansi: str | None = None) -> PaneSnapshot:
    text = screen.ansi if ansi is None else ansi
    x, y = parked_cursor(text) if cursor is None else cursor
    return PaneSnapshot(
        ansi=text,
        width=screen.width,
        height=screen.height,
        alternate_on=screen.renderer == "fullscreen",
        in_mode="copy-mode" in screen.case,
        cursor_x=x,
        cursor_y=y,
    )


def read(screen: Screen, **kwargs: object) -> BoxReading:
    return recogniser_for("claude", "2.1.316").recognise(snapshot(screen, **kwargs))  # type: ignore[arg-type]


def expected(screen: Screen) -> ScreenState:
    return FILE_STATES.get(screen.name, CASE_STATES[screen.case])


def by_case(*cases: str) -> list[Screen]:
    return [s for s in SCREENS if s.case in cases]


def ids(screens: list[Screen]) -> list[str]:
    return [s.name for s in screens]


def test_the_corpus_is_there_and_every_file_has_an_expected_state() -> None:
    assert len(SCREENS) > 250
    missing = sorted({s.case for s in SCREENS if s.name not in FILE_STATES and s.case not in CASE_STATES})
    assert missing == []
    unused = sorted(set(CASE_STATES) - {s.case for s in SCREENS})
    assert unused == []


@pytest.mark.parametrize("screen", SCREENS, ids=ids(SCREENS))
def test_state(screen: Screen) -> None:
    reading = read(screen)
    assert reading.state is expected(screen), reading.detail
    assert reading.renderer == screen.renderer
    if reading.state is READY:
        assert reading.reason == ""
        assert reading.box_text == ""
        assert reading.box_rows == 1
        assert reading.top_visible and reading.ends_screen
    else:
        assert reading.reason


DIALOGS = [s for s in SCREENS if expected(s) is DIALOG]


@pytest.mark.parametrize("screen", DIALOGS, ids=ids(DIALOGS))
def test_dialogs_are_named(screen: Screen) -> None:
    reading = read(screen)
    names = {name for key, name in DIALOG_NAMES.items() if key in screen.case}
    assert reading.detail in names
    assert reading.reason == "screen not recognised as ready"


BUSY = by_case("busy-spinner", "busy-3s", "busy-4s", "busy-7s", "busy-18s", "busy-after-enter-queued")
IDLE = by_case("empty-box-fresh-start", "after-first-reply", "after-slow-reply", "receiver-same-mode-delivered")


@pytest.mark.parametrize("screen", BUSY, ids=ids(BUSY))
def test_busy_screens_are_ready_and_busy(screen: Screen) -> None:
    reading = read(screen)
    assert reading.state is READY
    assert reading.busy


@pytest.mark.parametrize("screen", IDLE, ids=ids(IDLE))
def test_idle_screens_are_not_busy(screen: Screen) -> None:
    assert not read(screen).busy


def test_dim_lines() -> None:
    (suggestion,) = [s for s in SCREENS if s.name == "inline-120x40-empty-box-with-prompt-suggestion"]
    reading = read(suggestion)
    assert reading.dim_text == "run the test suite"
    assert reading.box_text == ""
    for screen in by_case("busy-after-enter-queued"):
        assert read(screen).dim_text == "Press up to edit queued messages"


def test_the_plain_capture_of_a_suggestion_is_not_ready_as_text() -> None:
    """Without -e a suggestion reads as typed text: the plain capture is not enough."""
    (suggestion,) = [s for s in SCREENS if s.name == "inline-120x40-empty-box-with-prompt-suggestion"]
    plain = (CORPUS / f"{suggestion.name}.txt").read_text(encoding="utf-8")
    assert read(suggestion, ansi=plain).state is not READY


KNOWN_TEXTS = {
    "paste-oneline-short-noNL": "short pasted line",
    "paste-oneline-short-trailingNL": "short pasted line\n",
    "paste-2lines-noNL": "line one\nline two",
    "paste-2lines-trailingNL": "line one\nline two\n",
    "paste-3lines-noNL": "line one\nline two\nline three",
    "typed-short-unsubmitted": "hello from em",
    "twopaste-label-then-short": LABEL + "please review the patch",
    "twopaste-label-then-3lines": LABEL + "line one\nline two\nline three",
}
TEXTS = [s for s in SCREENS if s.case in KNOWN_TEXTS]


@pytest.mark.parametrize("screen", TEXTS, ids=ids(TEXTS))
def test_box_text_of_short_pastes(screen: Screen) -> None:
    reading = read(screen)
    if reading.box_text.startswith(LABEL) and "[Pasted text #" in reading.box_text:
        return  # 60x10: any newline collapses the paste (README §3)
    if reading.box_text.startswith("[Pasted text #"):
        assert screen.height <= 11
        return
    assert reading.box_text == KNOWN_TEXTS[screen.case]
    assert reading.dim_text == ""


PLACEHOLDERS = by_case("paste-len801", "paste-len1000", "paste-len3000", "paste-4lines-noNL", "paste-5lines-noNL")


@pytest.mark.parametrize("screen", PLACEHOLDERS, ids=ids(PLACEHOLDERS))
def test_placeholders_are_read_as_they_show(screen: Screen) -> None:
    reading = read(screen)
    assert re.fullmatch(r"\[Pasted text #\d+( \+\d+ lines)?\]", reading.box_text)
    assert reading.box_rows == 1


# -- the Enter rule, on the real screens -----------------------------------------------------------

LABELLED = {
    "twopaste-label-then-short": "please review the patch",
    "twopaste-label-then-3lines": "line one\nline two\nline three",
    "twopaste-label-then-len1000": (SENTENCE * 30)[:1000],
}
LABELLED_SCREENS = [s for s in SCREENS if s.case in LABELLED]


@pytest.mark.parametrize("screen", LABELLED_SCREENS, ids=ids(LABELLED_SCREENS))
def test_enter_rule_passes_for_the_labelled_message(screen: Screen) -> None:
    reading = read(screen)
    verdict = check_after_paste(reading, LABEL, LABELLED[screen.case])
    assert verdict.ok, verdict.reason
    # what say would have sent, had its Enter not gone, flush submits: a tall message's end included
    assert flush_matches(reading, LABEL, LABELLED[screen.case])
    assert not flush_matches(reading, "[from qa] ", LABELLED[screen.case])


@pytest.mark.parametrize("screen", LABELLED_SCREENS, ids=ids(LABELLED_SCREENS))
def test_enter_rule_refuses_another_message(screen: Screen) -> None:
    reading = read(screen)
    verdict = check_after_paste(reading, LABEL, "something else entirely")
    assert not verdict.ok
    assert verdict.reason in (
        "the box shows fewer rows than it can and not just the message",
        "the box does not end with the message",
    )
    assert not check_label(reading, LABEL).ok
    assert not check_after_paste(reading, "[from qa] ", LABELLED[screen.case]).ok


LONG = by_case("paste-len200", "paste-len799", "paste-len800")


@pytest.mark.parametrize("screen", LONG, ids=ids(LONG))
def test_enter_rule_on_long_pastes(screen: Screen) -> None:
    """A long one-line paste shows whole, or only its end once the box is full."""
    n = int(screen.case.removeprefix("paste-len"))
    message = (SENTENCE * 30)[:n]
    reading = read(screen)
    verdict = check_after_paste(reading, "", message)
    if reading.ends_screen:
        assert verdict.ok, verdict.reason
    else:  # fullscreen 60x10: the bottom rule is off the screen
        assert verdict.reason == "the screen no longer ends with the box"
    if reading.full and normalise(reading.box_text) != normalise(message):
        # only the end shows: a different start is not seen, a different end is
        assert check_after_paste(reading, "", "X" + message).ok == verdict.ok
        assert not check_after_paste(reading, "", message + "X").ok


def test_a_full_inline_box_shows_the_end_and_no_top() -> None:
    (growth,) = [s for s in SCREENS if s.case == "inline-typed-2400-chars-box-growth"]
    reading = read(growth)
    assert reading.full and not reading.top_visible
    assert reading.box_rows == 21
    assert reading.ends_screen


@pytest.mark.parametrize(
    ("name", "rows", "max_rows"),
    [
        ("fullscreen-220x50-typed-long-box-scrolled", 20, 20),
        ("fullscreen-120x40-typed-2400-chars-box-scrolled", 15, 15),
        ("fullscreen-80x24-typed-long-box-scrolled", 7, 7),
        ("fullscreen-89x13-typed-long-box-scrolled", 3, 3),
        ("fullscreen-60x10-typed-long-box-scrolled", 3, 3),
        ("fullscreen-120x40-long-box-cursor-at-top", 15, 15),
    ],
)
def test_fullscreen_box_height(name: str, rows: int, max_rows: int) -> None:
    (screen,) = [s for s in SCREENS if s.name == name]
    reading = read(screen)
    assert (reading.box_rows, reading.max_rows, reading.full, reading.top_visible) == (rows, max_rows, True, True)
    assert reading.ends_screen is (screen.height > 10)


def _colour_rules(text: str) -> str:
    """A plain capture with its rule rows drawn in the rules' colour, as the app draws them."""
    out = []
    for line in text.split("\n"):
        if line.startswith("─") or re.fullmatch(r" \S.* ─", line):
            out.append(f"\x1b[38;5;244m{line}\x1b[39m")
        else:
            out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize(("height", "rows"), [(41, 15), (27, 8), (26, 8), (16, 3), (15, 3)])
def test_box_height_checks_from_plain_captures(height: int, rows: int) -> None:
    """README §4's threshold captures exist as plain text only: without colours they are not
    recognised (fail closed); with the rules coloured they give the measured heights."""
    plain = (CORPUS / f"fullscreen-120x{height}-box-height-check.txt").read_text(encoding="utf-8")
    screen = Screen(f"120x{height}", "fullscreen", 120, height, "box-height-check", plain)
    assert read(screen).state is NOT_RECOGNISED
    reading = read(screen, ansi=_colour_rules(plain))
    assert reading.state is BOX_TEXT, reading.detail
    assert (reading.box_rows, reading.max_rows, reading.full) == (rows, rows, True)


READY_SCREENS = [s for s in SCREENS if expected(s) is READY]


@pytest.mark.parametrize("screen", READY_SCREENS, ids=ids(READY_SCREENS))
def test_ready_needs_the_cursor_in_the_box(screen: Screen) -> None:
    x, y = parked_cursor(screen.ansi)
    assert read(screen, cursor=(x + 1, y)).state is NOT_RECOGNISED
    assert read(screen, cursor=(0, screen.height - 1)).state is NOT_RECOGNISED


@pytest.mark.parametrize("screen", READY_SCREENS, ids=ids(READY_SCREENS))
def test_ready_screens_in_copy_mode_are_copy_mode(screen: Screen) -> None:
    snap = snapshot(screen)
    reading = recogniser_for("claude", "2.1.316").recognise(
        PaneSnapshot(snap.ansi, snap.width, snap.height, snap.alternate_on, True, snap.cursor_x, snap.cursor_y)
    )
    assert reading.state is COPY_MODE
    assert reading.reason == "the pane is in copy mode (someone is scrolling)"


@pytest.mark.parametrize("screen", READY_SCREENS, ids=ids(READY_SCREENS))
def test_ready_screens_under_the_other_renderer_are_not_ready(screen: Screen) -> None:
    """An inline screen read as fullscreen (or the reverse) is read by the other rules; it must
    never be more than what it is, and a fullscreen box is pinned to the bottom."""
    snap = snapshot(screen)
    other = PaneSnapshot(snap.ansi, snap.width, snap.height, not snap.alternate_on, False, snap.cursor_x, snap.cursor_y)
    reading = recogniser_for("claude", "2.1.316").recognise(other)
    assert reading.state in (READY, NOT_RECOGNISED)


@pytest.mark.parametrize("screen", SCREENS, ids=ids(SCREENS))
def test_unknown_version_fails_closed(screen: Screen) -> None:
    reading = recogniser_for("claude", "2.1.999").recognise(snapshot(screen))
    assert reading.state is NOT_RECOGNISED
    assert reading.reason.startswith("Claude Code 2.1.999 is not a release fabrikito has qualified: run")
