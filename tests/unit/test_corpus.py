from __future__ import annotations

from pathlib import Path

import pytest
from tests import userenv
from tests.unit import corpus


def test_the_corpus_is_found_beside_the_repository() -> None:
    assert Path(__file__).resolve().parents[2].parent / "shared" == corpus.SHARED


def test_a_missing_corpus_fails_in_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(corpus, "SHARED", tmp_path / "absent")
    # The run's settings are read from what the tests were started with (userenv.MACHINE), not os.environ.
    monkeypatch.setitem(userenv.MACHINE, "CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have it"):
        corpus.shared_dir("x")
    monkeypatch.delitem(userenv.MACHINE, "CI")
    with pytest.raises(pytest.skip.Exception, match="not at"):
        corpus.shared_dir("x")
