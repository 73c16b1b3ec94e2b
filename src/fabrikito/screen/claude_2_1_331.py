"""The dialect first seen in Claude Code 2.1.331: the held-message dialog grows two rows.

Everything else is drawn as in 2.1.326 (:mod:`fabrikito.screen.claude_2_1_326`).
What changed, from captures of the real binaries (2.1.331 and 2.1.332 draw alike):

* The held-message dialog shows ``Deliver by default: /config → Messaging →
  Messages from your other sessions`` (fg=246) above its two options and a
  bold ``ctrl+x a to always deliver ›`` row under them (``To always deliver in
  this session, see /config.`` when that binding is not a key chord); with
  fewer rows it leaves out its blank rows, the ``Message body`` heading, the
  reason, the pointer and then the last row.
* In the fullscreen renderer, dialogs end on the screen's last row (blank rows
  above them, not below): the dialog readers skip blank rows either way.
"""

from __future__ import annotations

from fabrikito.screen.ansi import Row
from fabrikito.screen.claude_2_1_316 import find_dialog_in
from fabrikito.screen.claude_2_1_326 import Claude21326

DIALECT = "claude-2.1.331"


class Claude21331(Claude21326):
    """Recognises the screens of the dialect first seen in Claude Code 2.1.331."""

    dialect = DIALECT

    def find_dialog(self, rows: tuple[Row, ...], width: int) -> str | None:
        return find_dialog_in(rows, width, held_hint=True)
