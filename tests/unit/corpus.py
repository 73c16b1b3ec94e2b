"""Where the shared recordings are: ``../shared`` beside the repository.

Tests that read them call :func:`shared_dir`.  Outside CI a checkout without
``../shared`` skips them, saying where it looked; with ``CI=true`` a missing
corpus is a failure, since a skip there would hide that nothing was checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests import userenv

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
RELEASE = "claude-code-2.1.316"


def shared_dir(*parts: str) -> Path:
    """``../shared/<parts>`` relative to the repository; skip (or, in CI, fail) when it is missing."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        what = f"the shared corpus is not at {path} (../shared beside the repository at {REPO})"
        if userenv.setting("CI").lower() in ("true", "1", "yes"):
            pytest.fail(f"{what}: CI must have it", pytrace=False)
        pytest.skip(what)
    return path
