"""Parse ``tmux capture-pane -p -e`` output into rows of styled runs.

tmux writes one line per screen row and, with ``-e``, SGR sequences
(``ESC [ … m``) wherever the style changes.  The style carries over from one
line to the next (tmux compares each cell with the previous one, across line
ends), so the parser keeps one current style for the whole capture.

Only SGR is interpreted.  Every other escape (other CSI sequences, OSC such as
hyperlinks, two-byte escapes) and every other C0 control character is dropped;
a tab is kept as text.  Nothing here raises on odd input: an unknown or
malformed SGR parameter is ignored, and an unterminated escape at the end of
the text is dropped.
"""

from __future__ import annotations

import re

from fabrikito.base.values import field, frozen, replace

# A colour is a 256-colour palette index (the 16 basic colours are 0-15) or a
# 24-bit ``(r, g, b)`` triple.  ``None`` is the terminal's default colour.
Color = int | tuple[int, int, int]

ESC = "\x1b"
BEL = "\x07"


@frozen
class Style:
    """The SGR attributes of one cell."""

    fg: Color | None = None
    bg: Color | None = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    inverse: bool = False


PLAIN = Style()


@frozen
class Run:
    """A stretch of text in one style."""

    text: str
    style: Style = PLAIN


@frozen
class Row:
    """One screen row: its runs, in order, adjacent runs never of one style."""

    runs: tuple[Run, ...] = ()
    text: str = field(init=False, default="")  # the row's plain text: the run texts, concatenated

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", "".join(run.text for run in self.runs))

    def style_at(self, index: int) -> Style | None:
        """The style of the character at ``index`` of :attr:`text`, or ``None`` past its end."""
        if index < 0:
            return None
        pos = 0
        for run in self.runs:
            if index < pos + len(run.text):
                return run.style
            pos += len(run.text)
        return None


def _extended_color(params: list[list[int | None]], i: int) -> tuple[Color | None, int]:
    """Read a ``38``/``48`` colour starting at ``params[i]``; return it and how many params it used.

    Handles both forms: separate parameters (``38;5;N``, ``38;2;R;G;B``) and
    one colon-separated parameter (``38:5:N``, ``38:2:R:G:B``, ``38:2::R:G:B``).
    A colour it cannot read is ``None`` (the caller leaves the colour as it was).
    """
    head = params[i]
    if len(head) > 1:  # colon form: everything is in this one parameter
        sub = head[1:]
        if sub and sub[0] == 5 and len(sub) >= 2 and sub[1] is not None and 0 <= sub[1] <= 255:
            return sub[1], 1
        if sub and sub[0] == 2:
            rgb = [v for v in sub[1:] if v is not None]
            rgb = rgb[-3:] if len(sub) >= 5 else rgb  # 38:2:<colourspace>:R:G:B
            if len(rgb) == 3 and all(0 <= v <= 255 for v in rgb):
                return (rgb[0], rgb[1], rgb[2]), 1
        return None, 1
    kind = params[i + 1][0] if i + 1 < len(params) else None
    if kind == 5:
        if i + 2 < len(params):
            value = params[i + 2][0]
            if value is not None and 0 <= value <= 255:
                return value, 3
            return None, 3
        return None, len(params) - i
    if kind == 2:
        if i + 4 < len(params):
            r, g, b = params[i + 2][0], params[i + 3][0], params[i + 4][0]
            if r is not None and g is not None and b is not None and all(0 <= v <= 255 for v in (r, g, b)):
                return (r, g, b), 5
            return None, 5
        return None, len(params) - i
    return None, 2 if kind is not None else 1


def _parse_params(body: str) -> list[list[int | None]] | None:
    """Split an SGR parameter string into parameters and their colon parts; ``None`` if malformed."""
    if body == "":
        return [[0]]
    out: list[list[int | None]] = []
    for part in body.split(";"):
        subs: list[int | None] = []
        for sub in part.split(":"):
            if sub == "":
                subs.append(None)
            elif sub.isdigit() and sub.isascii():
                subs.append(int(sub))
            else:
                return None
        out.append(subs)
    return out


def apply_sgr(style: Style, body: str) -> Style:
    """The style after the SGR sequence ``ESC [ body m``."""
    key = (style, body)
    after = _SGR_SEEN.get(key)
    if after is None:
        after = _apply_sgr(style, body)
        if len(_SGR_SEEN) < _SGR_SEEN_MAX:
            _SGR_SEEN[key] = after
    return after


# A screen repeats a few styles and a few sequences hundreds of times: each
# (style, sequence) is worked out once per process.
_SGR_SEEN: dict[tuple[Style, str], Style] = {}
_SGR_SEEN_MAX = 4096


# The SGR codes that set or clear attributes (or the default colours), and what each changes.
_SGR_ATTRIBUTES: dict[int, dict[str, bool | None]] = {
    1: {"bold": True},
    2: {"dim": True},
    3: {"italic": True},
    4: {"underline": True},
    7: {"inverse": True},
    22: {"bold": False, "dim": False},
    23: {"italic": False},
    24: {"underline": False},
    27: {"inverse": False},
    39: {"fg": None},
    49: {"bg": None},
}


def _apply_sgr(style: Style, body: str) -> Style:
    params = _parse_params(body)
    if params is None:
        return style
    i = 0
    while i < len(params):
        code = params[i][0]
        if code is None:
            code = 0
        step = 1
        if code == 0:
            style = PLAIN
        elif code in _SGR_ATTRIBUTES:
            style = replace(style, **_SGR_ATTRIBUTES[code])
        elif 30 <= code <= 37:
            style = replace(style, fg=code - 30)
        elif 90 <= code <= 97:
            style = replace(style, fg=code - 90 + 8)
        elif 40 <= code <= 47:
            style = replace(style, bg=code - 40)
        elif 100 <= code <= 107:
            style = replace(style, bg=code - 100 + 8)
        elif code in (38, 48):
            color, step = _extended_color(params, i)
            if color is not None:
                style = replace(style, fg=color) if code == 38 else replace(style, bg=color)
        # anything else (blink, hidden, strike, fonts, underline colour...) changes nothing we read
        i += step
    return style


def _skip_escape(text: str, i: int) -> tuple[int, str | None]:
    """Skip the escape sequence starting at ``text[i]`` (an ESC).

    Return the index after it, and the SGR parameter string when it was an SGR
    sequence (``None`` for anything else).
    """
    n = len(text)
    if i + 1 >= n:
        return n, None
    kind = text[i + 1]
    if kind == "[":  # CSI: parameters and intermediates, then a final byte 0x40-0x7e
        j = i + 2
        while j < n and not ("\x40" <= text[j] <= "\x7e"):
            if text[j] == "\n":  # never let a broken sequence eat the next row
                return j, None
            j += 1
        if j >= n:
            return n, None
        if text[j] == "m":
            return j + 1, text[i + 2 : j]
        return j + 1, None
    if kind in "]PX^_":  # OSC, DCS, SOS, PM, APC: up to BEL or ESC \
        j = i + 2
        while j < n:
            if text[j] == BEL:
                return j + 1, None
            if text[j] == ESC and j + 1 < n and text[j + 1] == "\\":
                return j + 2, None
            if text[j] == "\n":
                return j, None
            j += 1
        return n, None
    if kind in "()*+-./#%" and i + 2 < n:  # charset designation and friends: three bytes
        return i + 3, None
    return i + 2, None


_EMPTY_ROW = Row()

# What interrupts plain text: every C0 control but tab, and DEL.
_SPECIAL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _parse_line(line: str, style: Style) -> tuple[Row, Style]:
    if not line:
        return _EMPTY_ROW, style  # most of a screen: one shared row (rows are values)
    runs: list[Run] = []
    i = 0
    n = len(line)
    while i < n:
        special = _SPECIAL.search(line, i)
        j = special.start() if special is not None else n
        if j > i:
            chunk = line[i:j]
            if runs and runs[-1].style == style:
                runs[-1] = Run(runs[-1].text + chunk, style)
            else:
                runs.append(Run(chunk, style))
        if special is None:
            break
        if line[j] == ESC:
            i, sgr = _skip_escape(line, j)
            if sgr is not None:
                style = apply_sgr(style, sgr)
        else:
            i = j + 1  # any other control character is dropped
    return Row(tuple(runs)), style


def parse(ansi: str) -> tuple[Row, ...]:
    """Rows of a ``capture-pane -p -e`` capture, top to bottom.

    One row per line; the newline that ends the last line does not start
    another row.  The style carries across lines, as tmux writes it.
    """
    lines = ansi.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rows: list[Row] = []
    style = PLAIN
    for line in lines:
        row, style = _parse_line(line.rstrip("\r"), style)
        rows.append(row)
    return tuple(rows)


def plain(ansi: str) -> str:
    """The capture without escapes: the rows' plain text joined with newlines."""
    return "\n".join(row.text for row in parse(ansi))
