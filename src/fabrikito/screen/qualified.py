"""The Claude Code releases this copy of fabrikito has qualified, and the dialect each speaks.

Written by ``scripts/qualify_releases.py`` from the captures of each release's
real binary (``tests/fixtures/releases/``); not edited by hand.  A release
enters only when every capture of the catalogue was read as expected.
"""

from __future__ import annotations

CLAUDE: dict[str, str] = {
    "2.1.316": "claude-2.1.316",
}
