"""The screen recogniser for Claude Code 2.1.316, both renderers.

Facts used here come from the recorded screens of the real binary
(``claude-code-2.1.316/README.md`` and its captures).  The live input box is::

    ──────────────────────────── <session> ─    top rule, fg=244
    ❯\u00a0first input row                       prompt: ❯ + NO-BREAK SPACE
      continuation rows, indented two spaces
    ─────────────────────────────────────────    bottom rule, fg=244
      ⏵⏵ accept edits on (shift+tab to cycle)    footer: mode line, notices

Transcript echoes of prompts use ``❯`` + an ordinary space, and dialogs draw no
``❯\u00a0`` row at all, so the prompt row under a top rule is what identifies
the live box.  The box is judged only where it must be, at the bottom of the
screen: below the bottom rule there may be footer rows (a known grammar) and,
inline, blank rows; anything else means the box is not the live end of the
screen.

* **inline** (normal screen): the frame is drawn from the top and the rest of
  the screen is blank.  The box grows without limit; once it is taller than
  the pane its top, the top rule included, goes into tmux history and the
  screen shows input rows from row 0 down to the bottom rule.  That is what
  "full" means inline.
* **fullscreen** (alternate screen): the box is pinned to the bottom and shows
  at most ``max(3, (rows - 10) // 2)`` input rows; a taller text scrolls
  inside it, and its first visible row still starts with ``❯\u00a0``.  In
  short panes the footer, then the bottom rule, are pushed off the screen.

See ``docs/screen-recognition.md``.
"""

from __future__ import annotations

import re
import unicodedata

from fabrikito.base.values import frozen, replace
from fabrikito.screen import (
    NOT_READY,
    BoxReading,
    PaneSnapshot,
    Renderer,
    ScreenState,
    StandardChecks,
)
from fabrikito.screen.ansi import Row, parse

VERSION = "2.1.316"
DIALECT = "claude-2.1.316"

PROMPT = "❯\u00a0"  # the live box's prompt: ❯ + NO-BREAK SPACE
INDENT = "  "  # continuation rows of the box
RULE = "─"
RULE_FG = 244  # both rules of the box
BUSY_FG = 246  # the prompt's colour while a turn runs
SPINNER_FG = 174
MENU_CURSOR_FG = 153  # the ❯ of a dialog option or a completion menu's highlighted row

# A rule with an optional name right-aligned (`─── seat-a ─`), a name cut with `…` that
# starts the row with a space, or the history browser's `─── History 1/1 ───…`.
_TOP_RULE_RE = re.compile(r"─+|(?:─+ | )\S(?:.*\S)? ─+")

# Footer (mode line) grammar.  The first footer row starts with the mode line or a
# notice that replaces it; further segments, separated by two or more spaces, and
# further rows are notices.  A segment cut with `…` at the pane's edge counts when
# what is left is the start of a known one.
_MODE_RE = re.compile(r"(?:⏵⏵|⏸|⏵) [a-z'-]+(?: [a-z'-]+)* on")  # any mode's words: auto mode has no capture
_MODE_SUFFIXES = (" (shift+tab to cycle)", " · ? for shortcuts", " · ← for agents", " · esc to interrupt")
BASE_NOTICES = (
    "tmux focus-events off · add 'set -g focus-events on' to ~/.tmux.conf and reattach for focus tracking",
    "tmux detected · scroll with PgUp/PgDn · or add 'set -g mouse on' to ~/.tmux.conf for wheel scroll",
    "ctrl+g to edit in Vim",
    "Esc again to clear",
    "Ctrl+Y to paste deleted text",
    "Press Ctrl-C again to exit",
    "paste again to expand",
    "Scroll wheel is sending arrow keys · use PgUp/PgDn to scroll",
)
_EFFORT_RE = re.compile(r"[◐◑◒◓◔◕○●] [a-z]+ · /effort")
_EFFORT_EXAMPLE = "◐ medium · /effort"
_MIN_CUT_SEGMENT = 3

_SPINNER_RE = re.compile(r"[·✢*✶✻✽] \S.*…")
_DIFF_NOTICE_TEXT = "Resize your terminal to at least 110 columns to show the diff panel"

# Dialogs (the live box is gone while they are open).
_PERMISSION_OPTION_RE = re.compile(r" ❯ \d+\. \S.*")
_PERMISSION_END = " Esc to cancel · Tab to amend"
_HELD_OPTIONS = ("Deny — drop it and tell the sender it was declined", "Deliver this message to Claude")
_HELD_MARKS = (" Held message from another session", " Message body (this is what will be delivered):")
# Since 2.1.331 the held dialog may end with one of these under its options (the first, bold, when the
# AlwaysDeliver binding is a key chord, the second otherwise), or with neither when rows are short.
_HELD_HINTS = (" ctrl+x a to always deliver ›", " To always deliver in this session, see /config.")
_BYPASS_OPTIONS = ("No, exit", "Yes, I accept")
_BYPASS_END = "  Enter to confirm · Esc to cancel"
_REWIND_END = "  Enter to continue · Esc to cancel"
_REWIND_MARKS = ("  Rewind", "  Restore the code and/or conversation to the point before")
_TRANSCRIPT_FOOTER = "  Showing detailed transcript · ctrl+o to toggle"

DIFF_NOTICE_REASON = (
    'Claude Code\'s diff panel notice ("Resize your terminal to at least 110 columns to show the diff panel") '
    "pushes the end of the input box off the screen: widen the pane to 110 columns, give it 16 rows or more, "
    "or close the diff panel in the seat"
)
BOX_TEXT_REASON = "the input box already holds text"
COPY_MODE_REASON = "the pane is in copy mode (someone is scrolling)"


def fullscreen_max_rows(height: int) -> int:
    """The most input rows the fullscreen box shows in a pane ``height`` rows tall (measured)."""
    return max(3, (height - 10) // 2)


def inline_max_rows(height: int) -> int:
    """The input rows the inline box shows once full, with a one-row footer: all but the bottom
    rule, the footer row and the blank row the inline renderer leaves under its frame (measured
    at 10-24 rows).  A full inline box reports the rows it really shows, one fewer per extra
    footer row."""
    return max(1, height - 3)


def cell_width(text: str) -> int:
    """Terminal cells ``text`` takes: wide characters two, combining marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


# -- rows ---------------------------------------------------------------------------------


def _text(row: Row) -> str:
    return row.text.rstrip(" ")


def _blank(row: Row) -> bool:
    return _text(row) == ""


def _rule_coloured(row: Row) -> bool:
    """Every ``─`` of the row is drawn in the rules' colour."""
    return all(run.style.fg == RULE_FG for run in row.runs if RULE in run.text)


def _is_bottom_rule(row: Row, width: int) -> bool:
    return _text(row) == RULE * width and _rule_coloured(row)


def _is_top_rule(row: Row, width: int) -> bool:
    text = _text(row)
    return _TOP_RULE_RE.fullmatch(text) is not None and cell_width(text) == width and _rule_coloured(row)


# Since 2.1.326 the fullscreen box marks hidden rows on its rules: `─── ↑ N more ───… name ─` on top,
# `─── ↓ N more ───…` at the bottom; the marker is fg=246, the rule 244 (README of the research captures).
_MORE_RE = re.compile(r"─+ (?P<arrow>[↑↓]) [1-9][0-9]* more ─+(?: \S(?:.*\S)? ─+)?")
MORE_FG = 246


def _more_rule(row: Row, width: int) -> str | None:
    """``↑`` or ``↓`` when the row is a box rule with a hidden-rows marker, else ``None``."""
    text = _text(row)
    found = _MORE_RE.fullmatch(text)
    if found is None or cell_width(text) != width or not _rule_coloured(row):
        return None
    marker = text.index(found.group("arrow"))
    style = row.style_at(marker)
    return found.group("arrow") if style is not None and style.fg == MORE_FG else None


def _is_continuation(row: Row) -> bool:
    text = _text(row)
    return text == "" or text.startswith(INDENT)


def _first_char_fg(row: Row, text: str) -> int | tuple[int, int, int] | None:
    """The foreground of the first non-space character of the row."""
    stripped = len(text) - len(text.lstrip(" "))
    style = row.style_at(stripped)
    return style.fg if style is not None else None


def _cut_prefix_of(segment: str, candidates: tuple[str, ...]) -> bool:
    if not segment.endswith("…"):
        return False
    base = segment[:-1].rstrip(" ")
    return len(base) >= _MIN_CUT_SEGMENT and any(c.startswith(base) for c in candidates)


def _mode_suffixes_ok(rest: str) -> bool:
    while rest:
        for suffix in _MODE_SUFFIXES:
            if rest.startswith(suffix):
                rest = rest[len(suffix) :]
                break
        else:
            return rest.endswith("…") and len(rest) > 1 and any(s.startswith(rest[:-1]) for s in _MODE_SUFFIXES)
    return True


def _footer_segment_ok(segment: str, mode_allowed: bool, notices: tuple[str, ...] = BASE_NOTICES) -> bool:
    if mode_allowed:
        match = _MODE_RE.match(segment)
        if match is not None:
            return _mode_suffixes_ok(segment[match.end() :])
    if segment in notices or _EFFORT_RE.fullmatch(segment):
        return True
    return _cut_prefix_of(segment, (*notices, _EFFORT_EXAMPLE))


def _footer_row_ok(row: Row, first: bool, notices: tuple[str, ...] = BASE_NOTICES) -> bool:
    text = _text(row)
    if not text.startswith(INDENT) or any(run.style.inverse for run in row.runs if run.text.strip()):
        return False
    segments = re.split(r" {2,}", text.strip(" "))
    return all(_footer_segment_ok(seg, first and i == 0, notices) for i, seg in enumerate(segments))


def _footer_ok(rows: tuple[Row, ...], notices: tuple[str, ...] = BASE_NOTICES) -> bool:
    """Rows under the bottom rule: footer rows first, then only blank rows."""
    i = 0
    while i < len(rows) and not _blank(rows[i]):
        if not _footer_row_ok(rows[i], first=i == 0, notices=notices):
            return False
        i += 1
    return all(_blank(row) for row in rows[i:])


# -- the box ---------------------------------------------------------------------------------


@frozen
class Box:
    first: int  # first visible input row
    last: int  # last visible input row (inclusive)
    prompt: int | None  # the ❯ row, when it is the first input row (None: pushed into history)
    top_rule: int | None  # the top rule's row, when visible
    bottom_rule: int | None  # the bottom rule's row, when visible
    end_hidden: bool = False  # the bottom rule says rows of text are hidden below (``↓ N more``)


def find_box_in(
    rows: tuple[Row, ...], width: int, fullscreen: bool, *, indicators: bool = False
) -> tuple[Box | None, str]:
    """The live box at the bottom of the screen, or ``None`` and what is wrong.

    With ``indicators`` (dialects since 2.1.326, fullscreen) the box's rules may
    carry hidden-rows markers: under a ``↑ N more`` top rule the first visible
    row is a continuation row (the prompt row is scrolled away), and a
    ``↓ N more`` bottom rule means the text's end is not on the screen.
    """
    n = len(rows)
    marked = indicators and fullscreen

    def bottom(i: int) -> bool:
        return _is_bottom_rule(rows[i], width) or (marked and _more_rule(rows[i], width) == "↓")

    def opens_box(i: int) -> bool:
        if rows[i].text.startswith(PROMPT) and _is_top_rule(rows[i - 1], width):
            return True
        return marked and _more_rule(rows[i - 1], width) == "↑" and _text(rows[i]).startswith(INDENT)

    prompts = [i for i in range(1, n) if opens_box(i)]
    if prompts:
        p = prompts[-1]
        prompt = p if rows[p].text.startswith(PROMPT) else None
        i = p + 1
        while i < n and _is_continuation(rows[i]) and not bottom(i):
            i += 1
        if i < n:
            if not bottom(i):
                return None, "the input box is not followed by its bottom rule"
            hidden = not _is_bottom_rule(rows[i], width)
            return Box(first=p, last=i - 1, prompt=prompt, top_rule=p - 1, bottom_rule=i, end_hidden=hidden), ""
        if not fullscreen:
            return None, "the input box has no bottom rule"
        if _blank(rows[n - 1]):
            return None, "the input box runs into blank rows at the bottom of the screen"
        return Box(first=p, last=n - 1, prompt=prompt, top_rule=p - 1, bottom_rule=None), ""
    if fullscreen:
        return None, "no input box (a ❯ row under a top rule) at the bottom of the screen"
    # Inline, a box taller than the pane: input rows from row 0 down to the bottom rule.
    bottoms = [i for i in range(1, n) if _is_bottom_rule(rows[i], width)]
    if not bottoms:
        return None, "no input box at the bottom of the screen"
    b = bottoms[-1]
    first_ok = rows[0].text.startswith(PROMPT) or _is_continuation(rows[0])
    if first_ok and not _blank(rows[0]) and all(_is_continuation(r) for r in rows[1:b]):
        prompt = 0 if rows[0].text.startswith(PROMPT) else None
        return Box(first=0, last=b - 1, prompt=prompt, top_rule=None, bottom_rule=b), ""
    return None, "no input box at the bottom of the screen"


def _split_row(row: Row, start: int) -> tuple[str, str]:
    """The non-dim text and the dim text of a box row, from character ``start`` on.

    The app draws its cursor as an inverse cell; on a dim suggestion or
    placeholder it sits on the first character, which then counts as dim.
    Runs of spaces count with neither (tmux may drop the dim attribute on them).
    """
    pieces: list[tuple[str, bool, bool]] = []  # (text, dim, inverse), from ``start`` on
    skip = start
    for run in row.runs:
        text = run.text[skip:] if skip else run.text
        skip = max(0, skip - len(run.text))
        if text:
            pieces.append((text, run.style.dim, run.style.inverse))
    kinds: list[str] = []
    for k, (text, is_dim, inverse) in enumerate(pieces):
        cursor_on_dim = inverse and len(text) == 1 and k + 1 < len(pieces) and pieces[k + 1][1]
        if is_dim or cursor_on_dim:
            kinds.append("D")
        elif text.strip(" ") == "":
            kinds.append("S")
        else:
            kinds.append("T")
    plain_text = "".join(text for (text, _, _), kind in zip(pieces, kinds, strict=True) if kind != "D")
    text_part = plain_text.rstrip(" ") if "T" in kinds else ""
    dims = [k for k, kind in enumerate(kinds) if kind == "D"]
    dim_part = "".join(text for text, _, _ in pieces[dims[0] : dims[-1] + 1]) if dims else ""
    return text_part, dim_part.strip(" ")


def _block_above(rows: tuple[Row, ...], row: int) -> list[Row]:
    """The non-blank rows right above ``row``, nearest first."""
    out = []
    i = row - 1
    while i >= 0 and not _blank(rows[i]):
        out.append(rows[i])
        i -= 1
    return out


def _menu_open(rows: tuple[Row, ...], top_rule: int) -> bool:
    """A completion menu (slash commands, files) drawn right above the box."""
    for row in _block_above(rows, top_rule):
        text = _text(row)
        if _selected(row, text, "  "):
            return True
    return False


def _diff_notice_above(rows: tuple[Row, ...], top_rule: int) -> bool:
    for i in range(max(0, top_rule - 4), top_rule):
        text = _text(rows[i])
        if text.startswith("│") and _DIFF_NOTICE_TEXT in text:
            return True
    return False


def _spinner_above(rows: tuple[Row, ...], top_rule: int) -> bool:
    for i in range(max(0, top_rule - 4), top_rule):
        text = _text(rows[i])
        if _SPINNER_RE.match(text) and _first_char_fg(rows[i], text) == SPINNER_FG:
            return True
    return False


# -- dialogs -----------------------------------------------------------------------------------


def _selected(row: Row, text: str, prefix: str) -> bool:
    """``text`` starts with ``prefix`` + ``❯ `` and that ❯ is the menu colour."""
    if not text.startswith(prefix + "❯ "):
        return False
    style = row.style_at(len(prefix))
    return style is not None and style.fg == MENU_CURSOR_FG


def find_dialog_in(rows: tuple[Row, ...], width: int, *, held_hint: bool = False) -> str | None:
    """The name of the known dialog at the bottom of the screen, or ``None``.

    With ``held_hint`` (dialects since 2.1.331) the held-message dialog may end
    with a hint row under its two options (``_HELD_HINTS``).
    """
    last = len(rows) - 1
    while last >= 0 and _blank(rows[last]):
        last -= 1
    if last < 0:
        return None
    if _is_top_rule(rows[last], width):  # a dialog's bottom rule, with the session name
        last -= 1
        while last >= 0 and _blank(rows[last]):
            last -= 1
        if last < 0:
            return None
    start = 0
    for i in range(last, -1, -1):
        if _is_bottom_rule(rows[i], width):
            start = i + 1
            break
    region = rows[start : last + 1]
    texts = [_text(r) for r in region]
    if held_hint and len(region) > 2 and texts[-1] in _HELD_HINTS:
        region, texts = region[:-1], texts[:-1]
    end = texts[-1]

    if end == _PERMISSION_END and any(
        _PERMISSION_OPTION_RE.fullmatch(t) and _selected(r, t, " ") for r, t in zip(region, texts, strict=True)
    ):
        return "permission prompt"
    if len(region) >= 2:
        a, b = texts[-2], texts[-1]
        options = {a[3:], b[3:]}
        chosen = [(r, t) for r, t in ((region[-2], a), (region[-1], b)) if _selected(r, t, " ")]
        others = [t for t in (a, b) if t.startswith("   ")]
        if (
            options == set(_HELD_OPTIONS)
            and len(chosen) == 1
            and len(others) == 1
            and any(t in _HELD_MARKS for t in texts)
        ):
            return "held-message dialog"
    if end == _BYPASS_END:
        chosen_b = [t[4:] for r, t in zip(region, texts, strict=True) if _selected(r, t, "  ")]
        plain = [t[4:] for t in texts if t.startswith("    ") and t[4:] in _BYPASS_OPTIONS]
        if len(chosen_b) == 1 and len(plain) == 1 and {chosen_b[0], plain[0]} == set(_BYPASS_OPTIONS):
            return "bypass permissions acceptance dialog"
    rewind_selected = any(_selected(r, t, "  ") for r, t in zip(region, texts, strict=True))
    if end == _REWIND_END and rewind_selected and any(t.startswith(m) for t in texts for m in _REWIND_MARKS):
        return "rewind dialog"
    return None


# -- the recogniser ------------------------------------------------------------------------------


class Claude21316(StandardChecks):
    """Recognises the screens of the dialect first seen in Claude Code 2.1.316 (both renderers)."""

    dialect = DIALECT

    def __init__(self, version: str = VERSION) -> None:
        super().__init__("claude", version)

    def recognise(self, snapshot: PaneSnapshot) -> BoxReading:
        return recognise(snapshot, self)

    # The parts a later dialect may draw differently; each dialect module overrides what changed.

    def find_box(self, rows: tuple[Row, ...], width: int, fullscreen: bool) -> tuple[Box | None, str]:
        return find_box_in(rows, width, fullscreen)

    def find_dialog(self, rows: tuple[Row, ...], width: int) -> str | None:
        return find_dialog_in(rows, width)

    #: The transient notices the footer may show beside or instead of the mode line.
    notices: tuple[str, ...] = BASE_NOTICES


def _not_recognised(renderer: Renderer, detail: str, max_rows: int = 0) -> BoxReading:
    return BoxReading(
        state=ScreenState.NOT_RECOGNISED, renderer=renderer, reason=NOT_READY, detail=detail, max_rows=max_rows
    )


def recognise(snapshot: PaneSnapshot, rules: Claude21316 | None = None) -> BoxReading:
    """Read one snapshot of a Claude Code pane, by ``rules`` (a dialect; default: 2.1.316's)."""
    rules = rules if rules is not None else Claude21316()
    renderer: Renderer = "fullscreen" if snapshot.alternate_on else "inline"
    fullscreen = snapshot.alternate_on
    width, height = snapshot.width, snapshot.height
    rows = parse(snapshot.ansi)
    max_rows = fullscreen_max_rows(height) if fullscreen else inline_max_rows(height)

    if width <= 0 or height <= 0:
        reading = _not_recognised(renderer, "the pane has no size")
    elif len(rows) > height:
        reading = _not_recognised(renderer, f"the capture has {len(rows)} rows, more than the pane's {height}")
    else:
        rows = rows + (Row(),) * (height - len(rows))
        reading = _read(rows, snapshot, renderer, max_rows, rules)
    if snapshot.in_mode:
        return BoxReading(
            state=ScreenState.COPY_MODE,
            renderer=renderer,
            reason=COPY_MODE_REASON,
            detail="tmux reports the pane in a mode (copy mode)",
            busy=reading.busy,
            box_text=reading.box_text,
            dim_text=reading.dim_text,
            box_rows=reading.box_rows,
            top_visible=reading.top_visible,
            max_rows=reading.max_rows,
            full=reading.full,
            ends_screen=reading.ends_screen,
        )
    return reading


def _read(
    rows: tuple[Row, ...], snapshot: PaneSnapshot, renderer: Renderer, max_rows: int, rules: Claude21316
) -> BoxReading:
    width = snapshot.width
    fullscreen = renderer == "fullscreen"
    if all(_blank(r) for r in rows):
        return _not_recognised(renderer, "the screen is empty", max_rows=max_rows)
    box, why = rules.find_box(rows, width, fullscreen)
    if box is None:
        dialog = rules.find_dialog(rows, width)
        if dialog is not None:
            return BoxReading(
                state=ScreenState.DIALOG, renderer=renderer, reason=NOT_READY, detail=dialog, max_rows=max_rows
            )
        last = max(i for i, r in enumerate(rows) if not _blank(r))
        if rows[last].text.startswith(_TRANSCRIPT_FOOTER):
            why = "the detailed transcript view (ctrl+o) is open"
        return _not_recognised(renderer, why, max_rows=max_rows)

    # Read the box.
    texts: list[str] = []
    dims: list[str] = []
    for i in range(box.first, box.last + 1):
        row = rows[i]
        start = len(PROMPT) if i == box.prompt else (len(INDENT) if _text(row) else 0)
        text, dim = _split_row(row, start)
        texts.append(text)
        if dim:
            dims.append(dim)
    box_text = "\n".join(texts)
    dim_text = "\n".join(dims)
    box_rows = box.last - box.first + 1
    top_visible = box.prompt is not None and box.top_rule is not None
    full = box_rows >= max_rows if fullscreen else box.top_rule is None
    if full and not fullscreen:
        max_rows = box_rows  # inline, full: as many rows as the footer left (one footer row: rows - 3)
    prompt_busy = False
    if box.prompt is not None:
        style = rows[box.prompt].style_at(0)
        prompt_busy = style is not None and style.fg == BUSY_FG
    footer_rows = rows[box.bottom_rule + 1 :] if box.bottom_rule is not None else ()
    footer_busy = any("esc to interr" in _text(r) for r in footer_rows)
    spinner = box.top_rule is not None and _spinner_above(rows, box.top_rule)
    busy = prompt_busy or footer_busy or spinner
    base = BoxReading(
        state=ScreenState.NOT_RECOGNISED,
        renderer=renderer,
        reason=NOT_READY,
        busy=busy,
        box_text=box_text,
        dim_text=dim_text,
        box_rows=box_rows,
        top_visible=top_visible,
        max_rows=max_rows,
        full=full,
    )

    if box.bottom_rule is None:
        if box.top_rule is not None and _diff_notice_above(rows, box.top_rule):
            return replace(
                base,
                state=ScreenState.DIFF_NOTICE,
                reason=DIFF_NOTICE_REASON,
                detail="the diff panel notice above the box pushes the box's end off the screen",
            )
        if box_text.strip() or dim_text:
            return replace(
                base,
                state=ScreenState.BOX_TEXT,
                reason=BOX_TEXT_REASON,
                detail="the input box holds text; its end is off the screen",
            )
        return replace(base, detail="the end of the input box is off the screen")
    if not _footer_ok(rows[box.bottom_rule + 1 :], rules.notices):
        return replace(base, detail="something other than the footer follows the input box")
    if box.top_rule is not None and _menu_open(rows, box.top_rule):
        return replace(base, detail="a completion menu is open above the input box")
    base = replace(base, ends_screen=not box.end_hidden)

    empty = box_rows == 1 and box_text == "" and top_visible
    if not empty:
        if box_text.strip():
            detail = "the input box holds text"
        elif dim_text:
            detail = "the input box shows dim text on more than one row"
        else:
            detail = "the input box holds blank lines"
        return replace(base, state=ScreenState.BOX_TEXT, reason=BOX_TEXT_REASON, detail=detail)
    if (snapshot.cursor_y, snapshot.cursor_x) != (box.prompt, len(PROMPT)):
        return replace(
            base,
            detail=f"the cursor ({snapshot.cursor_x},{snapshot.cursor_y}) is not in the empty input box "
            f"({len(PROMPT)},{box.prompt})",
        )
    detail = f"a dim line in the box: {dim_text}" if dim_text else "the input box is empty"
    return replace(base, state=ScreenState.READY, reason="", detail=detail)
