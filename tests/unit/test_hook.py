from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabrikito.log import hook, msglog

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hook-payloads"
SRC = Path(__file__).resolve().parents[2] / "src"
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"

TEAM = """\
name = "sf"
tmux_socket = "{socket}"

[[seat]]
role = "tl"
session = "sf-tl"

[[seat]]
role = "be"
session = "sf-be"

[[seat]]
role = "sec"
session = "sf-sec"
"""


@pytest.fixture
def team(tmp_path: Path) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(TEAM.format(socket=f"fk-hook-{uuid.uuid4().hex[:8]}"))
    return path


def log_of(team: Path) -> Path:
    return team.parent / ".state" / "sf" / "messages.log"


def run_hook(team: Path, payload: bytes, role: str = "be", *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "fabrikito.log.hook", "--team", str(team), "--role", role, *args],
        input=payload,
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )


def fields_after(team: Path, payload: bytes, role: str = "be") -> list[str]:
    done = run_hook(team, payload, role)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    lines = log_of(team).read_bytes().decode("utf-8").splitlines()
    assert len(lines) == 1
    fields = lines[0].split("\t")
    assert len(fields) == 5
    assert re.fullmatch(TIME, fields[0])
    return fields[1:]


def fixture(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("success-same-mode", ["be", "tl", "sent", "hook success test to sf-tl"]),
        ("failure-unknown-target", ["be", "no-such-seat", "NOT-SENT", "hello nobody"]),
        ("to-self", ["be", "be", "NOT-SENT", "hello myself"]),
        ("notify-when-idle-no-message", ["be", "tl", "NOTIFY-WHEN-IDLE", "<no message: notify when idle>"]),
        ("notify-when-idle-with-message", ["be", "tl", "sent", "please do X and tell me"]),
        ("uds-address", ["be", "uds:/tmp/cc-socks/10445.sock", "sent", "[body not logged: unresolved address]"]),
        (
            "uds-nonexistent-socket",
            ["be", "uds:/tmp/cc-socks/424242.sock", "NOT-SENT", "[body not logged: unresolved address]"],
        ),
        ("malformed", ["be", "?", "UNREADABLE", "<hook input could not be read>"]),
        ("not-an-object", ["be", "?", "UNREADABLE", "<hook input could not be read>"]),
        ("lone-surrogate", ["be", "tl", "sent", "before \ufffd after \ufffd end"]),
        ("surrogate-pair", ["be", "tl", "sent", "smile \U0001f600 ok"]),
        ("non-string-message", ["be", "tl", "sent", '{"task":"review","ids":[1,2]}']),
        ("to-sec", ["be", "sec", "sent", "[body not logged: sec]"]),
        ("notify-when-idle-to-sec", ["be", "sec", "NOTIFY-WHEN-IDLE", "<no message: notify when idle>"]),
        ("session-with-ref", ["be", "tl", "sent", "hello via listed name"]),
        ("other-team-session", ["be", "other-team-em", "sent", "hello other team"]),
        ("post-tool-use-failure", ["be", "tl", "NOT-SENT", "this one failed"]),
        (
            "control-characters",
            [
                "be",
                "tl",
                "sent",
                "tab\\there\\nnew line \\x1B[31mred\\x1B[0m \\xE2\\x80\\xAEevil\\xE2\\x80\\xAC back\\\\slash é ✓",
            ],
        ),
    ],
)
def test_hook_writes_the_right_line(team: Path, name: str, expected: list[str]) -> None:
    assert fields_after(team, fixture(name)) == expected


def test_message_from_sec_keeps_no_body(team: Path) -> None:
    assert fields_after(team, fixture("success-same-mode"), role="sec") == [
        "sec",
        "tl",
        "sent",
        "[body not logged: sec]",
    ]


def test_empty_stdin_is_unreadable(team: Path) -> None:
    assert fields_after(team, b"") == ["be", "?", "UNREADABLE", "<hook input could not be read>"]


def test_other_tools_are_not_logged(team: Path) -> None:
    done = run_hook(team, fixture("listagents"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not log_of(team).exists()


def test_two_megabyte_message(team: Path) -> None:
    payload = json.loads(fixture("success-same-mode"))
    text = ("line one\tof a big message\n" * 80_000)[: 2 * 1024 * 1024]
    payload["tool_input"]["message"] = text
    fields = fields_after(team, json.dumps(payload).encode())
    assert fields[:3] == ["be", "tl", "sent"]
    assert msglog.unescape_field(fields[3]) == text.encode()


def test_real_big_message_fixture(team: Path) -> None:
    fields = fields_after(team, fixture("big-message-1MB"))
    assert fields[:3] == ["be", "tl", "sent"]
    assert fields[3].startswith("big message line big message line")


def test_no_team_or_unreadable_team_writes_nothing_and_exits_0(tmp_path: Path) -> None:
    for args in ([], ["--team", str(tmp_path / "missing.toml")]):
        done = subprocess.run(
            [sys.executable, "-m", "fabrikito.log.hook", *args, "--role", "be"],
            input=fixture("success-same-mode"),
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(SRC)},
            timeout=30,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not (tmp_path / ".state").exists()


def test_roster_cache_follows_the_team_file(team: Path) -> None:
    fields_after(team, fixture("success-same-mode"))
    assert (team.parent / ".state" / ".hook-roster.team.toml").is_file()
    team.write_text(team.read_text().replace('session = "sf-tl"', 'session = "sf-lead"'))
    log_of(team).unlink()
    assert fields_after(team, fixture("success-same-mode"))[1] == "sf-tl"


@pytest.mark.parametrize("kind", ["symlink", "fifo", "hardlink"])
def test_hook_writes_nothing_through_a_link(team: Path, kind: str) -> None:
    log = log_of(team)
    log.parent.mkdir(parents=True)
    target = team.parent / "target"
    target.write_bytes(b"")
    if kind == "symlink":
        log.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(log)
    else:
        os.link(target, log)
    done = run_hook(team, fixture("success-same-mode"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert target.read_bytes() == b""


def test_hook_imports_stay_small(team: Path) -> None:
    """A fresh interpreter running the hook loads no json/re/tomllib/pathlib/subprocess/psutil/asyncio/cli."""
    (team.parent / ".state").mkdir()
    run_hook(team, fixture("success-same-mode"))  # writes the roster cache
    code = (
        "import sys, io\n"
        "from fabrikito.log import hook\n"
        "hook.main(['--team', sys.argv[1], '--role', 'be'], sys.stdin.buffer.read())\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(team)],  # -S, as seats run it (hook.command_line)
        input=fixture("success-same-mode"),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=30,
        check=True,
    )
    loaded = set(done.stdout.decode().split())
    heavy = {"json", "re", "tomllib", "pathlib", "subprocess", "psutil", "asyncio", "argparse", "typing"}
    heavy |= {
        "dataclasses",
        "fabrikito.cli",
        "fabrikito.base.tmux",
        "fabrikito.base.statedir",
        "fabrikito.team.teamfile",
    }
    heavy |= {"enum", "fabrikito.log.msglog", "fabrikito.base.errors"}
    assert loaded & heavy == set()
    assert len(log_of(team).read_bytes().splitlines()) == 2


# -- uds: addresses, with a real tmux server and a real listening socket -------------------------


@pytest.fixture
def tmux_team(team: Path) -> Iterator[tuple[Path, str]]:
    socket_name = re.search(r'tmux_socket = "([^"]+)"', team.read_text())
    assert socket_name is not None
    name = socket_name.group(1)
    yield team, name
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False, timeout=10)


LISTENER = (
    "import socket, sys, time\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1]); s.listen()\ntime.sleep(120)\n"
)


def _wait_for_socket(path: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_uds_address_of_a_roster_pane_resolves_to_its_role(tmux_team: tuple[Path, str], tmp_path: Path) -> None:
    team, server = tmux_team
    sock = tmp_path / "tl.sock"
    subprocess.run(
        [
            "tmux",
            "-L",
            server,
            "new-session",
            "-d",
            "-s",
            "sf-tl",
            "--",
            "sh",
            "-c",
            f"{sys.executable} -c '{LISTENER}' {sock}",
        ],
        check=True,
        timeout=10,
    )
    _wait_for_socket(sock)
    payload = json.loads(fixture("uds-address"))
    payload["tool_input"]["to"] = f"uds:{sock}"
    assert fields_after(team, json.dumps(payload).encode()) == ["be", "tl", "sent", "hello sf-tl via uds address"]


def test_uds_address_outside_the_roster_is_unresolved(tmux_team: tuple[Path, str], tmp_path: Path) -> None:
    team, server = tmux_team
    subprocess.run(["tmux", "-L", server, "new-session", "-d", "-s", "sf-be", "sleep", "60"], check=True, timeout=10)
    sock = tmp_path / "outsider.sock"
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(sock))
        listener.listen()
        payload = json.loads(fixture("uds-address"))
        payload["tool_input"]["to"] = f"uds:{sock}"
        started = time.monotonic()
        fields = fields_after(team, json.dumps(payload).encode())
        assert time.monotonic() - started < 10
    finally:
        listener.close()
    assert fields == ["be", f"uds:{sock}", "sent", "[body not logged: unresolved address]"]


def test_socket_owner_finds_this_process(tmp_path: Path) -> None:
    sock = tmp_path / "me.sock"
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(sock))
        listener.listen()
        assert hook.socket_owner(str(sock), deadline=time.monotonic() + 2) == os.getpid()
    finally:
        listener.close()
    assert hook.socket_owner(str(tmp_path / "none.sock"), deadline=time.monotonic() + 2) is None
    assert os.getppid() in hook.ancestors(os.getpid())


# -- in-process pieces -------------------------------------------------------------------------


def test_load_json_matches_json_loads() -> None:
    for text in ['{"a": [1, 2.5, -3e2, true, false, null, "\\u00e9\\ud83d\\ude00"]}', " [] ", '"x"', "NaN"]:
        assert repr(hook.load_json(text.encode())) == repr(json.loads(text))
    for bad in ["", "{", "[1,]", "{} {}", "nope"]:
        assert hook.load_json(bad.encode()) is None


def test_fix_surrogates() -> None:
    assert hook.fix_surrogates("a\ud800b") == "a\ufffdb"
    assert hook.fix_surrogates("\udc00") == "\ufffd"
    assert hook.fix_surrogates("\ud83d\ude00") == "\U0001f600"
    assert hook.fix_surrogates("plain é") == "plain é"


def test_main_never_raises_and_returns_0_and_logs_what_it_can(team: Path) -> None:
    assert hook.main(["--team"], b"") == 0  # no team file named: nowhere to log
    assert hook.main(["--role", "be"], b"{}") == 0
    assert not log_of(team).exists()
    assert hook.main(["--team=" + str(team), "--role=be"], b"\xff\xfe") == 0
    assert log_of(team).read_bytes().decode().split("\t")[1:] == [
        "be",
        "?",
        "UNREADABLE",
        "<hook input could not be read>\n",
    ]


SEND_TO_TL = b'{"tool_name":"SendMessage","tool_input":{"to":"sf-tl","message":"hi"},"tool_response":{"success":true}}'


def test_a_half_saved_team_file_logs_through_the_last_roster_that_parsed(team: Path) -> None:
    assert fields_after(team, SEND_TO_TL) == ["be", "tl", "sent", "hi"]
    log_of(team).unlink()
    team.write_text(team.read_text() + "\n[[seat]\nrole = ")  # an edit saved half-way
    assert fields_after(team, SEND_TO_TL) == ["be", "tl", "sent", "hi"]


def test_a_team_file_that_never_parsed_logs_the_recipient_as_given(team: Path) -> None:
    text = team.read_text()
    team.write_text(text + "\n[[seat]\nrole = ")
    assert fields_after(team, SEND_TO_TL) == ["be", "sf-tl", "sent", "hi"]


def test_a_deeply_nested_team_file_does_not_cost_the_line(team: Path) -> None:
    team.write_text(team.read_text().replace("\n", "\nzz = " + "[" * 5000 + "]" * 5000 + "\n", 1))
    assert fields_after(team, SEND_TO_TL)[2:] == ["sent", "hi"]


# -- payloads recorded from real seats on the live bench (tests/live/test_hook_live.py) -------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("live-success", ["a", "b", "sent", "hello b, from a"]),
        ("live-unknown-recipient", ["a", "no-such-seat", "NOT-SENT", "hello nobody"]),
        ("live-notify-when-idle", ["a", "b", "NOTIFY-WHEN-IDLE", "<no message: notify when idle>"]),
        (
            "live-uds-address",
            ["a", "uds:/tmp/cc-socks/22672.sock", "sent", "[body not logged: unresolved address]"],
        ),
    ],
)
def test_recorded_live_payloads(team: Path, name: str, expected: list[str]) -> None:
    team.write_text(team.read_text().replace('session = "sf-tl"', 'session = "lv-a"').replace("sf-be", "lv-b"))
    team.write_text(team.read_text().replace('role = "tl"', 'role = "a"').replace('role = "be"', 'role = "b"'))
    assert fields_after(team, fixture(name), role="a") == expected
