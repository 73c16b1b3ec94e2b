"""What the repository tracks: nothing a checkout makes for itself.

A worktree's `.tools` link to another checkout's tools was committed once; a clean clone then had a link
to a folder that is not there, and every test that needs Claude Code or tmux failed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MADE_BY_A_CHECKOUT = (".tools", ".venv", ".state", ".pytest_cache", ".mypy_cache", ".ruff_cache")


def test_nothing_a_checkout_makes_for_itself_is_tracked() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "--", *MADE_BY_A_CHECKOUT], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed == [], f"tracked, but made by scripts/setup or a run: {listed}; `git rm --cached` them"
