"""The inbox client and its commands: discovery, token choice, payload, post, wait-idle, the CLI.

No mocks: registry files are the recorded 2.1.316 examples rewritten into a
temporary config directory with pids of real processes (this one, a process
that has exited), and the inbox is a real listening AF_UNIX socket.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit import corpus

from fabrikito import cli
from fabrikito.base import procs, values
from fabrikito.base.text import refusal_for
from fabrikito.inbox import client, protocol, send, sessions


def _recorded_registry() -> dict[str, dict[str, Any]]:
    data = json.loads(corpus.shared_dir(corpus.RELEASE, "registry-examples.json").read_text(encoding="utf-8"))
    return {k: dict(v) for k, v in data.items()}


def _own_start() -> str:
    raw = Path(f"/proc/{os.getpid()}/stat").read_text()
    return raw.rpartition(")")[2].split()[19]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


class Registry:
    """A config directory with a ``sessions/`` folder, filled from the recorded examples."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sessions = root / "sessions"
        self.sessions.mkdir(parents=True)
        self.env = {"CLAUDE_CONFIG_DIR": str(root), "HOME": str(root.parent)}
        self.recorded = _recorded_registry()

    def add(
        self,
        name: str,
        *,
        pid: int | None = None,
        cwd: str = "/work/a",
        socket_path: str | None = None,
        proc_start: str | None = None,
        status: str = "idle",
        peer_token: str | None = "ab" * 16,
        template: str = "seat-a",
        **extra: Any,
    ) -> dict[str, Any]:
        data = dict(self.recorded.get(template) or next(iter(self.recorded.values())))
        pid = os.getpid() if pid is None else pid
        data.update(
            pid=pid,
            name=name,
            cwd=cwd,
            status=status,
            procStart=_own_start() if proc_start is None else proc_start,
            messagingSocketPath=socket_path or f"/tmp/cc-socks/{pid}-{name}.sock",
        )
        own = sessions.own_pid_domain()
        if own is not None:
            data["pidDomain"] = own
        data.update(extra)
        data = {k: v for k, v in data.items() if v is not None}
        # Claude Code names the file by pid; tests with two entries for one pid add a suffix.
        path = self.sessions / f"{pid}.json"
        if path.exists():
            path = self.sessions / f"{pid}-{name}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        if peer_token is not None and data.get("messagingSocketPath"):
            key = Path(sessions.key_path(self.sessions, pid, data["messagingSocketPath"]))
            key.write_text(json.dumps({"peerToken": peer_token, "procStart": data["procStart"]}), encoding="utf-8")
        return data

    def entries(self) -> list[sessions.SessionEntry]:
        return sessions.list_sessions(self.env)


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "claude")


class Listener:
    """A listening AF_UNIX socket that records every connection's bytes."""

    def __init__(self, path: Path, *, read: bool = True) -> None:
        self.path = path
        self.read = read
        self.received: list[bytes] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self.read:
                self._held = conn
                continue
            with conn:
                chunks = []
                while True:
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
                self.received.append(b"".join(chunks))

    def wait(self, count: int = 1, timeout: float = 5.0) -> list[bytes]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.received

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        self._thread.join(2)


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Listener]:
    sock = Listener(tmp_path / "client.sock")
    yield sock
    sock.close()


# -- config directory and registry ------------------------------------------------------------


def test_config_dir_prefers_claude_config_dir(tmp_path: Path) -> None:
    assert procs.config_dir({"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "HOME": "/h"}) == tmp_path / "cfg"
    assert procs.config_dir({"HOME": "/h"}) == Path("/h/.claude")
    assert procs.config_dir({"CLAUDE_CONFIG_DIR": "", "HOME": "/h"}) == Path("/h/.claude")


def test_key_file_names_match_the_recorded_ones() -> None:
    path = corpus.shared_dir(corpus.RELEASE, "registry-key-file-examples.json")
    for example in json.loads(path.read_text(encoding="utf-8")):
        pid = int(example["file"].split(".")[0])
        name = os.path.basename(sessions.key_path("/x", pid, f"/tmp/cc-socks/{pid}.sock"))
        assert name == example["file"]


def test_recorded_registry_parses_every_field(registry: Registry) -> None:
    for template, data in registry.recorded.items():
        entry = sessions.parse_entry(Path(f"/x/{data['pid']}.json"), data)
        assert entry is not None
        assert entry.name == template
        assert entry.pid == data["pid"]
        assert entry.socket_path == data["messagingSocketPath"]
        assert entry.cwd == data["cwd"]
        assert entry.tmux == data["tmux"]
        assert entry.status == data["status"]
        assert entry.proc_start == data["procStart"]
        assert entry.permission_mode is None  # 2.1.316 records none


def test_liveness_alive_dead_reused(registry: Registry) -> None:
    registry.add("me")
    registry.add("gone", pid=_dead_pid())
    registry.add("reused", pid=os.getpid(), proc_start="1")
    by_name = {e.name: e for e in registry.entries()}
    assert by_name["me"].liveness is sessions.Liveness.ALIVE
    assert by_name["gone"].liveness is sessions.Liveness.DEAD
    assert by_name["reused"].liveness is sessions.Liveness.REUSED
    assert by_name["gone"].stale and by_name["reused"].stale and not by_name["me"].stale


def test_other_pid_domain_cannot_be_checked(registry: Registry) -> None:
    registry.add("far", pid=_dead_pid(), pidDomain="linux:0000:pid:[1]")
    (entry,) = registry.entries()
    assert entry.liveness is sessions.Liveness.UNKNOWN
    assert not entry.stale


def test_unreadable_files_are_skipped(registry: Registry) -> None:
    registry.add("ok")
    (registry.sessions / "999.json").write_text("{not json", encoding="utf-8")
    (registry.sessions / "998.json").write_text("[1, 2]", encoding="utf-8")
    (registry.sessions / "997.json").write_text('{"name": "no pid"}', encoding="utf-8")
    assert [e.name for e in registry.entries()] == ["ok"]


def test_missing_sessions_dir_is_empty(tmp_path: Path) -> None:
    assert sessions.list_sessions({"CLAUDE_CONFIG_DIR": str(tmp_path / "nothing")}) == []


# -- find -----------------------------------------------------------------------------------


def test_find_by_name(registry: Registry) -> None:
    registry.add("seat-a", cwd="/w/a")
    registry.add("seat-b", cwd="/w/b", pid=os.getppid(), proc_start=None)
    entry = sessions.find("seat-a", env=registry.env)
    assert entry.name == "seat-a"
    assert entry.cwd == "/w/a"


def test_find_ambiguous_lists_candidates(registry: Registry) -> None:
    registry.add("dup", cwd="/w/one", socket_path="/tmp/cc-socks/1.sock")
    registry.add("dup", cwd="/w/two", socket_path="/tmp/cc-socks/2.sock")
    with pytest.raises(sessions.AmbiguousError) as caught:
        sessions.find("dup", env=registry.env)
    err = caught.value
    assert err.exit_code == sessions.EXIT_AMBIGUOUS
    assert len(err.candidates) == 2
    for part in ("/w/one", "/w/two", f"pid {os.getpid()}", "status idle", "--cwd"):
        assert part in err.message
    assert sessions.find("dup", "/w/two", env=registry.env).socket_path == "/tmp/cc-socks/2.sock"


def test_find_by_cwd_compares_resolved_directories(registry: Registry, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    registry.add("dup", cwd=str(real), socket_path="/tmp/cc-socks/1.sock")
    registry.add("dup", cwd="/w/two", socket_path="/tmp/cc-socks/2.sock")
    assert sessions.find("dup", str(link), env=registry.env).cwd == str(real)
    assert sessions.find("dup", str(real) + "/", env=registry.env).cwd == str(real)


def test_find_stale_is_reported_not_trusted(registry: Registry) -> None:
    dead = _dead_pid()
    registry.add("ghost", pid=dead, cwd="/w/g")
    with pytest.raises(sessions.StaleError) as caught:
        sessions.find("ghost", env=registry.env)
    assert caught.value.exit_code == sessions.EXIT_STALE
    assert f"pid {dead}" in caught.value.message
    assert "process dead" in caught.value.message
    assert [c.pid for c in caught.value.candidates] == [dead]


def test_find_prefers_the_live_one_over_a_stale_namesake(registry: Registry) -> None:
    registry.add("seat", pid=_dead_pid(), cwd="/w/old")
    registry.add("seat", cwd="/w/new")
    assert sessions.find("seat", env=registry.env).cwd == "/w/new"


def test_find_no_such_session_names_the_live_ones(registry: Registry) -> None:
    registry.add("seat-a")
    with pytest.raises(sessions.NoSuchSessionError) as caught:
        sessions.find("seat-z", env=registry.env)
    assert caught.value.exit_code == sessions.EXIT_NO_SUCH_SESSION
    assert "seat-a" in caught.value.message
    with pytest.raises(sessions.NoSuchSessionError, match="other directories"):
        sessions.find("seat-a", "/elsewhere", env=registry.env)


def test_find_session_without_socket(registry: Registry) -> None:
    registry.add("bare", messagingSocketPath=None, peer_token=None)
    data = json.loads((registry.sessions / f"{os.getpid()}.json").read_text())
    data.pop("messagingSocketPath", None)
    (registry.sessions / f"{os.getpid()}.json").write_text(json.dumps(data))
    with pytest.raises(sessions.NoSuchSessionError, match="no inbox socket"):
        sessions.find("bare", env=registry.env)


def test_resolve_uds_address(registry: Registry) -> None:
    registry.add("seat-a", socket_path="/tmp/cc-socks/77.sock")
    target = sessions.resolve("uds:/tmp/cc-socks/77.sock", env=registry.env)
    assert target.socket_path == "/tmp/cc-socks/77.sock"
    assert target.entry is not None and target.entry.name == "seat-a"
    other = sessions.resolve("uds:/tmp/elsewhere.sock", env=registry.env)
    assert other.entry is None
    with pytest.raises(sessions.InvalidMessageError):
        sessions.resolve("uds:relative.sock", env=registry.env)


# -- tokens ----------------------------------------------------------------------------------


def _target(registry: Registry, name: str) -> sessions.Target:
    return sessions.resolve(name, env=registry.env)


def test_peer_token_from_key_file(registry: Registry) -> None:
    registry.add("seat-a", peer_token="11" * 16)
    token = client.choose_token(_target(registry, "seat-a"), env=registry.env)
    assert token.kind is client.TokenKind.PEER
    assert token.value == "11" * 16
    assert "11" * 16 not in repr(token)


def test_child_token_needs_matching_socket_and_ancestry(registry: Registry) -> None:
    data = registry.add("parent", pid=os.getppid(), proc_start=None, peer_token="22" * 16)
    # procStart of the parent, so the entry is alive.
    raw = Path(f"/proc/{os.getppid()}/stat").read_text().rpartition(")")[2].split()[19]
    data["procStart"] = raw
    (registry.sessions / f"{os.getppid()}.json").write_text(json.dumps(data))
    key = Path(sessions.key_path(registry.sessions, os.getppid(), data["messagingSocketPath"]))
    key.write_text(json.dumps({"peerToken": "22" * 16, "procStart": raw}))
    target = _target(registry, "parent")
    env = {
        **registry.env,
        sessions.ENV_SOCKET: data["messagingSocketPath"],
        sessions.ENV_TOKEN: "cc" * 16,
    }
    token = client.choose_token(target, env=env)
    assert token.kind is client.TokenKind.CHILD and token.value == "cc" * 16
    # Another socket in the environment: the peer token.
    other = {**env, sessions.ENV_SOCKET: "/tmp/cc-socks/other.sock"}
    assert client.choose_token(target, env=other).kind is client.TokenKind.PEER
    # The right socket, but this process is not the session's descendant: the peer token.
    not_child = client.choose_token(target, env=env, ancestor=lambda pid: False)
    assert not_child.kind is client.TokenKind.PEER and not_child.value == "22" * 16


def test_is_ancestor() -> None:
    assert sessions.is_ancestor(os.getppid()) is True
    assert sessions.is_ancestor(_dead_pid()) is False


def test_key_file_is_found_by_the_path_as_recorded_not_resolved(registry: Registry, tmp_path: Path) -> None:
    real = tmp_path / "private-tmp"
    real.mkdir()
    alias = tmp_path / "tmp"
    alias.symlink_to(real)
    recorded = f"{alias}/5.sock"
    registry.add("seat-a", socket_path=recorded, peer_token="33" * 16)
    expected = hashlib.sha256(recorded.encode()).hexdigest()
    assert any(p.name.endswith(f".{expected}.key") for p in registry.sessions.iterdir())
    token = client.choose_token(_target(registry, "seat-a"), env=registry.env)
    assert token.value == "33" * 16


def test_key_file_of_another_process_is_not_used(registry: Registry) -> None:
    data = registry.add("seat-a", peer_token=None)
    key = Path(sessions.key_path(registry.sessions, os.getpid(), data["messagingSocketPath"]))
    key.write_text(json.dumps({"peerToken": "44" * 16, "procStart": "1"}))
    token = client.choose_token(_target(registry, "seat-a"), env=registry.env)
    assert token.kind is client.TokenKind.NONE


def test_no_key_file_means_no_token(registry: Registry) -> None:
    registry.add("seat-a", peer_token=None)
    token = client.choose_token(_target(registry, "seat-a"), env=registry.env)
    assert token.kind is client.TokenKind.NONE and token.value is None


# -- payload -----------------------------------------------------------------------------------


def test_payload_is_auth_line_then_user_line() -> None:
    payload = client.build_payload('he said "hi"\nC:\\path ✓ 🎉', "ab" * 16)
    first, second, tail = payload.split(b"\n")
    assert tail == b""
    assert json.loads(first) == {"type": "auth", "token": "ab" * 16}
    assert json.loads(second) == {
        "type": "user",
        "message": {"role": "user", "content": 'he said "hi"\nC:\\path ✓ 🎉'},
    }
    assert protocol.decode(payload) == [
        protocol.AuthLine("ab" * 16),
        protocol.UserLine('he said "hi"\nC:\\path ✓ 🎉'),
    ]


def test_payload_without_token_has_no_auth_line() -> None:
    payload = client.build_payload("hello", None)
    assert payload.count(b"\n") == 1
    assert json.loads(payload)["type"] == "user"


@given(st.text(min_size=1).filter(lambda t: bool(t.strip()) and refusal_for(t) is None))
def test_any_text_round_trips_on_one_line(text: str) -> None:
    payload = client.build_payload(text, "ab" * 16)
    payload.decode("utf-8")  # valid UTF-8
    assert payload.count(b"\n") == 2
    lines = protocol.decode(payload)
    assert lines[1] == protocol.UserLine(text)


@pytest.mark.parametrize("char", ["\x1b", "\x07", "\r", "\x9b"])
def test_a_message_with_a_control_character_is_refused_before_sending(char: str) -> None:
    with pytest.raises(sessions.InvalidMessageError, match=f"U\\+{ord(char):04X}.*nothing was sent") as caught:
        client.build_payload(f"hi{char}[2J there", None)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("text", ["", " ", "\n\t \n"])
def test_empty_message_is_refused(text: str) -> None:
    with pytest.raises(sessions.InvalidMessageError) as caught:
        client.build_payload(text, None)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("text", ["a\ud800b", "\udcff", "x\udc80"])
def test_lone_surrogate_is_refused(text: str) -> None:
    with pytest.raises(sessions.InvalidMessageError, match="surrogate"):
        client.build_payload(text, None)


def test_size_limit_rule() -> None:
    limit = protocol.MAX_SERIALIZED_CHARS
    assert limit == 1_000_000
    client.check_text("a" * limit)  # a plain million characters: delivered by 2.1.316
    with pytest.raises(sessions.MessageTooLargeError) as caught:
        client.check_text("a" * (limit + 1))
    assert caught.value.exit_code == sessions.EXIT_TOO_LARGE
    assert "1,000,001" in caught.value.message
    client.check_text("x\n" * (limit // 3))  # each newline serializes to two characters
    with pytest.raises(sessions.MessageTooLargeError):
        client.check_text("x\n" * (limit // 3) + "\n")
    client.check_text("🎉" * (limit // 2))  # two UTF-16 units each
    with pytest.raises(sessions.MessageTooLargeError):
        client.check_text("🎉" * (limit // 2) + "a")


def test_decode_rejects_bad_lines() -> None:
    for bad in (b"\xff\n", b"not json", b"[1]", b'{"type":"x"}', b'{"type":"auth"}', b'{"type":"user","message":{}}'):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_line(bad)
    with pytest.raises(protocol.ProtocolError, match="incomplete"):
        protocol.decode(b'{"type":"auth","token":"x"}')


def test_decode_reads_the_sniffed_peer_line() -> None:
    path = corpus.shared_dir(corpus.RELEASE, "peer-wire-format-sniffed.jsonl")
    chunk = json.loads(path.read_text(encoding="utf-8").splitlines()[0])["chunk"]
    (line,) = protocol.decode(chunk.encode())
    assert isinstance(line, protocol.UserLine)
    assert line.sender == "uds:/tmp/cc-socks/7855.sock"
    assert line.priority == "next" and line.version == 1 and line.msg_id
    assert "hello sniffer" in line.content


# -- post and send ------------------------------------------------------------------------------


def test_post_writes_the_payload(listener: Listener) -> None:
    payload = client.build_payload("hi there", "ab" * 16)
    result = client.post(str(listener.path), payload)
    assert result.bytes_written == len(payload)
    assert listener.wait() == [payload]


def test_post_to_missing_socket(tmp_path: Path) -> None:
    with pytest.raises(sessions.ConnectFailedError, match="no such socket") as caught:
        client.post(str(tmp_path / "none.sock"), b"x\n")
    assert caught.value.exit_code == sessions.EXIT_CONNECT_FAILED


def test_post_to_socket_nobody_listens_on(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file remains, nobody listens: what kill -9 leaves
    with pytest.raises(sessions.ConnectFailedError, match="refused"):
        client.post(str(path), b"x\n")


def test_post_to_receiver_that_never_reads(tmp_path: Path) -> None:
    slow = Listener(tmp_path / "slow.sock", read=False)
    try:
        payload = client.build_payload("x" * 900_000, None)
        with pytest.raises(sessions.WriteFailedError, match="not sent") as caught:
            client.post(str(slow.path), payload, timeout=0.5)
        assert caught.value.exit_code == sessions.EXIT_WRITE_FAILED
    finally:
        slow.close()


def test_send_by_name(registry: Registry, listener: Listener) -> None:
    registry.add("seat-a", socket_path=str(listener.path), peer_token="55" * 16)
    report = client.send("seat-a", "hello from a test", env=registry.env)
    assert report.token.kind is client.TokenKind.PEER
    (got,) = listener.wait()
    assert protocol.decode(got) == [
        protocol.AuthLine("55" * 16),
        protocol.UserLine("hello from a test"),
    ]
    assert "not yet known to be read" in report.fate[0]
    assert report.to_json()["outcome"] == "written"


def test_too_large_is_refused_before_connecting(registry: Registry, listener: Listener) -> None:
    registry.add("seat-a", socket_path=str(listener.path))
    with pytest.raises(sessions.MessageTooLargeError):
        client.send("seat-a", "y" * 1_000_001, env=registry.env)
    time.sleep(0.3)
    assert listener.received == []


def test_fate_for_a_bypass_receiver_says_held() -> None:
    peer = client.Token(client.TokenKind.PEER, "x", "test")
    assert "HOLDS" in " ".join(client.receiver_fate(peer, "bypassPermissions"))
    assert "delivers" in " ".join(client.receiver_fate(peer, "acceptEdits"))
    unknown = " ".join(client.receiver_fate(peer, None))
    assert "HOLDS" in unknown and "delivers" in unknown
    child = client.Token(client.TokenKind.CHILD, "x", "test")
    assert "own child" in " ".join(client.receiver_fate(child, "bypassPermissions"))


# -- wait-idle -------------------------------------------------------------------------------------


def _set_status(name: str | Path, status: str) -> None:
    path = Path(name)
    data = json.loads(path.read_text())
    data["status"] = status
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def test_wait_idle_returns_when_idle(registry: Registry) -> None:
    registry.add("seat-a", status="busy")
    (entry,) = registry.entries()
    timer = threading.Timer(0.4, _set_status, (entry.path, "idle"))
    timer.start()
    t0 = time.monotonic()
    final = client.wait_idle(entry, timeout=10)
    assert final.status == "idle"
    assert 0.3 < time.monotonic() - t0 < 3


def test_wait_idle_times_out_and_backs_off(registry: Registry) -> None:
    registry.add("seat-a", status="waiting", waitingFor="permission prompt")
    (entry,) = registry.entries()
    pauses: list[float] = []
    now = [0.0]

    def fake_sleep(s: float) -> None:
        pauses.append(s)
        now[0] += s

    with pytest.raises(sessions.WaitTimeoutError, match="waiting \\(permission prompt\\)") as caught:
        client.wait_idle(entry, timeout=20, sleep=fake_sleep, clock=lambda: now[0])
    assert caught.value.exit_code == sessions.EXIT_WAIT_TIMEOUT
    assert pauses[0] == pytest.approx(0.2)
    assert max(pauses) == pytest.approx(2.0)
    assert len(pauses) < 20


def test_wait_idle_session_exits(registry: Registry) -> None:
    registry.add("seat-a", status="busy")
    (entry,) = registry.entries()
    threading.Timer(0.3, os.unlink, (entry.path,)).start()
    with pytest.raises(sessions.SessionExitedError) as caught:
        client.wait_idle(entry, timeout=10)
    assert caught.value.exit_code == sessions.EXIT_SESSION_EXITED


def test_wait_idle_process_gone(registry: Registry) -> None:
    registry.add("seat-a", status="busy")
    (entry,) = registry.entries()
    gone = values.replace(entry, pid=_dead_pid())
    with pytest.raises(sessions.SessionExitedError, match="left behind"):
        client.wait_idle(gone, timeout=5)


# -- the commands ------------------------------------------------------------------------------


@pytest.fixture
def cli_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry:
    reg = Registry(tmp_path / "claude")
    for name in ("TEAM_ROLE", "FABRIKITO_TEAM", "CLAUDECODE", sessions.ENV_SOCKET, sessions.ENV_TOKEN):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(reg.root))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # send's record of its last message
    monkeypatch.chdir(tmp_path)
    return reg


def _team(tmp_path: Path, *, sec: bool = False) -> Path:
    seats = ['[[seat]]\nrole = "em"\nsession = "acme-em"\npermission_mode = "acceptEdits"\n']
    seats.append('[[seat]]\nrole = "dev"\nsession = "acme-dev"\npermission_mode = "bypassPermissions"\n')
    if sec:
        seats.append('[[seat]]\nrole = "sec"\nsession = "acme-sec"\npermission_mode = "acceptEdits"\n')
    path = tmp_path / "team.toml"
    path.write_text('name = "acme"\n\n' + "\n".join(seats), encoding="utf-8")
    return path


def test_help_lists_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["send", "--help"])
    out = capsys.readouterr().out
    assert "7   too large" in out
    codes = {name: value for name, value in vars(sessions).items() if name.startswith("EXIT_")}
    for value in codes.values():
        assert re.search(rf"^  {value} ", send.EXIT_CODES_HELP, re.MULTILINE), value


def test_cli_send_by_name(cli_registry: Registry, listener: Listener, capsys: pytest.CaptureFixture[str]) -> None:
    cli_registry.add("seat-a", socket_path=str(listener.path))
    assert cli.main(["send", "--to", "seat-a", 'say "hi"\\n ✓']) == 0
    (got,) = listener.wait()
    assert protocol.decode(got)[-1] == protocol.UserLine('[from owner] say "hi"\\n ✓')
    out = capsys.readouterr().out
    assert out.startswith("written:")
    assert "not delivered" in out


def test_send_from_stdin(cli_registry: Registry, listener: Listener, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_registry.add("seat-a", socket_path=str(listener.path))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"line one\nline two\n")))
    assert cli.main(["send", "--to", "seat-a", "--json", "--no-label"]) == 0
    (got,) = listener.wait()
    assert protocol.decode(got)[-1] == protocol.UserLine("line one\nline two")


def test_send_exit_codes(cli_registry: Registry, listener: Listener, capsys: pytest.CaptureFixture[str]) -> None:
    cli_registry.add("dup", cwd="/w/1", socket_path=str(listener.path))
    cli_registry.add("dup", cwd="/w/2", socket_path=str(listener.path))
    cli_registry.add("ghost", pid=_dead_pid())
    assert cli.main(["send", "--to", "nobody", "hi"]) == sessions.EXIT_NO_SUCH_SESSION
    assert cli.main(["send", "--to", "dup", "hi"]) == sessions.EXIT_AMBIGUOUS
    err = capsys.readouterr().err
    assert "/w/1" in err and "/w/2" in err
    assert cli.main(["send", "--to", "ghost", "hi"]) == sessions.EXIT_STALE
    assert cli.main(["send", "--to", "dup", "--cwd", "/w/1", "x" * 1_000_001]) == sessions.EXIT_TOO_LARGE
    assert cli.main(["send", "--to", "dup", "--cwd", "/w/1", "  "]) == 2
    assert cli.main(["send", "--to", "uds:/nonexistent/x.sock", "hi"]) == sessions.EXIT_CONNECT_FAILED
    assert listener.received == []
    assert cli.main(["send", "--to", "dup", "--cwd", "/w/2", "hi"]) == 0
    assert len(listener.wait()) == 1


def test_sessions_lists_live_ones(cli_registry: Registry, capsys: pytest.CaptureFixture[str]) -> None:
    cli_registry.add("seat-a", cwd="/w/a")
    cli_registry.add("ghost", pid=_dead_pid())
    assert cli.main(["sessions", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == 1
    assert [s["name"] for s in data["sessions"]] == ["seat-a"]
    assert cli.main(["sessions", "--all"]) == 0
    out = capsys.readouterr().out
    assert "seat-a" in out and "ghost" in out and "STALE" in out


def test_wait_idle_cli(cli_registry: Registry) -> None:
    cli_registry.add("seat-a", status="idle")
    cli_registry.add("seat-b", status="busy", pid=os.getppid(), proc_start=None, template="seat-a")
    assert cli.main(["wait-idle", "seat-a"]) == 0
    assert cli.main(["wait-idle", "seat-x"]) == sessions.EXIT_NO_SUCH_SESSION


def test_sender_without_a_team_follows_say_rules() -> None:
    from fabrikito.delivery import identity

    assert identity.sender_without_team(None) == "owner"
    assert identity.sender_without_team("live-test") == "live-test"
    assert identity.sender_without_team("api") == "api"
    for bad in ("owner", "launcher", "Not A Role"):
        with pytest.raises(identity.IdentityRefused):
            identity.sender_without_team(bad)


@pytest.mark.parametrize("value", ["0", "-1", "15.5", "nan", "inf", "soon"])
def test_send_timeout_out_of_range_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["send", "--to", "uds:/nowhere", "--timeout", value, "hello"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and "Traceback" not in err
    if value not in ("soon",):
        assert "at most 15 seconds" in err


def test_send_timeout_at_the_line_limit_is_accepted() -> None:
    assert send.post_timeout("15") == 15.0 and send.post_timeout("0.5") == 0.5


def test_send_without_to_outside_a_hook_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CLAUDE_CODE_MESSAGING_SOCKET", raising=False)
    assert cli.main(["send", "hello"]) == 2
    assert "CLAUDE_CODE_MESSAGING_SOCKET" in capsys.readouterr().err


def test_send_refuses_a_team_role_that_names_no_sender(
    cli_registry: Registry, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_registry.add("seat-a", status="idle")
    monkeypatch.setenv("TEAM_ROLE", "launcher")
    assert cli.main(["send", "--to", "seat-a", "hello"]) == 2
    err = capsys.readouterr().err
    assert "TEAM_ROLE" in err and "Nothing was sent" in err


def test_a_repeat_within_the_window_is_warned_about(tmp_path: Path) -> None:
    from fabrikito.inbox import recent

    env = {"HOME": str(tmp_path)}
    assert recent.last_send("/tmp/s.sock", env) is None
    assert recent.remember("/tmp/s.sock", "[from owner] hi", 1000.0, env) is None
    last = recent.last_send("/tmp/s.sock", env)
    assert last is not None and last.sent_at == 1000.0
    path = Path(recent.record_path("/tmp/s.sock", env))
    assert path.parent == tmp_path / ".local" / "state" / "fabrikito" / "sent"
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert b"hi" not in path.read_bytes()  # only a digest of the text is kept
    assert recent.repeat_warning(last, "[from owner] hi", 1001.5) is not None
    assert recent.repeat_warning(last, "[from owner] hi again", 1001.5) is None
    assert recent.repeat_warning(last, "[from owner] hi", 1000.0 + recent.DUPLICATE_WINDOW) is None
    assert recent.last_send("/tmp/other.sock", env) is None


def test_wait_idle_after_a_send_waits_for_the_turn_it_starts(cli_registry: Registry) -> None:
    cli_registry.add("seat-a", status="idle")
    path = cli_registry.sessions / f"{os.getpid()}.json"
    entry = sessions.read_entry(path)
    assert entry is not None
    sent_at = time.time()
    data = json.loads(path.read_text())
    data["statusUpdatedAt"] = int((sent_at - 60) * 1000)  # idle since a minute before the send
    path.write_text(json.dumps(data))
    with pytest.raises(sessions.WaitTimeoutError, match="has not started the turn"):
        client.wait_idle(entry, timeout=0.5, since=sent_at)
    data.update(status="busy", statusUpdatedAt=int(sent_at * 1000) + 50)
    path.write_text(json.dumps(data))
    with pytest.raises(sessions.WaitTimeoutError, match="still busy"):
        client.wait_idle(entry, timeout=0.5, since=sent_at)
    data.update(status="idle", statusUpdatedAt=int(sent_at * 1000) + 900)
    path.write_text(json.dumps(data))
    assert client.wait_idle(entry, timeout=0.5, since=sent_at).status == "idle"
    # no turn at all: idle is taken as it is once the bound after the send has passed
    data["statusUpdatedAt"] = int((sent_at - 60) * 1000)
    path.write_text(json.dumps(data))
    assert client.wait_idle(entry, timeout=5, since=sent_at - client.TURN_START_BOUND).status == "idle"


def test_send_to_role_is_logged(
    cli_registry: Registry, listener: Listener, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _team(tmp_path, sec=True)
    cli_registry.add("acme-dev", socket_path=str(listener.path))
    assert cli.main(["send", "--to", "dev", "tab\there"]) == 0
    out = capsys.readouterr().out
    assert "bypassPermissions" in out and "HOLDS" in out
    assert cli.main(["send", "--to", "em", "to em"]) == sessions.EXIT_NO_SUCH_SESSION
    assert cli.main(["send", "--to", "sec", "secret point"]) == sessions.EXIT_NO_SUCH_SESSION
    lines = (tmp_path / ".state" / "acme" / "messages.log").read_text().splitlines()
    fields = [line.split("\t") for line in lines]
    assert [f[1:] for f in fields] == [
        ["owner", "dev", "sent", "tab\\there"],
        ["owner", "em", "NOT-SENT", "to em"],
        ["owner", "sec", "NOT-SENT", "[body not logged: sec]"],
    ]


def test_send_outside_the_team_is_not_logged(cli_registry: Registry, listener: Listener, tmp_path: Path) -> None:
    _team(tmp_path)
    cli_registry.add("stranger", socket_path=str(listener.path))
    assert cli.main(["send", "--to", "stranger", "hello"]) == 0
    assert not (tmp_path / ".state" / "acme" / "messages.log").exists()


def test_send_from_a_seat_is_logged(
    cli_registry: Registry, listener: Listener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _team(tmp_path)
    monkeypatch.setenv("TEAM_ROLE", "em")
    cli_registry.add("stranger", socket_path=str(listener.path))
    assert cli.main(["send", "--to", "stranger", "hello"]) == 0
    (line,) = (tmp_path / ".state" / "acme" / "messages.log").read_text().splitlines()
    assert line.split("\t")[1:] == ["em", "stranger", "sent", "hello"]


def test_log_that_cannot_be_written_exits_1(
    cli_registry: Registry, listener: Listener, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _team(tmp_path)
    state = tmp_path / ".state" / "acme"
    state.mkdir(parents=True)
    (tmp_path / "elsewhere").write_text("")
    (state / "messages.log").symlink_to(tmp_path / "elsewhere")
    cli_registry.add("acme-dev", socket_path=str(listener.path))
    assert cli.main(["send", "--to", "dev", "hello"]) == 1
    assert len(listener.wait()) == 1
    err = capsys.readouterr().err
    assert "WAS written" in err and "do not send it again" in err
