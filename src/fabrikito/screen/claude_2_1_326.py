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
* The footer's notices are lower-case: ``ctrl+y to paste deleted text`` (after
  Ctrl-U), ``esc again to clear``; the ``tmux detected · scroll with PgUp/PgDn``
  and ``Scroll wheel is sending arrow keys`` notices are gone.
"""

from __future__ import annotations

from fabrikito.screen.ansi import Row
from fabrikito.screen.claude_2_1_316 import BASE_NOTICES, Box, Claude21316, find_box_in

DIALECT = "claude-2.1.326"
_RENAMED = {"Ctrl+Y to paste deleted text": "ctrl+y to paste deleted text", "Esc again to clear": "esc again to clear"}
_GONE = frozenset(
    {
        "tmux detected · scroll with PgUp/PgDn · or add 'set -g mouse on' to ~/.tmux.conf for wheel scroll",
        "Scroll wheel is sending arrow keys · use PgUp/PgDn to scroll",
    }
)
NOTICES = tuple(_RENAMED.get(n, n) for n in BASE_NOTICES if n not in _GONE)


class Claude21326(Claude21316):
    """Recognises the screens of the dialect first seen in Claude Code 2.1.326."""

    dialect = DIALECT
    notices = NOTICES

    def find_box(self, rows: tuple[Row, ...], width: int, fullscreen: bool) -> tuple[Box | None, str]:
        return find_box_in(rows, width, fullscreen, indicators=True)
