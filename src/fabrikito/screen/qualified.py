"""The agent releases this copy of fabrikito has qualified, and the dialect each speaks.

Written by ``scripts/qualify_releases.py`` from the captures of each release's
real binary (``tests/fixtures/releases/``, another agent's under its name); not
edited by hand.  A release enters only when every capture of its agent's
catalogue was read as expected.
"""

from __future__ import annotations

CLAUDE: dict[str, str] = {
    "2.1.316": "claude-2.1.316",
    "2.1.317": "claude-2.1.316",
    "2.1.318": "claude-2.1.316",
    "2.1.319": "claude-2.1.316",
    "2.1.321": "claude-2.1.316",
    "2.1.322": "claude-2.1.316",
    "2.1.323": "claude-2.1.316",
    "2.1.324": "claude-2.1.316",
    "2.1.325": "claude-2.1.316",
    "2.1.326": "claude-2.1.326",
    "2.1.327": "claude-2.1.326",
    "2.1.328": "claude-2.1.326",
    "2.1.329": "claude-2.1.326",
    "2.1.330": "claude-2.1.326",
    "2.1.331": "claude-2.1.331",
    "2.1.332": "claude-2.1.331",
}

CODEX: dict[str, str] = {
    "0.171.0": "codex-0.171",
}

GEMINI: dict[str, str] = {
    "0.61.0": "gemini-0.61",
}
