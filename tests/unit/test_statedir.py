from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fabrikito.base import statedir
from fabrikito.base.errors import StateFileError


def test_state_dir_is_created_0700(tmp_path: Path) -> None:
    team_dir = statedir.ensure_state_dir(tmp_path, "acme")
    assert team_dir == tmp_path / ".state" / "acme"
    for d in (tmp_path / ".state", team_dir):
        assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700


def test_state_dir_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".state").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StateFileError, match="symlink"):
        statedir.ensure_state_dir(tmp_path, "acme")


def test_append_line_creates_0600_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "log"
    statedir.append_line(path, b"one\n")
    statedir.append_line(path, b"two\n")
    assert path.read_bytes() == b"one\ntwo\n"
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600


def test_append_refuses_symlink_fifo_and_hard_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"")
    link = tmp_path / "symlink"
    link.symlink_to(target)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    hard = tmp_path / "hard"
    os.link(target, hard)
    for path, word in ((link, "symlink"), (fifo, "FIFO"), (hard, "hard link")):
        with pytest.raises(StateFileError, match=word):
            statedir.append_line(path, b"x\n")
    assert target.read_bytes() == b""


def test_describe_unsafe_accepts_missing_and_plain(tmp_path: Path) -> None:
    assert statedir.describe_unsafe(tmp_path / "missing") is None
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    assert statedir.describe_unsafe(plain) is None


def test_write_atomic_replaces_whole_file_0600(tmp_path: Path) -> None:
    path = tmp_path / "rec"
    statedir.write_atomic(path, b"first")
    statedir.write_atomic(path, b"second")
    assert path.read_bytes() == b"second"
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["rec"]


def test_write_atomic_refuses_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    (tmp_path / "rec").symlink_to(target)
    with pytest.raises(StateFileError):
        statedir.write_atomic(tmp_path / "rec", b"x")
    assert target.read_bytes() == b"keep"


def test_write_atomic_without_sync_is_still_whole_and_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "note.json"
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    statedir.write_atomic(path, b"old")
    assert len(synced) == 1  # synced by default
    statedir.write_atomic(path, b"new note", sync=False)
    assert len(synced) == 1  # not this time
    assert path.read_bytes() == b"new note" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.json"]  # no temporary file left
