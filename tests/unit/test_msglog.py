from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabrikito.log import msglog
from fabrikito.log.msglog import Foreign, LogWriteError, Outcome, Record

# Anything the log must never hold raw: C0 controls (tab and newline included), DEL, C1, bidi.
RAW_CONTROL = re.compile(rb"[\x00-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def printf_b(field: str) -> bytes:
    """What bash's ``printf '%b'`` makes of a field: the spec's proof that the escaping is reversible."""
    done = subprocess.run(
        ["bash", "-c", 'printf "%b" "$1"', "bash", field], capture_output=True, check=True, timeout=10
    )
    return done.stdout


# -- escaping ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("plain text", "plain text"),
        ("a\\b", "a\\\\b"),
        ("one\ntwo\rthree\tfour", "one\\ntwo\\rthree\\tfour"),
        ("\x00\x1b\x7f", "\\x00\\x1B\\x7F"),
        ("\u009b", "\\xC2\\x9B"),
        ("\u202a\u202e\u2066\u2069", "\\xE2\\x80\\xAA\\xE2\\x80\\xAE\\xE2\\x81\\xA6\\xE2\\x81\\xA9"),
        ("é ✓ \u202f \u2065", "é ✓ \u202f \u2065"),
        (b"\xff\xfeok\n\xc3\xa9", "\\xFF\\xFEok\\n\\xC3\\xA9"),
        (b"caf\xc3\xa9", "café"),
        ("x\udcff", "x\\xFF"),
    ],
)
def test_escape_field_as_the_spec_says(value: str | bytes, escaped: str) -> None:
    assert msglog.escape_field(value) == escaped


def test_escape_field_failure_reads_log_field_failed() -> None:
    class Broken(str):
        def encode(self, *args: object, **kwargs: object) -> bytes:
            raise RuntimeError("no")

    assert msglog.escape_field(Broken("x")) == msglog.FIELD_FAILED


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=64), st.text(max_size=32).map(lambda s: s.encode("utf-8", "surrogatepass"))))
def test_property_one_line_no_raw_control_and_printf_b_gives_back_the_bytes(data: bytes) -> None:
    line = msglog.format_line(0, data, "tl", Outcome.SENT, data)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    fields = line[:-1].split(b"\t")
    assert len(fields) == 5
    assert not RAW_CONTROL.search(line[:-1].replace(b"\t", b" "))
    for field in (fields[1], fields[4]):
        text = field.decode("utf-8")
        assert printf_b(text) == data
        assert msglog.unescape_field(text) == data
    record = msglog.parse_line(line)
    assert isinstance(record, Record)
    assert (record.sender, record.message) == (data, data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_unescape_inverts_escape(data: bytes) -> None:
    assert msglog.unescape_field(msglog.escape_field(data)) == data


def test_unescape_refuses_escapes_the_log_never_writes() -> None:
    for bad in ("\\", "a\\q", "\\x4", "\\xZZ"):
        with pytest.raises(ValueError):
            msglog.unescape_field(bad)


# -- lines ------------------------------------------------------------------------


def test_format_line_fields_and_local_time() -> None:
    line = msglog.format_line(1_800_000_000, "em", "sec", Outcome.NOT_DELIVERED, "hi\tthere")
    when, sender, recipient, outcome, message = line.decode().rstrip("\n").split("\t")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", when)
    assert when == msglog.local_time(1_800_000_000)
    assert (sender, recipient, outcome, message) == ("em", "sec", "NOT-DELIVERED", "hi\\tthere")


def test_outcome_values() -> None:
    assert [o.value for o in Outcome] == [
        "sent",
        "NOT-SENT",
        "NOTIFY-WHEN-IDLE",
        "UNREADABLE",
        "delivered",
        "NOT-DELIVERED",
        "FLUSHED",
        "NOT-FLUSHED",
        "FLUSH-NOTHING",
        "QUEUED",
        "EXPIRED",
        "UNCERTAIN",
        "DROPPED",
        "SET-ASIDE",
    ]


def test_body_for_sec_rule_keeps_placeholders() -> None:
    assert msglog.body_for("em", "sec", "the finding") == msglog.BODY_NOT_LOGGED_SEC
    assert msglog.body_for("sec", "em", "the rating") == msglog.BODY_NOT_LOGGED_SEC
    assert msglog.body_for("sec", "em", msglog.NO_MESSAGE_NOTIFY) == msglog.NO_MESSAGE_NOTIFY
    assert msglog.body_for("sec", "em", msglog.FLUSH_MESSAGE) == msglog.FLUSH_MESSAGE
    assert msglog.body_for("em", "api", "in full") == "in full"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"2026-10-30T14:05:09\tem\tapi\tsent\tno newline", "torn"),
        (b"hello world\n", "fields, not 5"),
        (b"yesterday\tem\tapi\tsent\thi\n", "time"),
        (b"2026-10-30T14:05:09\tem\tapi\t\x1b\thi\n", "outcome"),
        (b"2026-10-30T14:05:09\tem\tapi\tsent\tred \x1b[31m\n", "raw control"),
        (b"2026-10-30T14:05:09\tem\tapi\tsent\t\\q\n", "not escaped"),
        (b"2026-10-30T14:05:09\tem\tapi\tsent\t\xff\n", "UTF-8"),
    ],
)
def test_parse_line_foreign_lines(raw: bytes, reason: str) -> None:
    item = msglog.parse_line(raw)
    assert isinstance(item, Foreign)
    assert reason in item.reason
    assert item.raw == raw


# -- appending: checked (say, flush) --------------------------------------------------


def _links(tmp_path: Path) -> dict[str, Path]:
    """messages.log replaced by a symlink, a FIFO and a hard link, each in its own state dir."""
    made = {}
    for kind in ("symlink", "fifo", "hardlink"):
        state = tmp_path / kind
        state.mkdir()
        log = state / "messages.log"
        target = tmp_path / f"{kind}-target"
        if kind == "symlink":
            target.write_bytes(b"")
            log.symlink_to(target)
        elif kind == "fifo":
            os.mkfifo(log)
        else:
            target.write_bytes(b"")
            os.link(target, log)
        made[kind] = log
    return made


def test_append_checked_appends_one_line(tmp_path: Path) -> None:
    log = tmp_path / ".state" / "acme" / "messages.log"
    line = msglog.format_line(None, "owner", "em", Outcome.DELIVERED, "hi")
    msglog.append_checked(log, line)
    msglog.append_checked(log, line)
    assert log.read_bytes() == line * 2
    assert oct(os.lstat(log).st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("kind", ["symlink", "fifo", "hardlink"])
def test_append_checked_writes_nothing_through_a_link(tmp_path: Path, kind: str) -> None:
    log = _links(tmp_path)[kind]
    with pytest.raises(LogWriteError) as info:
        msglog.append_checked(log, b"2026-10-30T14:05:09\towner\tem\tdelivered\thi\n")
    assert info.value.exit_code == 1
    assert "could not be written" in info.value.message
    assert {"symlink": "remove the link", "fifo": "remove it", "hardlink": "remove the other name"}[kind] in (
        info.value.message
    )
    _assert_nothing_written(tmp_path, kind)


def _assert_nothing_written(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        assert os.path.exists(tmp_path / "fifo" / "messages.log")
    else:
        assert (tmp_path / f"{kind}-target").read_bytes() == b""


# -- appending: the hook's path --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["symlink", "fifo", "hardlink"])
def test_append_hook_writes_nothing_through_a_link(tmp_path: Path, kind: str) -> None:
    log = _links(tmp_path)[kind]
    reader = None
    if kind == "fifo":  # a reader waiting on the FIFO must get nothing either
        got: list[bytes] = []
        fd = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
        reader = threading.Thread(target=lambda: got.append(os.read(fd, 100) if _wait(fd) else b""))
        reader.start()
    assert msglog.append_hook(log, b"2026-10-30T14:05:09\tem\tapi\tsent\thi\n") is False
    if reader is not None:
        reader.join()
        assert got == [b""]
    _assert_nothing_written(tmp_path, kind)


def _wait(fd: int) -> bool:
    import select

    ready, _, _ = select.select([fd], [], [], 0.3)
    return bool(ready)


def test_append_hook_creates_state_dir_and_appends(tmp_path: Path) -> None:
    log = tmp_path / ".state" / "acme" / "messages.log"
    assert msglog.append_hook(log, b"one\n") is True
    assert msglog.append_hook(str(log), b"two\n") is True
    assert log.read_bytes() == b"one\ntwo\n"
    assert oct(os.lstat(log.parent).st_mode & 0o777) == "0o700"


def test_append_hook_never_raises(tmp_path: Path) -> None:
    assert msglog.append_hook(tmp_path / "no" / "such" / "deep" / "log", b"x\n") is False
    assert msglog.append_hook(tmp_path, b"x\n") is False


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    log = tmp_path / "messages.log"
    big = "x" * 100_000

    def writer(n: int) -> None:
        for i in range(50):
            msglog.append_hook(log, msglog.format_line(0, f"w{n}", "em", Outcome.SENT, f"{i}:{big}"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = log.read_bytes().splitlines(keepends=True)
    assert len(lines) == 200
    assert all(isinstance(msglog.parse_line(line), Record) for line in lines)
