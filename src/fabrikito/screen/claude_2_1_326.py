"""The dialect first seen in Claude Code 2.1.326: the fullscreen box marks hidden rows on its rules.

Everything else is drawn as in 2.1.316 (:mod:`fabrikito.screen.claude_2_1_316`).
What changed, from captures of the real binaries (2.1.326 to 2.1.330 draw alike):

* When the text is taller than the fullscreen box, its top rule reads
  ``─── ↑ N more ───… <session> ─`` (the marker fg=246, the rule fg=244) and
  the first visible row is a continuation row, not the ``❯`` prompt row;
  with rows hidden below, the bottom rule reads ``─── ↓ N more ───…``.
  Such a box is the live box, full, with its top out of view; with ``↓`` its
  end is not on the screen, so the Enter rule refuses it.
* The inline footer's mode line is one styled run (the text is the same).
"""

from __future__ import annotations

from fabrikito.screen.ansi import Row
from fabrikito.screen.claude_2_1_316 import Claude21316, _Box, _find_box

DIALECT = "claude-2.1.326"


class Claude21326(Claude21316):
    """Recognises the screens of the dialect first seen in Claude Code 2.1.326."""

    dialect = DIALECT

    def find_box(self, rows: tuple[Row, ...], width: int, fullscreen: bool) -> tuple[_Box | None, str]:
        return _find_box(rows, width, fullscreen, indicators=True)
