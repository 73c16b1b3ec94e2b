"""The screen recogniser for Codex CLI 0.171 (dialect ``codex-0.171``).

Facts from the captures of the real binary (``other-agents/README.md`` and
``tests/fixtures/releases/codex/``).  Codex draws on the alternate screen; at
its bottom, the composer and a footer::

    • Working (3s • esc to interrupt)          only while a turn runs and no reply text streams

    › Ask Codex to do anything                 the prompt row: › bold (no dim, no reverse, no
      continuation rows, indented two spaces   background); an empty box shows a dim placeholder
                                               one blank row
      standin-model default · <cwd> · <title>  footer: the model line (model name and folder coloured)
      ← for agents · ? for shortcuts   ⚠ …     and a hint row (known hints only)

* The transcript's echo of a prompt also starts with ``›`` but is bold *and*
  dim on a grey background (238, or RGB with ``COLORTERM=truecolor``, as
  every colour Codex draws then); a dialog's chosen option starts with a
  bold *reverse* ``›`` (``› 1. Yes, proceed (y)``).  Only the prompt row's
  style, its place right above the footer, and the rows between them being
  continuation rows make the live composer.
* In a narrow pane the model line's title wraps onto more indented rows (in
  its colour) and the hint row is cut at the edge; a composer that fills the
  screen pushes the footer out.
* A composer taller than its space scrolls: its first visible row still
  starts with ``›`` and carries a dim ``↑`` at the right edge, and the
  footer is gone (the box is *full*, its top not visible).
* Busy: the working line above the composer; *or* a prompt echoed in the
  transcript with no end of turn after it (``Worked for …`` or ``■ …``):
  Codex hides the working line while reply text streams, so a streaming
  reply shows only as a reply with no ``Worked for`` under it yet; *or*
  the hint ``tab to queue message`` (text typed while busy).  With neither an
  echo nor an end of turn on the screen and no start banner, a turn may be
  running off the top of the screen: read as busy too (fail closed).
* A paste of more than 1000 characters (Unicode code points, CR LF and CR
  read as one newline) shows as ``[Pasted Content N chars]``.

Anything else fails closed.  See ``docs/screen-recognition.md``.
"""

from __future__ import annotations

import re

from fabrikito.base.values import replace
from fabrikito.screen import NOT_READY, BoxReading, PaneSnapshot, Renderer, ScreenState
from fabrikito.screen.agentscreen import (
    AgentScreen,
    blank,
    box_reading,
    busy_reading,
    empty_box,
    not_recognised,
    text,
)
from fabrikito.screen.ansi import Row

VERSION = "0.171.0"
DIALECT = "codex-0.171"
PROMPT = "›"
INDENT = "  "
COLLAPSE_CHARS = 1000  # a longer paste shows as a placeholder

_WORKING_RE = re.compile(r"[•◦] \S.* \([^()]*esc to interrupt\)")
_HINTS = ("← for agents · ? for shortcuts", "? for shortcuts", "tab to queue message")
_WARNINGS_RE = re.compile(r"⚠ (?P<n>[1-9][0-9]*) warnings?(?: .*)?")
_MIN_CUT = 3  # the least of a hint cut at the pane's edge that still counts
_MAX_WRAPS = 3  # rows the model line's title may wrap onto
_BUSY_HINT = "tab to queue message"
_BANNER = ">_ OpenAI Codex (v"
_OPTION_RE = re.compile(r"› [1-9][0-9]*\. \S")
_DIALOGS = (
    ("Would you like to run the following command?", "approval dialog (a command)"),
    ("Would you like to make the following edits?", "approval dialog (edits)"),
    ("Trust this folder?", "folder trust dialog"),
)
_WARNINGS_VIEW = "esc dismiss & close"


def placeholder(message: str) -> str | None:
    """``[Pasted Content N chars]`` (white space left out) for a message Codex collapses, else ``None``."""
    count = len(message.replace("\r\n", "\n"))
    if count <= COLLAPSE_CHARS:
        return None
    return re.escape(f"[PastedContent{count}chars]")


# -- rows --------------------------------------------------------------------------------------------


def _is_prompt(row: Row) -> bool:
    t = row.text
    if not t.startswith(PROMPT) or (len(t) > 1 and t[1] != " "):
        return False
    style = row.style_at(0)
    return style is not None and style.bold and not style.dim and not style.inverse and style.bg is None


def _is_echo(row: Row) -> bool:
    """A prompt echoed in the transcript: its ``›`` bold and dim, on a background (238 in 256 colours,
    an RGB grey with ``COLORTERM=truecolor``)."""
    style = row.style_at(0)
    return (
        row.text.startswith(PROMPT + " ") and style is not None and style.bold and (style.dim or style.bg is not None)
    )


def _is_turn_end(row: Row) -> bool:
    t = text(row)
    return t.startswith("  Worked for ") or t.startswith("■ ")


def _is_continuation(row: Row) -> bool:
    return blank(row) or row.text.startswith(INDENT)


def _is_model_line(row: Row) -> bool:
    """``  <model> · <cwd>[ · <title>]``: the model in its colour, then the folder in another one (223 and
    151 in 256 colours, RGB colours with ``COLORTERM=truecolor``)."""
    if not row.text.startswith(INDENT) or " · " not in row.text:
        return False
    first, second = row.style_at(2), row.style_at(row.text.index(" · ") + 3)
    return first is not None and first.fg is not None and second is not None and second.fg not in (None, first.fg)


def _hint_ok(segment: str, cut: bool) -> bool:
    """A known hint; with ``cut``, also the start of one (the pane's edge cut the row)."""
    known = list(_HINTS)
    warnings = _WARNINGS_RE.fullmatch(segment)
    if warnings is not None:
        n = int(warnings.group("n"))
        known.append(f"⚠ {n} warning{'' if n == 1 else 's'} · f2 to view")
    if segment in known:
        return True
    return cut and len(segment) >= _MIN_CUT and any(k.startswith(segment) for k in known)


def _is_hint_row(row: Row, width: int) -> bool:
    t = text(row)
    segments = [s for s in re.split(r" {2,}", t.strip(" ")) if s]
    if not segments or not t.startswith(" "):
        return False
    cut = len(t) >= width - 2
    return all(_hint_ok(s, cut and i == len(segments) - 1) for i, s in enumerate(segments))


def _is_title_wrap(row: Row) -> bool:
    """A row the model line's title wrapped onto: indented, its text in a colour (the title's)."""
    t = text(row)
    if not t.startswith(INDENT) or not t.strip(" "):
        return False
    style = row.style_at(len(t) - len(t.lstrip(" ")))
    return style is not None and style.fg is not None and not style.dim and not style.bold


def _footer_rows(rows: tuple[Row, ...], last: int, width: int) -> int:
    """How many rows the footer ends the screen with: the model line (with the rows its title and folder
    wrap onto: indented, coloured, maybe themselves looking like a model line), then the hint row; either
    may be missing.  The model line is the highest such row with a blank row above it."""
    hint = _is_hint_row(rows[last], width)
    above = last - 1 if hint else last
    found = None
    k = above
    while k >= 0 and above - k <= _MAX_WRAPS and (_is_model_line(rows[k]) or _is_title_wrap(rows[k])):
        if _is_model_line(rows[k]) and k > 0 and blank(rows[k - 1]):
            found = k
        k -= 1
    if found is not None:
        return last - found + 1
    return 1 if hint else 0


def _split(row: Row, start: int) -> tuple[str, str]:
    """The row's text from ``start`` on, and its dim part (the placeholder, the scroll markers)."""
    plain: list[str] = []
    dim: list[str] = []
    skip = start
    for run in row.runs:
        piece = run.text[skip:] if skip else run.text
        skip = max(0, skip - len(run.text))
        (dim if run.style.dim else plain).append(piece)
    return "".join(plain).rstrip(" "), "".join(dim).strip(" ")


# -- the recogniser ------------------------------------------------------------------------------------


class Codex0171(AgentScreen):
    """Reads the screens of Codex CLI 0.171."""

    agent_name = "codex"
    dialect = DIALECT
    release = VERSION
    placeholder_of = staticmethod(placeholder)

    def read(self, rows: tuple[Row, ...], snapshot: PaneSnapshot, renderer: Renderer) -> BoxReading:
        last = max(i for i, r in enumerate(rows) if not blank(r))
        footer = _footer_rows(rows, last, snapshot.width)
        end = last - footer
        if footer:
            if end < 0 or not blank(rows[end]):
                return not_recognised(renderer, "the footer is not under a blank row")
            end -= 1
        p = end
        while p >= 0 and not _is_prompt(rows[p]) and _is_continuation(rows[p]):
            p -= 1
        if p < 0 or not _is_prompt(rows[p]):
            dialog = _find_dialog(rows)
            if dialog is not None:
                return BoxReading(state=ScreenState.DIALOG, renderer=renderer, reason=NOT_READY, detail=dialog)
            return not_recognised(renderer, "no composer (a › prompt row over the footer) at the bottom")
        first_text, first_dim = _split(rows[p], len(PROMPT) + 1)
        scrolled = first_dim.endswith("↑")
        if not footer and not scrolled and last < snapshot.height - 2:
            # A composer filling the screen pushes the footer out; anywhere else it has one.
            return not_recognised(renderer, "the composer has no footer under it")
        texts = [first_text]
        dims = [first_dim.removesuffix("↑").strip(" ")]
        for i in range(p + 1, end + 1):
            row_text, row_dim = _split(rows[i], len(INDENT))
            texts.append(row_text)
            dims.append(row_dim)
        end_hidden = dims[-1].endswith("↓")
        dims[-1] = dims[-1].removesuffix("↓").strip(" ")
        box_rows = end - p + 1
        reading = box_reading(
            renderer, texts, top_visible=not scrolled, full=scrolled or end_hidden, ends_screen=not end_hidden
        )
        busy = _busy(rows, p, last)
        if busy:
            return busy_reading(reading, busy)
        placeholder_only = box_rows == 1 and first_text == "" and bool(dims[0])
        if any(dims[1:]) or (dims[0] and not placeholder_only):
            return replace(reading, state=ScreenState.NOT_RECOGNISED, reason=NOT_READY, detail="dim text in the box")
        if reading.box_text.strip():
            return reading
        if box_rows != 1 or not placeholder_only:
            return replace(reading, detail="the input box holds blank lines")
        return empty_box(reading, snapshot, (len(PROMPT) + 1, p), f"the input box is empty ({dims[0]})")


def _busy(rows: tuple[Row, ...], prompt: int, last: int) -> str:
    """Why the screen shows a turn running (empty when it does not)."""
    above = rows[:prompt]
    if any(_WORKING_RE.fullmatch(text(r)) for r in above):
        return "the working line (… esc to interrupt) shows"
    if any(text(r).strip(" ") == _BUSY_HINT or text(r).endswith(" " + _BUSY_HINT) for r in rows[prompt : last + 1]):
        return "the footer offers to queue the typed text (tab to queue message): a turn runs"
    echoes = [i for i, r in enumerate(above) if _is_echo(r)]
    ends = [i for i, r in enumerate(above) if _is_turn_end(r)]
    if echoes and (not ends or echoes[-1] > ends[-1]):
        return "a prompt was sent and its turn has not ended (no 'Worked for' line after it): a reply streams"
    if not echoes and not ends and not any(text(r).lstrip(" ").startswith(_BANNER) for r in above):
        return "neither a prompt, nor the end of a turn, nor the start banner on the screen: a turn may be running"
    return ""


def _inverse_at_start(row: Row) -> bool:
    style = row.style_at(0)
    return style is not None and style.inverse


def _find_dialog(rows: tuple[Row, ...]) -> str | None:
    """The name of a dialog drawn at the bottom of the screen instead of the composer, or ``None``."""
    texts = [text(r) for r in rows]
    last = max(i for i, t in enumerate(texts) if t)
    if texts[last].strip(" ").startswith("k keep") and _WARNINGS_VIEW in texts[last]:
        return "the startup warnings view (f2)"
    chosen = [i for i, r in enumerate(rows) if _OPTION_RE.match(r.text) and _inverse_at_start(r)]
    if not chosen:
        return None
    start = max(0, chosen[-1] - 12)
    for mark, name in _DIALOGS:
        if any(mark in t for t in texts[start : last + 1]):
            return name
    return "a dialog with numbered options"
