from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fabrikito.delivery import refusals
from fabrikito.delivery.refusals import RefusalClass


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    say_dir = tmp_path / "say"
    say_dir.mkdir()
    return tmp_path, say_dir


def reg(dirs: tuple[Path, Path], sender: str, role: str, text: str, now: float) -> RefusalClass:
    return refusals.register(dirs[0], dirs[1], sender=sender, role=role, text=text, now=now)


def test_same_text_same_sender_within_the_window_is_a_repeat(dirs: tuple[Path, Path]) -> None:
    assert reg(dirs, "em", "dev", "hi", 1000) is RefusalClass.BOX_TEXT
    assert reg(dirs, "em", "dev", "hi", 1100) is RefusalClass.BOX_TEXT_REPEAT
    assert reg(dirs, "qa", "dev", "hi", 1101) is RefusalClass.BOX_TEXT  # another sender
    assert reg(dirs, "em", "dev", "other", 1102) is RefusalClass.BOX_TEXT
    assert reg(dirs, "em", "dev", "hi", 1103) is RefusalClass.BOX_TEXT_REPEAT  # alternating does not hide it


def test_outside_the_window_is_not_a_repeat(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRIKITO_SAY_RESEND_WINDOW", "10")
    reg(dirs, "em", "dev", "hi", 1000)
    assert reg(dirs, "em", "dev", "hi", 1011) is RefusalClass.BOX_TEXT


def test_old_variable_names_are_ignored_and_bad_values_mean_the_default(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FABRIKITO_SAY_RESEND_WINDOW", raising=False)
    monkeypatch.delenv("FABRIKITO_SAY_NOTICE_COUNT", raising=False)
    monkeypatch.setenv("FACTORY_SAY_RESEND_WINDOW", "5")
    monkeypatch.setenv("FACTORY_SAY_NOTICE_COUNT", "2")
    assert (refusals.resend_window(), refusals.notice_count()) == (300, 3)  # the old names: the defaults
    reg(dirs, "em", "dev", "hi", 1000)
    assert reg(dirs, "em", "dev", "hi", 1010) is RefusalClass.BOX_TEXT_REPEAT  # not a 5-second window
    monkeypatch.setenv("FABRIKITO_SAY_RESEND_WINDOW", "7")
    monkeypatch.setenv("FABRIKITO_SAY_NOTICE_COUNT", "4")
    assert (refusals.resend_window(), refusals.notice_count()) == (7, 4)  # the new names are honoured
    monkeypatch.setenv("FABRIKITO_SAY_RESEND_WINDOW", "soon")
    monkeypatch.setenv("FABRIKITO_SAY_NOTICE_COUNT", "-1")
    assert (refusals.resend_window(), refusals.notice_count()) == (300, 3)


def test_only_the_last_eight_texts_are_kept(dirs: tuple[Path, Path]) -> None:
    for i in range(9):
        reg(dirs, "em", "dev", f"text {i}", 1000 + i)
    assert reg(dirs, "em", "dev", "text 0", 1010) is RefusalClass.BOX_TEXT
    assert reg(dirs, "em", "dev", "text 8", 1011) is RefusalClass.BOX_TEXT_REPEAT


def test_sec_is_never_hashed(dirs: tuple[Path, Path]) -> None:
    assert reg(dirs, "em", "sec", "secret", 1000) is RefusalClass.BOX_TEXT
    assert reg(dirs, "em", "sec", "secret", 1001) is RefusalClass.BOX_TEXT
    assert reg(dirs, "sec", "dev", "finding", 1002) is RefusalClass.BOX_TEXT
    assert reg(dirs, "sec", "dev", "finding", 1003) is RefusalClass.BOX_TEXT
    data = (dirs[1] / "box-sec.json").read_text()
    assert "hash" not in data


def test_refusals_log_has_no_message_and_no_hash(dirs: tuple[Path, Path]) -> None:
    reg(dirs, "em", "dev", "the secret text", 1000)
    reg(dirs, "em", "dev", "the secret text", 1001)
    lines = (dirs[0] / "say-refusals.log").read_text().splitlines()
    assert [line.split("\t")[1:] for line in lines] == [["em", "dev", "box-text"], ["em", "dev", "box-text-repeat"]]
    assert "secret" not in "".join(lines)
    record = dirs[1] / "box-dev.json"
    assert stat.S_IMODE(os.lstat(record).st_mode) == 0o600


def test_notice_after_three_refusals_until_cleared(dirs: tuple[Path, Path]) -> None:
    for i in range(2):
        reg(dirs, "em", "dev", f"t{i}", 1000 + i)
    assert refusals.notices(dirs[1], ["dev"]) == []
    reg(dirs, "em", "dev", "t2", 1005)
    [notice] = refusals.notices(dirs[1], ["dev", "qa"])
    assert (notice.role, notice.count, notice.last) == ("dev", 3, 1005)
    refusals.clear(dirs[1], "dev")
    assert refusals.notices(dirs[1], ["dev"]) == []
    assert reg(dirs, "em", "dev", "t2", 1006) is RefusalClass.BOX_TEXT


@pytest.mark.parametrize(
    "damaged",
    [
        b'{"count": "x"}',
        b'{"count": 5, "last": "yesterday"}',
        b'{"texts": [{"hash": 1, "time": "t"}], "count": 1e999}',
        b"[" * 100000,
        b"\xff\xfe",
        b'{"count": null, "texts": {"a": 1}}',
    ],
)
def test_a_damaged_record_is_read_as_what_can_be_read(tmp_path: Path, damaged: bytes) -> None:
    say_dir = tmp_path / "say"
    say_dir.mkdir(mode=0o700)
    refusals.record_path(say_dir, "dev").write_bytes(damaged)
    assert refusals.notices(say_dir, ["dev"]) == [] or refusals.notices(say_dir, ["dev"])[0].role == "dev"
    assert refusals.register(tmp_path, say_dir, sender="em", role="dev", text="x") is refusals.RefusalClass.BOX_TEXT
