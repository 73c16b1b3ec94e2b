"""The screen recogniser for Gemini CLI 0.61 (dialect ``gemini-0.61``).

Facts from the captures of the real binary (``other-agents/README.md`` and
``tests/fixtures/releases/gemini/``).  Gemini draws inline (the normal
screen); at the bottom, the status row, a rule, the mode line, the input box
and the footer::

     ⠴ Thinking... (esc to cancel, 3s)            ? for shortcuts   status: busy, or hints only
    ────────────────────────────────────────────  the rule (dim)
     Shift+Tab to accept edits                    the mode line
    ▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄▄  the box's top: upper half blocks, full width
     >  Type your message or @path/to/file        rows on the box's background; ``>`` then the text
       continuation rows, indented three spaces   (an empty box: the cursor cell, then the placeholder)
    ▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀  the box's bottom
     workspace (/directory)   sandbox   /model    the footer
     <cwd>                    no sandbox  Auto

* Without true colour (``COLORTERM`` unset) the box's ▄ and ▀ edges are blank
  rows on its background instead (a capture shows them as empty rows).
* The transcript echoes each prompt in the same box; only the box right above
  the footer, under the rule, is the live one.
* Busy: ``(esc to cancel, Ns)`` on the status row, also while reply text
  streams (Gemini keeps it until the turn ends).
* The prompt is ``>``, or ``*`` in YOLO mode; shell mode's ``!`` (the text
  would run as a shell command) is never typable.
* Dialogs (approval, authentication) are bordered boxes drawn instead of the
  input box, with the chosen option marked ``●``.
* Resumed (``--resume``), it first draws the start banner and an empty box
  that takes keys, then clears the screen and draws ``Resuming session...``
  instead of the box (keys typed then are lost), then the banner, the earlier
  turns and the box again: the resumed conversation is shown once a turn's
  echoed prompt or a reply (``✦``) is over the rule, or a reply long enough
  to push that row and the banner away.
* A paste of more than 5 lines, or of more than 500 UTF-16 code units, shows
  as ``[Pasted Text: N lines]`` (more than 5 lines) or ``[Pasted Text: N
  chars]`` (CR LF and CR read as one newline).

Anything else fails closed.  See ``docs/screen-recognition.md``.
"""

from __future__ import annotations

import re

from fabrikito.base.values import replace
from fabrikito.screen import NOT_READY, BoxReading, PaneSnapshot, Renderer, ScreenState
from fabrikito.screen.agentscreen import AgentScreen, blank, box_reading, busy_reading, empty_box, not_recognised, text
from fabrikito.screen.ansi import Row, parse

VERSION = "0.61.0"
DIALECT = "gemini-0.61"
PROMPT = " > "
#: The prompt of each input mode a message may be typed in: normal, and YOLO (tools run unasked).  Shell
#: mode (`` ! ``: Enter runs the text as a shell command) is not one of them.
PROMPTS = (PROMPT, " * ")
INDENT = "   "
PLACEHOLDER = "Type your message or @path/to/file"
BANNER = "Gemini CLI v"
REPLY = "✦ "
SCROLLED_ROWS = 8  # rows of text over the box that can only be a resumed conversation
TOP = "▄"
BOTTOM = "▀"
RULE = "─"
LINES = 5  # a paste of more lines shows as a placeholder
CHARS = 500  # and so does one of more UTF-16 code units

_BUSY_RE = re.compile(r"\(esc to cancel, [^()]*\)")
_FOOTER_HEAD = re.compile(r" workspace \(/directory\) +sandbox +/model")
_DIALOGS = (
    ("Allow execution of", "approval dialog (a tool)"),
    ("Allow modification", "approval dialog (edits)"),
    ("How would you like to authenticate", "authentication dialog"),
    ("Do you trust", "folder trust dialog"),
)


def placeholder(message: str) -> str | None:
    """``[Pasted Text: N lines]`` or ``[Pasted Text: N chars]`` (white space left out) for a message
    Gemini collapses, else ``None``."""
    text_ = message.replace("\r\n", "\n").replace("\r", "\n")
    lines = text_.count("\n") + 1
    units = len(text_.encode("utf-16-le", "surrogatepass")) // 2
    if lines > LINES:
        return re.escape(f"[PastedText:{lines}lines]")
    if units > CHARS:
        return re.escape(f"[PastedText:{units}chars]")
    return None


def _full_line(row: Row, glyph: str, width: int) -> bool:
    return text(row) == glyph * width


def _on_box(row: Row) -> bool:
    style = row.style_at(0)
    return style is not None and style.bg is not None


def _row_text(row: Row, start: int) -> tuple[str, bool]:
    """The row's text from ``start`` on (the cursor cell kept as text), and whether the cursor sits there."""
    pieces = []
    cursor = False
    skip = start
    for run in row.runs:
        piece = run.text[skip:] if skip else run.text
        skip = max(0, skip - len(run.text))
        cursor = cursor or (run.style.inverse and bool(piece))
        pieces.append(piece)
    return "".join(pieces).rstrip(" "), cursor


class Gemini061(AgentScreen):
    """Reads the screens of Gemini CLI 0.61."""

    agent_name = "gemini"
    dialect = DIALECT
    release = VERSION
    placeholder_of = staticmethod(placeholder)

    def conversation_shown(self, snapshot: PaneSnapshot) -> bool:
        rows = parse(snapshot.ansi)
        rules = [i for i, r in enumerate(rows) if _full_line(r, RULE, snapshot.width)]
        above = [r for r in rows[: rules[-1]] if not blank(r)] if rules else []
        if any(r.text.startswith(REPLY) or _is_prompt_row(r) for r in above):
            return True  # a turn of the conversation is drawn over the box
        # A reply long enough to push its own first row and the banner away: a screenful of text, not
        # the few rows of a frame drawn before the banner.
        return not any(BANNER in r.text for r in above) and len(above) >= SCROLLED_ROWS

    def read(self, rows: tuple[Row, ...], snapshot: PaneSnapshot, renderer: Renderer) -> BoxReading:
        width = snapshot.width
        last = max(i for i, r in enumerate(rows) if not blank(r))
        head = _footer_head(rows, last)
        if head is None or head < 3:
            dialog = _find_dialog(rows, last)
            if dialog is not None:
                return BoxReading(state=ScreenState.DIALOG, renderer=renderer, reason=NOT_READY, detail=dialog)
            return not_recognised(renderer, "no input box over the footer at the bottom of the screen")
        b = head - 1  # the box's bottom edge: a ▀ line (true colour) or a blank row (256 colours)
        if not (_full_line(rows[b], BOTTOM, width) or blank(rows[b])):
            return not_recognised(renderer, "no edge of the input box over the footer")
        p = b - 1
        while p > 0 and not _is_prompt_row(rows[p]) and (_on_box(rows[p]) or blank(rows[p])):
            p -= 1
        if p < 1 or not _is_prompt_row(rows[p]):
            shell = any(r.text.startswith(" ! ") and _on_box(r) for r in rows[max(0, p) : b])
            why = "shell mode (!): Enter would run the text as a command" if shell else ""
            return not_recognised(renderer, why or "the input box has no > (or YOLO *) row")
        t = p - 1  # the top edge: a ▄ line or a blank row
        if not (_full_line(rows[t], TOP, width) or blank(rows[t])):
            return not_recognised(renderer, "the input box has no top edge")
        if not any(_full_line(rows[i], RULE, width) for i in range(max(0, t - 3), t)):
            return not_recognised(renderer, "no rule over the input box: not the live box")
        first = rows[p]
        if any(not (blank(r) or r.text.startswith(INDENT)) for r in rows[p + 1 : b]):
            return not_recognised(renderer, "the input box's rows after the first are not continuation rows")
        first_text, first_cursor = _row_text(first, len(PROMPT))
        texts = [first_text] + [_row_text(r, len(INDENT))[0] for r in rows[p + 1 : b]]
        box_rows = b - p
        reading = box_reading(renderer, texts)
        empty = box_rows == 1 and first_cursor and first_text.strip(" ") == PLACEHOLDER
        if empty:
            reading = replace(reading, box_text="")
        if any(_BUSY_RE.search(text(rows[i])) for i in range(max(0, t - 4), t)):
            return busy_reading(reading, "the status row shows a running turn (esc to cancel)")
        if not empty:
            if reading.box_text.strip():
                return reading
            return replace(reading, detail="the input box holds blank lines")
        return empty_box(reading, snapshot, (len(PROMPT), p), "the input box is empty")


def _is_prompt_row(row: Row) -> bool:
    return row.text.startswith(PROMPTS) and _on_box(row)


def _footer_head(rows: tuple[Row, ...], last: int) -> int | None:
    """The footer's head row (`` workspace (/directory) … sandbox … /model``), when the footer (it and
    its values row) ends the screen."""
    for head in (last - 1, last):
        if head >= 0 and _FOOTER_HEAD.fullmatch(text(rows[head])) is not None:
            return head
    return None


def _find_dialog(rows: tuple[Row, ...], last: int) -> str | None:
    """The name of the bordered dialog that ends the screen, or ``None``."""
    if not text(rows[last]).startswith("╰"):
        return None
    top = last
    while top >= 0 and not text(rows[top]).startswith("╭"):
        top -= 1
    if top < 0:
        return None
    inside = [text(r) for r in rows[top : last + 1]]
    if not any(re.match(r"│ +● [1-9][0-9]*\. \S", t) for t in inside):
        return None
    for mark, name in _DIALOGS:
        if any(mark in t for t in inside):
            return name
    return "a dialog with numbered options"
