"""The team's status server (launch/statusserver.py) and what ``status`` asks it (base/statuswire.py).

A real private tmux server holds two of the team's three sessions (``sleep``
in each, so both seats show as "not an agent" and the third as down); the
server and ``fabrikito status`` run as real processes.  A ``tmux`` shim first
on ``PATH`` logs the parent pid of every tmux call, which tells who made it.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fabrikito.base import daemons, statuswire
from fabrikito.base.errors import FabrikitoError
from fabrikito.launch import status, statusserver
from fabrikito.team import teamfile

SRC = Path(__file__).resolve().parents[2] / "src"
VARIANTS = [["status"], ["status", "--json"], ["status", "--no-screens"], ["status", "--no-screens", "--json"]]


def write_team(folder: Path, socket_name: str) -> Path:
    path = folder / "team.toml"
    seats = "".join(f'\n[[seat]]\nrole = "{r}"\nsession = "acme-{r}"\n' for r in ("em", "sec", "qa"))
    path.write_text(f'name = "acme"\ntmux_socket = "{socket_name}"\n{seats}', encoding="utf-8")
    return path


@pytest.fixture
def team(tmp_path: Path) -> Iterator[teamfile.Team]:
    folder = tmp_path / "team"
    folder.mkdir()
    loaded = teamfile.load(write_team(folder, f"fab-ss-{secrets.token_hex(4)}"))
    server = loaded.server()
    server.new_session("acme-em", ["sleep", "300"], cwd="/")
    server.new_session("acme-sec", ["sleep", "300"], cwd="/")
    try:
        yield loaded
    finally:
        statusserver.stop(loaded)
        if server.alive():
            server.kill_server()


@pytest.fixture
def shim(tmp_path: Path) -> tuple[Path, Path]:
    """A ``tmux`` first on PATH that logs ``<parent pid> <command>`` and runs the real one."""
    folder, log = tmp_path / "bin", tmp_path / "tmux-calls"
    folder.mkdir()
    real = subprocess.run(["sh", "-c", "command -v tmux"], capture_output=True, text=True, check=True).stdout.strip()
    (folder / "tmux").write_text(f'#!/bin/sh\necho "$PPID $*" >> {log}\nexec {real} "$@"\n', encoding="utf-8")
    (folder / "tmux").chmod(0o755)
    return folder, log


def environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "TEAM_ROLE", "FABRIKITO"))}
    return {**env, "PYTHONPATH": str(SRC), **extra}


def fabrikito(argv: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ(**extra),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def here(argv: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``status`` run in its own process, the server not asked."""
    return fabrikito(argv, cwd, FABRIKITO_STATUS_SERVER="0", **extra)


def calls(log: Path) -> list[tuple[int, str]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [(int(pid), rest) for pid, _, rest in (line.partition(" ") for line in lines)]


def same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> bool:
    return (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_status_is_answered_by_the_server_exactly_as_it_prints_here(
    team: teamfile.Team, shim: tuple[Path, Path]
) -> None:
    folder, log = shim
    assert statusserver.ensure_running(team)
    pid = statusserver.running_pid(team.path)
    assert pid is not None
    assert not statusserver.ensure_running(team)  # one per team file
    path = f"{folder}:{os.environ['PATH']}"
    table = fabrikito(["status"], team.base_dir).stdout
    rows = [line.split() for line in table.splitlines() if line.startswith(("em ", "sec ", "qa "))]
    assert [row[3] for row in rows] == ["not", "not", "down"]  # what the seats are, read from tmux
    for argv in VARIANTS:
        served = fabrikito(argv, team.base_dir, PATH=path)
        made = calls(log)
        cold = here(argv, team.base_dir, PATH=path)
        assert same(served, cold), (served, cold)
        assert served.returncode == 0 and "acme-em" in served.stdout
        assert {caller for caller, _ in made} == {pid}  # the server's calls, none of the command's own
        assert len(made) == (1 if "--no-screens" in argv else 2)
        assert {caller for caller, _ in calls(log)} != {pid}
    by_path = fabrikito(["status", "--team", str(team.path), "--json"], Path("/"))
    assert same(by_path, here(["status", "--json"], team.base_dir))


def test_an_error_is_said_as_it_is_said_here(team: teamfile.Team) -> None:
    assert statusserver.ensure_running(team)
    team.path.write_text('name = "acme"\n[[seat]\n', encoding="utf-8")
    served, cold = fabrikito(["status"], team.base_dir), here(["status"], team.base_dir)
    assert same(served, cold) and served.returncode == 2 and "not valid TOML" in served.stderr
    assert statuswire.ask(str(team.path), "") is not None  # answered by the server, not run here


def test_help_and_unusual_lines_are_left_to_the_parser(team: teamfile.Team) -> None:
    assert statusserver.ensure_running(team)
    for argv in (["status", "--help"], ["status", "--team=team.toml"], ["status", "--js"], ["status", "--nope"]):
        assert same(fabrikito(argv, team.base_dir), here(argv, team.base_dir)), argv


def test_a_dead_server_leaves_status_to_run_here(team: teamfile.Team) -> None:
    assert statusserver.ensure_running(team)
    pid = statusserver.running_pid(team.path)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    daemons_gone(team)
    assert statusserver.socket_path(team.path).exists()  # its socket is left, nobody listens
    assert statuswire.ask(str(team.path), "") is None
    served = fabrikito(["status"], team.base_dir)
    assert same(served, here(["status"], team.base_dir)) and served.returncode == 0
    assert statusserver.ensure_running(team)  # a new one takes the stale socket's place
    assert statuswire.ask(str(team.path), "") is not None


def daemons_gone(team: teamfile.Team) -> None:
    for _ in range(500):
        if not daemons.lock_held(statusserver.lock_path(team.path)):
            return
        threading.Event().wait(0.01)
    raise AssertionError("the server's lock is still held")


def fake_server(where: Path, answer: Callable[[socket.socket], None]) -> Callable[[], None]:
    """A listener at ``where`` that treats each asker with ``answer``; returns its stop."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(where))
    listener.listen(4)
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                answer(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def stop() -> None:
        done.set()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        where.unlink()
        thread.join(5)

    return stop


def read_all(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return data


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(lambda conn: None, id="closes"),
        pytest.param(lambda conn: (read_all(conn), conn.sendall(b"garbage\n")), id="garbage"),
        pytest.param(lambda conn: (read_all(conn), conn.sendall(statuswire.DECLINED)), id="declines"),
        pytest.param(
            lambda conn: (read_all(conn), conn.sendall(statuswire.encode_reply(0, "half a table\n", "")[:-5])),
            id="cut-short",
        ),
    ],
)
def test_an_answer_not_whole_is_not_printed(team: teamfile.Team, answer: Callable[[socket.socket], None]) -> None:
    where = statusserver.socket_path(team.path)
    where.parent.mkdir(mode=0o700, exist_ok=True)
    stop = fake_server(where, answer)
    try:
        served = fabrikito(["status"], team.base_dir)
    finally:
        stop()
    assert same(served, here(["status"], team.base_dir)) and "acme-em" in served.stdout
    assert "half a table" not in served.stdout and "garbage" not in served.stdout


def test_the_server_declines_what_is_not_its_own(team: teamfile.Team, tmp_path: Path) -> None:
    server = statusserver.Server(team.path, socket.socket(socket.AF_UNIX), 0)
    env = {name: os.environ.get(name) for name in statuswire.ENV_READ}
    package = str(statusserver.PACKAGE)

    def ask(package: str = package, path: str = str(team.path), raw: bytes | None = None) -> bytes:
        return server.answer(statuswire.encode_request(package, path, "n", env) if raw is None else raw)

    assert ask().startswith(statuswire.PROTOCOL + b" 0 ")
    assert ask(raw=b"status please") == statuswire.DECLINED
    assert ask(raw=statuswire.encode_request(package, "team.toml", "n", env)) == statuswire.DECLINED  # relative
    assert ask(package="/elsewhere/fabrikito") == statuswire.DECLINED  # another install of fabrikito
    other = tmp_path / "other"
    other.mkdir()
    assert ask(path=str(write_team(other, "fab-none"))) == statuswire.DECLINED  # another folder's team
    assert ask(path=str(team.base_dir / "other.toml")) == statuswire.DECLINED  # another file name
    assert not server.stale
    server.stamp = ()  # the package's files changed since the server started: it ends
    assert ask() == statuswire.DECLINED and server.stale


def test_the_server_stops_wanting_to_run_when_its_team_is_gone(team: teamfile.Team) -> None:
    statedir_path = statusserver.socket_path(team.path).parent
    statedir_path.mkdir(mode=0o700, exist_ok=True)
    cwd = os.getcwd()
    try:
        listener, inode = statusserver._listen(team.path)  # binds from inside the folder
    finally:
        os.chdir(cwd)
    try:
        server = statusserver.Server(team.path, listener, inode)
        assert server.still_wanted()
        server.answer(
            statuswire.encode_request(
                str(statusserver.PACKAGE), str(team.path), "n", {n: os.environ.get(n) for n in statuswire.ENV_READ}
            )
        )
        assert server.still_wanted()  # it has read the team's tmux server: it now watches it
        team.server().kill_server()
        for _ in range(500):  # tmux removes its socket as it ends
            if not server.still_wanted():
                break
            threading.Event().wait(0.01)
        assert not server.still_wanted()
    finally:
        listener.close()


def test_down_stops_it_and_its_socket_goes(team: teamfile.Team) -> None:
    assert statusserver.stop(team) is None
    assert statusserver.ensure_running(team)
    pid = statusserver.running_pid(team.path)
    said = statusserver.stop(team)
    assert said == f"stopped the status server (pid {pid})"
    assert not statusserver.socket_path(team.path).exists()
    assert statusserver.running_pid(team.path) is None
    assert (statusserver.socket_path(team.path).parent.stat().st_mode & 0o777) == 0o700


def test_the_socket_and_lock_are_the_users_alone(team: teamfile.Team) -> None:
    assert statusserver.ensure_running(team)
    assert statusserver.socket_path(team.path).stat().st_mode & 0o777 == 0o600
    assert statusserver.lock_path(team.path).stat().st_mode & 0o777 == 0o600


def test_a_file_in_the_sockets_place_is_refused_not_removed(team: teamfile.Team) -> None:
    where = statusserver.socket_path(team.path)
    where.parent.mkdir(mode=0o700, exist_ok=True)
    where.write_text("mine", encoding="utf-8")
    with pytest.raises(FabrikitoError, match="did not start"):
        statusserver.ensure_running(team)
    assert where.read_text(encoding="utf-8") == "mine"
    assert "is there and is not a socket: remove it" in (team.state_dir / statusserver.ERR_NAME).read_text()


class Recording(dict[str, str]):
    """``os.environ`` that notes every name read."""

    def __init__(self, values: dict[str, str], seen: set[str]) -> None:
        super().__init__(values)
        self.seen = seen

    def __getitem__(self, key: str) -> str:
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.seen.add(str(key))
        return super().__contains__(key)


def test_status_reads_no_variable_the_server_is_not_told(team: teamfile.Team, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: set[str] = set()
    monkeypatch.setattr(os, "environ", Recording(dict(os.environ), seen))
    for screens in (True, False):
        for as_json in (True, False):
            status.report(teamfile.load(team.path), as_json=as_json, screens=screens)
    assert seen and seen <= set(statuswire.ENV_READ), sorted(seen - set(statuswire.ENV_READ))


@pytest.mark.parametrize(
    "path", ["team.toml", "./team.toml", "a/../team.toml", "a//b/./c.toml", "/x/y.toml", "//x/y.toml", "///x", ""]
)
def test_absolute_is_pathlibs(path: str) -> None:
    assert statuswire.absolute(path) == str(Path(path).absolute())


def test_request_and_reply_round_trip_and_a_cut_one_is_none() -> None:
    env: dict[str, str | None] = {name: None for name in statuswire.ENV_READ} | {"TZ": "UTC", "PATH": "/a=b:/c"}
    request = statuswire.encode_request("/p", "/t/team.toml", "jn", env)
    assert statuswire.decode_request(request) == ("/p", "/t/team.toml", "jn", env)
    assert statuswire.decode_request(request + b"\0X=1") is None
    assert statuswire.decode_request(request.replace(b"\0jn\0", b"\0jx\0")) is None
    reply = statuswire.encode_reply(1, "é table\n", "warn\n")
    assert statuswire.decode_reply(reply) == (1, "é table\n".encode(), b"warn\n")
    for cut in range(len(reply)):
        assert statuswire.decode_reply(reply[:cut]) is None
    assert statuswire.decode_reply(reply + b"x") is None
    assert statuswire.decode_reply(statuswire.DECLINED) is None


MODULES = """
import sys
from fabrikito import cli
code = cli.main(sys.argv[1:])
print(" ".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def test_a_served_status_imports_next_to_nothing(team: teamfile.Team) -> None:
    assert statusserver.ensure_running(team)
    done = subprocess.run(
        [sys.executable, "-c", MODULES, "status"],
        capture_output=True,
        text=True,
        cwd=team.base_dir,
        env=environ(),
        timeout=60,
        check=True,
    )
    modules = set(done.stderr.split())
    assert "fabrikito.base.statuswire" in modules and "acme-em" in done.stdout
    heavy = {"re", "enum", "pathlib", "json", "fabrikito.launch.status", "fabrikito.team.teamfile", "collections"}
    assert sorted(heavy & modules) == []
