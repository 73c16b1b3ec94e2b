from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabrikito.base.errors import UsageError
from fabrikito.log import logview, msglog
from fabrikito.log.msglog import Outcome

SRC = Path(__file__).resolve().parents[2] / "src"
T0 = time.mktime((2026, 10, 30, 14, 5, 9, 0, 0, -1))


@pytest.fixture
def team(tmp_path: Path) -> Path:
    path = tmp_path / "team.toml"
    path.write_text('name = "sf"\n[[seat]]\nrole = "tl"\nsession = "sf-tl"\n[[seat]]\nrole = "be"\nsession = "sf-be"\n')
    log = tmp_path / ".state" / "sf" / "messages.log"
    msglog.append_checked(log, msglog.format_line(T0, "be", "tl", Outcome.SENT, "two\nlines"))
    msglog.append_checked(log, msglog.format_line(T0 + 60, "tl", "be", Outcome.NOT_SENT, "red \x1b[31m \u202e"))
    msglog.append_checked(log, msglog.format_line(T0 + 120, "owner", "tl", Outcome.DELIVERED, b"bad \xff byte"))
    with open(log, "ab") as handle:
        handle.write(b"some foreign text\n2026-10-30T14:09:00\tbe\ttl\tsent\ttorn")
    return path


def fabrikito(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=30,
        check=False,
    )


def test_table_is_aligned_decoded_and_safe(team: Path) -> None:
    done = fabrikito("log", "--team", str(team))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "2026-10-30T14:05:09  be → tl     sent              two"
    assert lines[1] == " " * len("2026-10-30T14:05:09  be → tl     sent              ") + "lines"
    assert lines[2] == "2026-10-30T14:06:09  tl → be     NOT-SENT          red \\x1B[31m \\xE2\\x80\\xAE"
    assert lines[3] == "2026-10-30T14:07:09  owner → tl  delivered         bad \\xFF byte"
    assert lines[4] == "?? line 4: 1 tab-separated fields, not 5: some foreign text"
    assert lines[5].startswith("?? line 5: torn: the line has no newline at its end: 2026-10-30T14:09:00")
    assert "\x1b" not in done.stdout


def test_filters(team: Path) -> None:
    def records(*args: str) -> list[str]:
        done = fabrikito("log", "--team", str(team), "--json", *args)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["version"] == 1
        return [r["time"][11:16] for r in data["records"] if r["kind"] == "record"]

    assert records() == ["14:05", "14:06", "14:07"]
    assert records("--from", "tl") == ["14:06"]
    assert records("--to", "tl") == ["14:05", "14:07"]
    assert records("--outcome", "not-sent", "--outcome", "DELIVERED") == ["14:06", "14:07"]
    assert records("--since", "2026-10-30T14:06", "--until", "2026-10-30T14:06:09") == ["14:06"]
    assert records("--since", "1d") == []


def test_json_record_and_foreign(team: Path) -> None:
    data = json.loads(fabrikito("log", "--team", str(team), "--json").stdout)
    first, _, third, foreign, torn = data["records"]
    assert first == {
        "kind": "record",
        "line": 1,
        "time": "2026-10-30T14:05:09",
        "sender": "be",
        "recipient": "tl",
        "outcome": "sent",
        "message": "two\nlines",
        "escaped": {"sender": "be", "recipient": "tl", "message": "two\\nlines"},
    }
    assert third["message"] == "bad \ufffd byte"
    assert third["escaped"]["message"] == "bad \\xFF byte"
    assert foreign == {
        "kind": "foreign",
        "line": 4,
        "reason": "1 tab-separated fields, not 5",
        "raw": "some foreign text",
    }
    assert torn["reason"].startswith("torn")


def test_missing_log_prints_nothing(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text('name = "sf"\n[[seat]]\nrole = "tl"\nsession = "sf-tl"\n')
    done = fabrikito("log", "--team", str(team))
    assert (done.returncode, done.stdout) == (0, "")


def test_log_through_a_symlink_is_refused(team: Path) -> None:
    log = team.parent / ".state" / "sf" / "messages.log"
    os.replace(log, team.parent / "elsewhere")
    log.symlink_to(team.parent / "elsewhere")
    done = fabrikito("log", "--team", str(team))
    assert done.returncode == 1
    assert "symlink" in done.stderr


def test_bad_options_are_usage_errors(team: Path) -> None:
    assert fabrikito("log", "--team", str(team), "--outcome", "maybe").returncode == 2
    done = fabrikito("log", "--team", str(team), "--since", "last tuesday")
    assert done.returncode == 2
    assert "not a time" in done.stderr


def test_parse_when() -> None:
    now = T0
    assert logview.parse_when("10m", now, "--since") == "2026-10-30T13:55:09"
    assert logview.parse_when("2026-10-30", now, "--since") == "2026-10-30T00:00:00"
    assert logview.parse_when("2026-10-30 14:05", now, "--since") == "2026-10-30T14:05:00"
    assert logview.parse_when("14:05:01", now, "--since") == "2026-10-30T14:05:01"
    with pytest.raises(UsageError):
        logview.parse_when("soon", now, "--since")


def test_follow_prints_lines_as_they_come(team: Path) -> None:
    log = team.parent / ".state" / "sf" / "messages.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fabrikito",
            "log",
            "--team",
            str(team),
            "--follow",
            "-n",
            "1",
            "--json",
            "--from",
            "em",
        ],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())  # -n 1: the last line shown; a foreign one is never filtered
        assert first["record"]["kind"] == "foreign"
        with open(log, "ab") as handle:  # completes the torn line
            handle.write(b"\n")
        msglog.append_hook(log, msglog.format_line(T0 + 300, "em", "tl", Outcome.SENT, "live"))
        got = json.loads(proc.stdout.readline())
        assert got["version"] == 1
        assert (got["record"]["sender"], got["record"]["message"]) == ("em", "live")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("2026-13-45", "not a real date"),
        ("2026-02-30T10:00", "not a real date"),
        ("25:99", "not a real date"),
        ("23:60:00", "not a real date"),
        ("99999999999999d", "reaches back"),
    ],
)
def test_parse_when_refuses_times_that_do_not_exist(value: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        logview.parse_when(value, time.time(), "--since")


def test_json_output_shows_no_character_a_terminal_acts_on() -> None:
    text = "a\u202eb\x9bc\x7fd\x1be"
    shown = logview.json_text({"message": text})
    assert json.loads(shown) == {"message": text}
    assert not any(ch in shown for ch in "\u202e\x9b\x7f\x1b")
    assert "\\u202e" in shown and "é" in logview.json_text("é")


@pytest.mark.parametrize("spill", [3, 20_000])
def test_a_query_streamed_prints_what_the_whole_list_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: int
) -> None:
    """log's table and --json, built a line at a time (rows spilled to a temporary file past SPILL), equal
    the table and the document made of every line at once: widths from the widest row, torn and foreign
    lines, many-line messages, bytes that are not UTF-8."""
    import io

    from fabrikito.log import logread

    log = tmp_path / "messages.log"
    messages: list[str | bytes] = ["one", "two\nlines", "ü and \x1b[31m", "é" * 30, b"bad \xff byte"] * 3
    raw = b"".join(
        msglog.format_line(T0 + 60 * i, "owner", f"seat{'x' * (i % 7)}", Outcome.DELIVERED, m)
        for i, m in enumerate(messages)
    )
    log.write_bytes(raw[:200] + b"not a log line \xff\xfe\n" + raw[200:] + b"2026-10-30T14:09:00\ttorn")
    items = logread.select(log)
    whole_text = logview.render(items, logview.Filters())
    whole_json = (
        logview.json_text(
            {"version": logview.JSON_VERSION, "records": [logview.item_json(n, it) for n, it in items]}, indent=2
        )
        + "\n"
    )
    monkeypatch.setattr(logview, "SPILL", spill)
    table = logview.Table()
    for number, item in logread.each(log):
        table.add(number, item, logview.Filters())
    assert "".join(table.lines()) == whole_text
    out = io.StringIO()
    logview.write_json(out, logread.each(log))
    assert out.getvalue() == whole_json and json.loads(out.getvalue())["records"]
    empty = io.StringIO()
    logview.write_json(empty, iter([]))
    assert empty.getvalue() == logview.json_text({"version": logview.JSON_VERSION, "records": []}, indent=2) + "\n"
