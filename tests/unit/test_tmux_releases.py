"""Obtaining tmux 3.5a and 3.8 for the tests: once, offline afterwards, a clear error when it cannot."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests import tmuxreleases, userenv

from fabrikito.offline import tmux_releases
from fabrikito.offline.claude_setup import BenchError


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's archive out of reach (a port nothing listens on)."""
    monkeypatch.setattr(tmux_releases, "MIRROR", "http://127.0.0.1:9/debian")


@pytest.mark.parametrize("release", ["3.5a", "3.8"])
def test_an_installed_release_is_used_offline_and_its_wrapper_moves_with_it(
    release: str, tmp_path: Path, offline: None
) -> None:
    tmuxreleases.ensure(release)  # what setup installed (or installs now, once)
    (tmp_path / ".tools").mkdir()
    (tmp_path / ".tools" / f"tmux-{release}").symlink_to(tmux_releases.release_dir(release, tmuxreleases.REPO))
    binary = tmux_releases.ensure(release, tmp_path, env=userenv.tooling_env())
    assert binary == tmp_path / ".tools" / f"tmux-{release}" / "bin" / "tmux"
    assert tmux_releases.version_of(binary) == release


def test_without_the_archive_it_says_what_to_do_and_leaves_nothing(tmp_path: Path, offline: None) -> None:
    with pytest.raises(BenchError, match=r"Debian's archive .* run ./scripts/setup where it is reachable"):
        tmux_releases.ensure("3.8", tmp_path, env=userenv.tooling_env())
    assert [p.name for p in (tmp_path / ".tools").iterdir()] == [".tmux-releases.lock"]


def test_a_release_it_does_not_know_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match=r"tmux 2\.9 is not one .*\(known: 3\.5a, 3\.8\)"):
        tmux_releases.ensure("2.9", tmp_path)
    assert not (tmp_path / ".tools").exists()
