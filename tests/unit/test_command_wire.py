"""The command server cannot be held up, fooled or made to run a command twice (cli/server.py, cli/wire.py).

A real server runs for a team on a private tmux server whose seats are
``sleep`` (a ``say`` to one is refused before anything is typed, and logged);
the askers are real ``fabrikito`` processes, and the hostile clients raw
sockets.  A ``tmux`` shim first on ``PATH`` logs the parent and grandparent of
each tmux call, which tells a command the server's child ran (grandparent: the
server) from one that ran in the asking process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.unit.serverkit import environ, here, same, wait_until

from fabrikito.cli import packagestamp, serverctl, wire
from fabrikito.cli import server as command_server
from fabrikito.team import teamfile

EXIT_REFUSED = 3


@pytest.fixture
def running(team: teamfile.Team) -> Iterator[int]:
    """The team's command server, running: its pid."""
    assert serverctl.ensure_running(team)
    pid = serverctl.running_pid(team.path)
    assert pid is not None
    yield pid
    serverctl.stop(team)


def connect(team: teamfile.Team) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(serverctl.socket_path(team.path)))
    return sock


def answer(sock: socket.socket) -> bytes:
    """The server's first line (``b""``: it closed the connection without one)."""
    got = b""
    try:
        while not got.endswith(b"\n"):
            chunk = sock.recv(256)
            if not chunk:
                break
            got += chunk
    finally:
        sock.close()
    return got


def request(team: teamfile.Team, argv: list[str], **change: object) -> bytes:
    fields: dict[str, object] = {
        "package": str(packagestamp.PACKAGE),
        "cwd": str(team.base_dir),
        "umask": 0o22,
        "argv": argv,
        "env": dict(os.environ),
        "stdio": "utf-8,strict,;utf-8,strict,;utf-8,backslashreplace,l",
    }
    fields.update(change)
    return wire.encode_request(**fields)  # type: ignore[arg-type]


def send(team: teamfile.Team, data: bytes, fds: list[int] | None = None) -> bytes:
    """Send ``data`` (with ``fds``, when given: a request brings none); the server's first line."""
    sock = connect(team)
    if fds is None:
        sock.sendall(data)
    else:
        socket.send_fds(sock, [data], fds)
    return answer(sock)


def go_with(team: teamfile.Team, fds: list[int]) -> bytes:
    """A good request, then "go" with ``fds``; what the child says then."""
    sock = connect(team)
    sock.sendall(request(team, ["status"]))
    first = b""
    while not first.endswith(b"\n"):
        first += sock.recv(1)
    assert first.startswith(b"started "), first
    socket.send_fds(sock, [wire.GO], fds)
    return answer(sock)


def test_each_bad_or_other_request_is_declined_whole_and_nothing_runs(
    team: teamfile.Team, running: int, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    too_long = wire.PROTOCOL + b" %d\n" % (wire.MAX_REQUEST + 1)
    cases: dict[str, tuple[bytes, list[int] | None]] = {
        "not this protocol": (b"GET / HTTP/1.0\n", None),
        "an older protocol": (b"fabrikito-run/1\0/p\0/w\x0022\x001\0status", None),
        "a first line with no end": (b"x" * (wire.MAX_HEAD + 10), None),
        "over the size limit": (too_long, None),  # declined on its first line, never read further
        "longer than it says": (request(team, ["status"])[:-3] + b"\0TOO=much", None),
        "descriptors with the request": (request(team, ["status"]), [0, 1, 2]),
        "unreadable": (request(team, ["status"]).replace(b"\x0022\x00", b"\x0099\x00"), None),
        "another copy": (request(team, ["status"], package="/elsewhere/fabrikito"), None),
        "no such folder": (request(team, ["status"], cwd=str(tmp_path / "gone")), None),
        "no command": (request(team, []), None),
    }
    for argv in (["--version"], ["check"], ["_host", "version"], ["up"], ["log"], ["send", "--to", "x", "y"]):
        cases[" ".join(argv)] = (request(team, argv), None)
    cases["init, which would write files"] = (request(team, ["init", str(fresh)], cwd=str(fresh)), None)
    for what, (data, fds) in cases.items():
        said = send(team, data, fds)
        assert said.startswith(b"declined "), (what, said)
    for fds in ([], [1, 2], [0, 1, 2, 2]):  # "go" brings the asker's three, and only them
        assert go_with(team, fds) == b"declined not three descriptors\n", fds
    assert list(fresh.iterdir()) == []  # init was not run
    assert serverctl.running_pid(team.path) == running  # and it still serves
    good = send(team, request(team, ["status"]))
    assert good.startswith(b"started "), good  # the asker, gone, never said go: the child ends, runs nothing


PROBE = """
import os, sys
os.environ["FABRIKITO_BIG"] = "x" * int(sys.argv[1])
from fabrikito import cli
code = cli.main(["say", "em", "hello"])
print("engine here" if "fabrikito.delivery.say" in sys.modules else "served", file=sys.stderr)
sys.exit(code)
"""


def test_a_request_over_the_limit_is_never_cut_the_command_runs_here_whole(team: teamfile.Team, running: int) -> None:
    """An environment larger than a request may carry: the asker sends nothing and runs the command
    itself, with all of it (a served command's asker never imports the engine)."""
    for size, where in ((1000, "served"), (wire.MAX_REQUEST + 1000, "engine here")):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(size)],
            capture_output=True,
            text=True,
            cwd=team.base_dir,
            env=environ(),
            timeout=60,
            check=False,
        )
        assert done.returncode == EXIT_REFUSED and done.stderr.splitlines()[-1] == where, done.stderr
    big = wire.PROTOCOL + b" %d\n" % (wire.MAX_REQUEST + 1) + b"x" * 1000  # a server declines one whole
    assert send(team, big).startswith(b"declined too large")


def hostile(team: teamfile.Team, idle: int, slow: int, every: float, stop: threading.Event) -> list[socket.socket]:
    """``idle`` connections that send nothing and ``slow`` ones that send a byte every ``every`` seconds."""
    opened = []
    for _ in range(idle):
        opened.append(connect(team))
    slow_ones = [connect(team) for _ in range(slow)]
    opened += slow_ones

    def drip(sock: socket.socket) -> None:
        data = request(team, ["status"])
        for byte in data:
            if stop.wait(every):
                return
            try:
                sock.send(bytes([byte]))
            except OSError:
                return

    for sock in slow_ones:
        threading.Thread(target=drip, args=(sock,), daemon=True).start()
    return opened


WHERE = """
import sys
from fabrikito import cli
code = cli.main(sys.argv[1:])
engine = {"say": "fabrikito.delivery.say", "status": "fabrikito.launch.status"}[sys.argv[1]]
print("ran here" if engine in sys.modules else "served", file=sys.stderr)
sys.exit(code)
"""


def timed(argv: list[str], cwd: Path, **extra: str) -> tuple[float, subprocess.CompletedProcess[str], bool]:
    """Run ``fabrikito ARGV``: how long it took, what it did, and whether the server ran it (a served
    command's asker never imports the engine)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", WHERE, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ(**extra),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    took = time.monotonic() - started
    err, _, where = done.stderr.rstrip("\n").rpartition("\n")
    done.stderr = err + "\n" if err else ""
    return took, done, where == "served"


def test_slow_and_idle_clients_hold_up_no_one(team: teamfile.Team, running: int) -> None:
    """100 connections open, a few dripping a byte every 3 s: status and say from another process are
    run by the server (not given up on) and answer within their own time plus the asker's deadline."""
    normal = {}
    for argv in (["status"], ["say", "em", "hello"]):
        normal[argv[0]] = max(timed(argv, team.base_dir)[0] for _ in range(3))
    before = len((team.state_dir / "messages.log").read_text().splitlines())
    stop = threading.Event()
    opened = hostile(team, idle=100, slow=4, every=3.0, stop=stop)
    try:
        for argv in (["status"], ["say", "em", "hello"]) * 2:
            took, done, served = timed(argv, team.base_dir)
            assert served, (argv, done)  # by the server, not run here after a wait
            assert same(done, here(argv, team.base_dir)), (argv, done)
            assert took <= normal[argv[0]] + wire.ASK_WAIT + 1.0, (argv, took, normal)
        slow = opened[-1]
        slow.settimeout(command_server.REQUEST_WAIT + 5)
        assert slow.recv(64) == b""  # a request not whole in time is dropped
    finally:
        stop.set()
        for sock in opened:
            sock.close()
    logged = (team.state_dir / "messages.log").read_text().splitlines()
    assert len(logged) == before + 4  # two served, two run here to compare: none run twice


def test_a_stopped_server_costs_the_deadline_then_the_command_runs_here_once(team: teamfile.Team, running: int) -> None:
    cold = here(["say", "em", "hello"], team.base_dir)
    before = len((team.state_dir / "messages.log").read_text().splitlines())
    os.kill(running, signal.SIGSTOP)
    try:
        took, done, served = timed(["say", "em", "hello"], team.base_dir)
    finally:
        os.kill(running, signal.SIGCONT)
    assert same(done, cold) and not served
    assert wire.ASK_WAIT <= took < wire.ASK_WAIT + 10
    time.sleep(1.0)  # the server, going on, reads the request and forks: its child gets no "go"
    lines = (team.state_dir / "messages.log").read_text().splitlines()
    assert len(lines) == before + 1, lines  # run once, here


def stopped(
    argv: list[str], cwd: Path, signo: int, *, hold_stdin: bool, before: float = 1.5, **extra: str
) -> tuple[int, str, str]:
    """Run ``fabrikito ARGV`` with its stdin a pipe held open, send it ``signo`` after ``before`` seconds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabrikito", *argv],
        stdin=subprocess.PIPE if hold_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=environ(**extra),
        text=True,
    )
    time.sleep(before)
    proc.send_signal(signo)
    time.sleep(0.5)  # stdin stays open until the signal has done its work (a served one is passed on first)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def last_line(team: teamfile.Team) -> list[str]:
    return (team.state_dir / "messages.log").read_text().splitlines()[-1].split("\t")[1:]


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_served_say_stopped_while_it_reads_its_message_leaves_its_line_as_a_direct_one(
    team: teamfile.Team, running: int, signo: int
) -> None:
    direct = stopped(["say", "em"], team.base_dir, signo, hold_stdin=True, FABRIKITO_SERVER="0")
    direct_line = last_line(team)
    served = stopped(["say", "em"], team.base_dir, signo, hold_stdin=True)
    assert served == direct and direct[0] == EXIT_REFUSED
    assert f"say was stopped by {signal.Signals(signo).name}" in direct[2]
    assert last_line(team) == direct_line and direct_line[2] == "NOT-DELIVERED"


def test_a_say_stopped_before_the_server_took_it_runs_here_and_leaves_its_line(
    team: teamfile.Team, running: int
) -> None:
    """The server stopped (SIGSTOP): the asker waits for it, a SIGTERM comes meanwhile; the command runs
    here with the signal held until its guard is up, so it ends as a say stopped by SIGTERM does."""
    direct = stopped(["say", "em"], team.base_dir, signal.SIGTERM, hold_stdin=True, FABRIKITO_SERVER="0")
    count = len((team.state_dir / "messages.log").read_text().splitlines())
    os.kill(running, signal.SIGSTOP)
    try:
        served = stopped(["say", "em"], team.base_dir, signal.SIGTERM, hold_stdin=True, before=0.5)
    finally:
        os.kill(running, signal.SIGCONT)
    assert served == direct
    time.sleep(1.0)
    lines = (team.state_dir / "messages.log").read_text().splitlines()
    assert len(lines) == count + 1 and lines[-1].split("\t")[3] == "NOT-DELIVERED"


def test_a_served_say_whose_server_dies_finishes_and_leaves_its_line(team: teamfile.Team, running: int) -> None:
    cold = here(["say", "em"], team.base_dir, stdin="after the server died\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabrikito", "say", "em"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=team.base_dir,
        env=environ(),
        text=True,
    )
    time.sleep(1.5)  # served, waiting for its message
    os.kill(running, signal.SIGKILL)
    wait_until(lambda: serverctl.running_pid(team.path) is None)
    out, err = proc.communicate("after the server died\n", timeout=30)
    assert (proc.returncode, out, err) == (cold.returncode, cold.stdout, cold.stderr)
    lines = [line.split("\t")[1:] for line in (team.state_dir / "messages.log").read_text().splitlines()]
    assert lines == [lines[0], lines[0]] and lines[0][2] == "NOT-DELIVERED"  # one each


def test_a_stop_signal_the_asker_ignores_is_ignored_by_the_served_command_too(
    team: teamfile.Team, running: int
) -> None:
    """A background job of a shell has SIGINT ignored: served or not, say ignores it until its guard is up,
    and then the guard takes it (as say run by itself always has)."""
    results = []
    for extra in ({"FABRIKITO_SERVER": "0"}, {}):
        proc = subprocess.Popen(
            [sys.executable, "-m", "fabrikito", "say", "em"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=team.base_dir,
            env=environ(**extra),
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 -- as a shell's `&`
        )
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        out, err = proc.communicate("still here\n", timeout=30)
        results.append((proc.returncode, out, err))
    assert results[0] == results[1] and results[0][0] == EXIT_REFUSED
    assert "say was stopped by SIGINT" in results[0][2]  # stdin is read inside the guard
