"""The team's command server (cli/server.py, cli/serverctl.py) and the asking side (cli/wire.py).

A real private tmux server holds two of the team's three sessions (``sleep``
in each: both seats show as "not an agent", the third as down, and a ``say``
to one is refused before anything is typed); the server and ``fabrikito`` run
as real processes.  A ``tmux`` shim first on ``PATH`` logs the parent of the
process that ran each tmux call, which tells whether the server's child made it.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.unit.serverkit import callers, environ, fabrikito, here, same, wait_until, write_team

from fabrikito.base import daemons, teampath, tmuxcontrol
from fabrikito.base.errors import FabrikitoError
from fabrikito.base.tmux import Server
from fabrikito.cli import packagestamp, serverctl, serversocket, wire
from fabrikito.cli import server as command_server
from fabrikito.delivery.seatpane import Look, look_panes
from fabrikito.screen import PaneSnapshot, ScreenState, readings, recogniser_for
from fabrikito.team import teamfile

STATUS = [
    ["status"],
    ["status", "--json"],
    ["status", "--no-screens"],
    ["status", "--team", "other.toml", "--team", "team.toml"],  # the last one counts, as argparse reads it
    ["status", "--nope"],
    ["status", "--help"],
]
SAY = [["say", "em", "hello"], ["say", "nobody", "hello"], ["say", "em", ""], ["flush", "em"], ["say", "--bad"]]


@pytest.fixture
def person(team: teamfile.Team) -> Iterator[None]:
    """A client attached to the team's tmux server (a person): the command server connects no control
    client meanwhile, and its commands' tmux calls are tmux processes found on the asker's PATH."""
    tmux = team.server()
    attached = subprocess.Popen(
        ["tmux", *tmux.server_flags, "-C", "attach", "-t", "acme-em"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    wait_until(lambda: tmux.run("list-clients").strip() != "")
    yield
    attached.kill()
    attached.wait()


def test_commands_run_by_the_server_do_what_they_do_here(
    team: teamfile.Team, shim: tuple[Path, Path], person: None
) -> None:
    """A person is attached, so the server holds no tmux control client: its children run tmux themselves,
    with the asker's PATH, where the shim sees every call."""
    folder, log = shim
    assert serverctl.ensure_running(team)
    pid = serverctl.running_pid(team.path)
    assert pid is not None
    assert not serverctl.ensure_running(team)  # one per team file
    path = f"{folder}:{os.environ['PATH']}"
    cold_log = log.with_name("cold-calls")  # a call a refused command left running may log late
    for argv in [*STATUS, *SAY]:
        served = fabrikito(argv, team.base_dir, PATH=path)
        cold = here(argv, team.base_dir, PATH=path, TMUX_CALLS=str(cold_log))
        assert same(served, cold), (argv, served, cold)
    calls = callers(log)
    assert calls and all(grand == pid for _, grand in calls)  # every tmux call by a child of the server
    assert not any(pid in pair for pair in callers(cold_log))
    for argv in (["status"], ["status", "--team=team.toml"]):  # each in a child, with the asker's PATH
        assert fabrikito(argv, team.base_dir, PATH=path).returncode == 0
        calls = callers(log)
        assert calls and [grand for _, grand in calls] == [pid] * len(calls)
        assert pid not in [parent for parent, _ in calls]  # the server's own PATH never changes
    refused = fabrikito(["say", "em", "hello"], team.base_dir)
    assert refused.returncode == 3 and "not running an agent" in refused.stderr
    assert same(refused, here(["say", "em", "hello"], team.base_dir))
    from_stdin = fabrikito(["say", "em"], team.base_dir, stdin="a message on stdin\n")
    assert same(from_stdin, here(["say", "em"], team.base_dir, stdin="a message on stdin\n"))
    by_path = fabrikito(["status", "--team", str(team.path), "--json"], Path("/"))
    assert same(by_path, here(["status", "--json"], team.base_dir)) and '"acme"' in by_path.stdout
    logged = [line.split("\t", 1)[1] for line in (team.state_dir / "messages.log").read_text().splitlines()]
    assert "owner\tem\tNOT-DELIVERED\thello" in logged
    assert all(logged.count(line) % 2 == 0 for line in logged), logged  # each served line, once more here


def test_the_sender_is_found_from_the_asking_process(team: teamfile.Team, tmp_path: Path) -> None:
    """Run from a pane of another tmux server, say refuses: the walk up starts at the asker, not
    at the server's child (whose ancestors are the server's, outside any tmux)."""
    assert serverctl.ensure_running(team)
    other = Server(socket_name=f"fab-cs-other-{secrets.token_hex(4)}")
    out = tmp_path / "out"
    line = f"cd {team.base_dir} && {sys.executable} -m fabrikito say em hello > {out} 2>&1; echo $? >> {out}; sleep 60"
    env = environ()
    try:
        other.new_session("elsewhere", ["env", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", line], cwd="/")
        deadline = time.monotonic() + 30
        while not (out.exists() and out.read_text().strip().splitlines()[-1:] == ["3"]):
            assert time.monotonic() < deadline, out.read_text() if out.exists() else "no output"
            time.sleep(0.05)
    finally:
        if other.alive():
            other.kill_server()
    assert "this runs inside a pane of another tmux server" in out.read_text()


@pytest.mark.parametrize("argv", [["status"], ["status", "--team=team.toml"]], ids=["answered", "forked"])
def test_a_signal_reaches_the_command_and_the_asker_ends_as_it_does(
    team: teamfile.Team, tmp_path: Path, argv: list[str], person: None
) -> None:
    """status stuck in a tmux call that does not answer, run by the server itself (a plain line) or
    by its child: Ctrl-C and SIGTERM end it as they end it when it runs by itself."""
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "tmux").write_text("#!/bin/sh\nexec sleep 5\n", encoding="utf-8")
    (slow / "tmux").chmod(0o755)
    assert serverctl.ensure_running(team)
    for signo, code in ((signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)):
        results = []
        for extra in ({}, {"FABRIKITO_SERVER": "0"}):
            asker = subprocess.Popen(
                [sys.executable, "-m", "fabrikito", *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=team.base_dir,
                env=environ(PATH=f"{slow}:{os.environ['PATH']}", **extra),
            )
            time.sleep(1.5)  # waiting for tmux
            asker.send_signal(signo)
            out, err = asker.communicate(timeout=30)
            results.append((asker.returncode, out, err))
        assert results[0] == results[1], results
        assert results[0][0] == code


def test_a_dead_server_leaves_the_command_to_run_here(team: teamfile.Team) -> None:
    assert serverctl.ensure_running(team)
    pid = serverctl.running_pid(team.path)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not daemons.lock_held(serverctl.lock_path(team.path)))
    assert serverctl.socket_path(team.path).exists()  # its socket is left, nobody listens
    served = fabrikito(["status"], team.base_dir)
    assert same(served, here(["status"], team.base_dir)) and served.returncode == 0
    assert serverctl.ensure_running(team)  # a new one takes the stale socket's place
    assert serverctl.running_pid(team.path) not in (None, pid)


def test_a_command_outlives_a_stopped_server(team: teamfile.Team) -> None:
    assert serverctl.ensure_running(team)
    asker = subprocess.Popen(
        [sys.executable, "-m", "fabrikito", "say", "em"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=team.base_dir,
        env=environ(),
        text=True,
    )
    time.sleep(1.0)
    said = serverctl.stop(team)
    assert said is not None and said.startswith("stopped the command server")  # its lock is not the child's
    _, err = asker.communicate("still delivered to its end\n", timeout=30)
    assert asker.returncode == 3 and "not running an agent" in err


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


def drain(conn: socket.socket, answer: bytes) -> None:
    """Read a whole request (its first line says how long it is), then answer ``answer``."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    for fd in fds:
        os.close(fd)
    head, _, body = data.partition(b"\n")
    length = wire.request_length(head)
    assert length is not None, data[:80]
    while len(body) < length:
        body += conn.recv(1 << 16)
    conn.sendall(answer)


def started_then(conn: socket.socket, then: bytes) -> None:
    """Read a whole request, say "started" as a child does, wait for "go", then answer ``then``."""
    drain(conn, b"started 1\n")
    conn.settimeout(5)
    assert conn.recv(3) == wire.GO
    conn.sendall(then)


@pytest.mark.parametrize(
    ("answer", "runs_here"),
    [
        pytest.param(lambda conn: None, True, id="closes"),
        pytest.param(lambda conn: drain(conn, b"garbage\n"), True, id="garbage"),
        pytest.param(lambda conn: drain(conn, b"declined busy\n"), True, id="declines"),
        pytest.param(lambda conn: drain(conn, b""), True, id="says-nothing"),
        pytest.param(lambda conn: started_then(conn, wire.NOT_RUN + b"\n"), True, id="started-not-run"),
        pytest.param(lambda conn: started_then(conn, b""), False, id="started-then-gone"),
    ],
)
def test_a_command_runs_here_only_when_the_server_started_none(
    team: teamfile.Team, answer: Callable[[socket.socket], None], runs_here: bool
) -> None:
    where = serverctl.socket_path(team.path)
    where.parent.mkdir(mode=0o700, exist_ok=True)
    stop = fake_server(where, answer)
    try:
        asked = fabrikito(["status"], team.base_dir)
    finally:
        stop()
    if runs_here:
        assert same(asked, here(["status"], team.base_dir)) and "acme-em" in asked.stdout
    else:  # it may have run there: never run again here
        assert asked.returncode == 1 and asked.stdout == ""
        assert "went away while the command ran: its exit status is not known" in asked.stderr


def in_process(team: teamfile.Team) -> command_server.CommandServer:
    """A server object for the team, listening, in this process (its checks called by the test)."""
    serverctl.socket_path(team.path).parent.mkdir(mode=0o700, exist_ok=True)
    cwd = os.getcwd()
    try:
        listener, inode = serversocket.listen(team.path)  # binds from inside the folder
    finally:
        os.chdir(cwd)
    return command_server.CommandServer(team.path, listener, inode, team.server().resolved_socket_path(), team=team)


def test_the_server_stops_wanting_to_run_when_its_team_is_gone(team: teamfile.Team) -> None:
    server = in_process(team)
    try:
        assert server.still_wanted()
        team.server().kill_server()
        wait_until(lambda: not server.still_wanted())  # tmux leaves its socket: nobody listens on it
        assert serverctl.socket_path(team.path).exists()
        other = command_server.CommandServer(team.path, server.listener, server.inode + 1, None)
        assert not other.still_wanted()  # the socket there is not its own
    finally:
        server.listener.close()


def test_it_shares_one_control_client_and_ends_when_only_that_clients_session_is_left(
    team: teamfile.Team, tmp_path: Path
) -> None:
    """The client keeps the tmux server running: with the seats' sessions gone, the server ends itself
    (and tmux with it); and two teams' servers connecting to one tmux server at once never both connect
    (a client connecting while another connects can crash tmux before 3.7)."""
    from fabrikito.base import tmuxcontrol

    tmux = team.server()
    other_folder = tmp_path / "other"
    other_folder.mkdir()
    other = teamfile.load(write_team(other_folder, str(tmux.socket_name)))
    for _ in range(5):
        got: list[object] = []
        threads = [
            threading.Thread(target=lambda t, into: into.append(serverctl.connect_control(t)), args=(t, got))
            for t in (team, other)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        controls = [c for c in got if isinstance(c, tmuxcontrol.Control)]
        assert len(controls) == 1 and tmux.alive()  # the second saw the first attached
        controls[0].close()
        wait_until(lambda: tmuxcontrol.CONTROL_SESSION not in tmux.run("list-sessions", "-F", "#{session_name}"))
    assert serverctl.ensure_running(team)
    wait_until(lambda: tmuxcontrol.CONTROL_SESSION in tmux.run("list-sessions", "-F", "#{session_name}"))
    assert serverctl.connect_control(other) is None  # the team's server holds the one client
    assert serverctl.stop(team) is not None
    wait_until(lambda: tmuxcontrol.CONTROL_SESSION not in tmux.run("list-sessions", "-F", "#{session_name}"))
    server = in_process(team)
    try:
        server.control = serverctl.connect_control(team)
        assert server.control is not None and server.still_wanted()
        for session in ("acme-em", "acme-sec"):
            tmux.kill_session(session)
        assert not server.still_wanted()  # only its client's session keeps tmux up
        server.control.close()
        wait_until(lambda: not tmux.alive())
    finally:
        server.listener.close()


def test_its_control_client_gone_its_commands_run_tmux_themselves(team: teamfile.Team) -> None:
    """The server's client killed (or its session): served commands still answer as they do here."""
    from fabrikito.base import tmuxcontrol

    tmux = team.server()
    assert serverctl.ensure_running(team)
    wait_until(lambda: tmux.run("list-clients", "-F", "#{client_pid}").strip() != "")
    os.kill(int(tmux.run("list-clients", "-F", "#{client_pid}").split()[0]), signal.SIGKILL)
    wait_until(lambda: tmux.run("list-clients").strip() == "")
    for argv in SAY:
        assert same(fabrikito(argv, team.base_dir), here(argv, team.base_dir)), argv
    assert serverctl.running_pid(team.path) is not None and tmux.alive()
    assert tmuxcontrol.CONTROL_SESSION in tmux.run("list-sessions", "-F", "#{session_name}")  # left behind


def test_down_removes_a_control_session_its_server_left(team: teamfile.Team) -> None:
    from fabrikito.base import tmuxcontrol
    from fabrikito.launch import teardown

    tmux = team.server()
    assert serverctl.ensure_running(team)
    # a server starting under a loaded machine (two workers of the portable pass) can take longer than 5 s
    wait_until(lambda: tmuxcontrol.CONTROL_SESSION in tmux.run("list-sessions", "-F", "#{session_name}"), 30)
    # Killed only once tmux lists its client attached to that session: a client its owner leaves still
    # connecting can keep tmux 3.3a from ever letting it go (cli/server.py: connect), and this test then
    # waited its 30 s for the client to go (once in a full run, two workers).
    wait_until(lambda: tmuxcontrol.CONTROL_SESSION in tmux.run("list-clients", "-F", "#{client_session}"), 30)
    pid = serverctl.running_pid(team.path)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # no kill-session from it: its session stays
    wait_until(lambda: tmux.run("list-clients").strip() == "", 30)
    said: list[str] = []
    assert teardown.down(team, out=said.append, grace=1.0) == 0
    assert any(
        line.startswith(f"removed the command server's tmux session {tmuxcontrol.CONTROL_SESSION}") for line in said
    )
    assert not tmux.alive()  # no session left, tmux ended


def test_the_tmux_event_lock_is_one_holder_at_a_time_and_never_a_hang(team: teamfile.Team) -> None:
    """up and down hold it around creating and killing sessions, a server around connecting its client."""
    tmux = team.server()
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with tmuxcontrol.tmux_events(tmux):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    with tmuxcontrol.tmux_events(tmux):
        waited = time.monotonic() - started
    thread.join()
    assert 0.25 <= waited < tmuxcontrol.CONNECT_WAIT
    release.clear()
    held.clear()
    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    started = time.monotonic()
    with tmuxcontrol.tmux_events(tmux):  # held past CONNECT_WAIT: goes on without it
        waited = time.monotonic() - started
    release.set()
    thread.join()
    assert tmuxcontrol.CONNECT_WAIT <= waited < tmuxcontrol.CONNECT_WAIT + 1


def test_a_stop_while_it_connects_comes_once_its_client_is_connected_and_shared(
    team: teamfile.Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client its owner leaves half connected can keep tmux 3.3a from ever exiting: the stop signals are
    held while it connects, and a stop that came meanwhile ends the server once the client can be closed."""

    real = serverctl.connect_control

    def stopped_meanwhile(t: teamfile.Team) -> tmuxcontrol.Control | None:
        # down's stop, while the client connects. To this thread, which holds the stop signals while it
        # connects: sent to the process, the kernel hands it to a thread that does not hold them (a parallel
        # worker's own threads), and the server, single-threaded, has no such thread.
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        return real(t)

    monkeypatch.setattr(command_server, "connect_control", stopped_meanwhile)
    previous = signal.signal(signal.SIGTERM, command_server._on_signal)
    server = in_process(team)
    try:
        with pytest.raises(command_server._Stop):
            server.connect()
        assert server.control is not None and server.control.broken is None  # connected, then stopped
        server.control.close()  # what the server's way out does
        wait_until(lambda: team.server().run("list-clients").strip() == "")
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()


def test_the_server_reads_its_team_file_once_for_all_it_starts_with(
    team: teamfile.Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its tmux socket, its control client and its first reading (warm) come from the one Team read when
    it started; a server made without one reads it once, when first needed."""
    reads: list[object] = []
    real = teamfile.load

    def counted(*args: object, **kwargs: object) -> teamfile.Team:
        reads.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(teamfile, "load", counted)
    for given, expected in ((team, 0), (None, 1)):
        reads.clear()
        server = in_process(team)
        server.team = given
        try:
            server.connect()
            server.warm()
            assert server.loaded() == team
            assert len(reads) == expected, reads
        finally:
            if server.control is not None:
                server.control.close()
            server.close()
    assert command_server._tmux_socket(team) == team.server().resolved_socket_path()
    assert command_server._tmux_socket(None) is None


def test_a_control_client_that_cannot_be_made_leaves_the_server_serving(
    team: teamfile.Team, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_team: teamfile.Team) -> None:
        raise RuntimeError("no memory file here")

    monkeypatch.setattr(command_server, "connect_control", broken)
    assert command_server._connect(team) is None
    assert "no memory file here" in capsys.readouterr().err  # in its error file, for whoever looks


def test_it_connects_its_client_once_nobody_is_attached_and_again_after_it_went(team: teamfile.Team) -> None:

    tmux = team.server()
    person = subprocess.Popen(
        ["tmux", *tmux.server_flags, "-C", "attach", "-t", "acme-em"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    server = in_process(team)
    try:
        wait_until(lambda: tmux.run("list-clients").strip() != "")
        assert server.check() and server.control is None  # someone attached: not now
        person.kill()
        person.wait()
        wait_until(lambda: tmux.run("list-clients").strip() == "")
        assert server.check() and server.control is not None and server.control.broken is None
        first = server.control.proc.pid
        os.kill(first, signal.SIGKILL)

        def reaped() -> bool:
            server.reap()  # as its loop does
            return server.control is not None and server.control.broken is not None

        wait_until(reaped)
        # its commands run tmux themselves meanwhile (Invocation.tmux: a broken client is not used)
        assert server.check() and server.control is not None and server.control.broken is None
        assert server.control.proc.pid != first
    finally:
        person.kill()
        if server.control is not None:
            server.control.close()
        server.close()


def test_down_stops_it_and_its_socket_goes(team: teamfile.Team) -> None:
    """Stopped as it connects its tmux client, too: the client is connected or closed, never left half
    connected (tmux 3.3a then may never exit), and the stop is not lost."""
    assert serverctl.stop(team) is None
    tmux = team.server()
    tmux_pid = int(tmux.run("display-message", "-p", "#{pid}"))
    for _ in range(5):
        assert serverctl.ensure_running(team)
        pid = serverctl.running_pid(team.path)
        assert serverctl.stop(team) == f"stopped the command server (pid {pid})"
        assert not serverctl.socket_path(team.path).exists()
        assert serverctl.running_pid(team.path) is None
        wait_until(lambda: tmux.run("list-clients").strip() == "")
        assert "acme-em" in tmux.run("list-sessions", "-F", "#{session_name}")  # tmux answers
    tmux.kill_server()
    wait_until(
        lambda: (
            not Path(f"/proc/{tmux_pid}").exists()
            or Path(f"/proc/{tmux_pid}/stat").read_text().split(") ")[1][0] == "Z"
        )
    )


def test_the_socket_and_lock_are_the_users_alone(team: teamfile.Team) -> None:
    assert serverctl.ensure_running(team)
    assert serverctl.socket_path(team.path).parent.stat().st_mode & 0o777 == 0o700
    assert serverctl.socket_path(team.path).stat().st_mode & 0o777 == 0o600
    assert serverctl.lock_path(team.path).stat().st_mode & 0o777 == 0o600


def test_a_file_in_the_sockets_place_is_refused_not_removed(team: teamfile.Team) -> None:
    where = serverctl.socket_path(team.path)
    where.parent.mkdir(mode=0o700, exist_ok=True)
    where.write_text("mine", encoding="utf-8")
    with pytest.raises(FabrikitoError, match="did not start"):
        serverctl.ensure_running(team)
    assert where.read_text(encoding="utf-8") == "mine"
    assert "is there and is not a socket: remove it" in (team.state_dir / serverctl.ERR_NAME).read_text()


MODULES = """
import sys
from fabrikito import cli
code = cli.main(sys.argv[1:])
print(" ".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("argv", [["status"], ["say", "em", "hello"]])
def test_a_served_command_imports_next_to_nothing(team: teamfile.Team, argv: list[str]) -> None:
    assert serverctl.ensure_running(team)
    done = subprocess.run(
        [sys.executable, "-c", MODULES, *argv],
        capture_output=True,
        text=True,
        cwd=team.base_dir,
        env=environ(),
        timeout=60,
        check=False,
    )
    modules = set(done.stderr.split("\n")[-2].split())
    assert "fabrikito.cli.wire" in modules, done.stderr
    heavy = {"re", "enum", "pathlib", "json", "signal", "socket", "fabrikito.team.teamfile", "collections"}
    assert sorted(heavy & modules) == []


def test_status_is_answered_with_the_askers_time_zone(team: teamfile.Team) -> None:
    assert serverctl.ensure_running(team)
    (team.state_dir / "messages.log").write_text("2026-12-01T10:00:00\towner\tem\tDELIVERED\thi\n")
    for tz in ("UTC", "Asia/Tokyo"):
        served = fabrikito(["status", "--json"], team.base_dir, TZ=tz)
        assert same(served, here(["status", "--json"], team.base_dir, TZ=tz))


@pytest.mark.parametrize(
    "path", ["team.toml", "./team.toml", "a/../team.toml", "a//b/./c.toml", "/x/y.toml", "//x/y.toml", "///x", ""]
)
def test_absolute_is_pathlibs(path: str) -> None:
    assert teampath.absolute(path) == str(Path(path).absolute())


def test_the_team_asked_is_the_one_the_line_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FABRIKITO_TEAM", raising=False)
    monkeypatch.chdir("/")
    assert wire.team_of(["say", "--team", "t/a.toml", "em", "x"]) == "/t/a.toml"
    assert wire.team_of(["status", "--team=/b.toml"]) == "/b.toml"
    assert wire.team_of(["say", "em", "--", "--team", "x"]) == "/team.toml"
    monkeypatch.setenv("FABRIKITO_TEAM", "/c/team.toml")
    assert wire.team_of(["flush", "em"]) == "/c/team.toml"
    assert wire.team_of(["status", "--team", "/a.toml", "--team=/b.toml"]) == "/b.toml"
    assert wire.team_of(["status"], {"FABRIKITO_TEAM": "t.toml"}, "/w") == "/w/t.toml"  # the asker's
    assert wire.team_of(["status"], {}, "/w") == "/w/team.toml"


def test_a_request_round_trips_and_a_bad_one_is_none() -> None:
    env = {"TZ": "UTC", "PATH": "/a=b:/c", "EMPTY": ""}
    stdio = "utf-8,strict,;utf-8,strict,l;utf-8,backslashreplace,lw"
    request = wire.encode_request("/p", "/w", 0o27, ["say", "em", "two\nlines é"], env, stdio, (signal.SIGINT,))
    head, _, body = request.partition(b"\n")
    assert wire.request_length(head) == len(body)
    got = wire.decode_request(body)
    assert got is not None
    assert (got.package, got.cwd, got.umask, got.stdio, got.argv, got.env, got.ignored) == (
        "/p",
        "/w",
        0o27,
        stdio,
        ["say", "em", "two\nlines é"],
        env,
        (signal.SIGINT,),
    )
    assert wire.decode_request(body.replace(b"\x002\x003\x00", b"\x009\x003\x00")) is None  # not a stop signal
    assert wire.decode_request(body + b"\0novalue") is None
    assert wire.decode_request(body.replace(b"\x0027\x00", b"\x0099\x00")) is None  # not octal
    assert wire.decode_request(body.replace(stdio.encode(), b"utf-8")) is None  # not three streams
    short = wire.encode_request("/p", "w", 0, [], {})
    assert wire.decode_request(short.partition(b"\n")[2]) is None  # a relative cwd
    assert wire.request_length(b"fabrikito-run/1 12") is None  # another protocol
    assert wire.request_length(b"fabrikito-run/2 -1") is None


def test_a_command_that_ends_at_once_runs_once(team: teamfile.Team) -> None:
    """The child says "started" before its exit line, so an asker never takes a finished command for
    one not started (and runs it again): a usage error printed twice would show it."""
    assert serverctl.ensure_running(team)
    cold = here(["say", "--bad"], team.base_dir)
    assert cold.returncode == 2 and cold.stderr.count("fabrikito say:") == 1
    for _ in range(15):
        assert same(fabrikito(["say", "--bad"], team.base_dir), cold)


def test_a_module_changed_added_or_removed_is_seen_without_a_walk_and_a_cache_written_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before every command the server asks whether its package changed (it then declines and exits): what
    package_stamp tells, from a stat of each module and folder."""
    package = tmp_path / "fabrikito"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli" / "a.py").write_text("A = 1\n")
    monkeypatch.setattr(packagestamp, "PACKAGE", package)
    stamp = packagestamp.PackageStamp()
    assert not stamp.changed()
    (package / "cli" / "__pycache__").mkdir()
    (package / "cli" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    assert not stamp.changed() and not stamp.changed()  # its folder walked once, the same modules
    (package / "cli" / "notes.txt").write_text("not a module")
    assert not stamp.changed()
    for change in (
        lambda: (package / "cli" / "a.py").write_text("A = 2\n"),  # the same size, another time
        lambda: (package / "cli" / "b.py").write_text(""),
        lambda: (package / "cli" / "a.py").rename(package / "cli" / "c.py"),
        (package / "__init__.py").unlink,
    ):
        stamp = packagestamp.PackageStamp()
        time.sleep(0.01)
        change()
        assert stamp.changed()
        assert packagestamp.package_stamp() != stamp.stamp


REPLAY = Path(__file__).resolve().parents[2] / "bench" / "replay_agent.sh"
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "screens" / "2.1.316"


def test_each_check_reads_the_team_again_so_its_children_start_with_the_screens_as_they_are_now(
    tmp_path: Path, server: Server
) -> None:
    """The server's first reading (warm) is kept for its children; a screen changed since would be recognised
    again in every child, so each check reads the team again (docs/decisions/0042)."""
    config = tmp_path / "claude-config"
    path = tmp_path / "team.toml"
    path.write_text(
        f'name = "rf"\ntmux_socket = "{server.socket_name}"\n\n[[seat]]\nrole = "dev"\nsession = "rf-dev"\n'
    )
    team = teamfile.load(path)

    def show(stem: str, *, again: bool = False) -> Look:
        env = ["-e", f"REPLAY_SCREEN={RECORDED / stem}", "-e", f"CLAUDE_CONFIG_DIR={config}"]
        if again:
            server.run("respawn-pane", "-k", "-t", "=rf-dev:", *env, "--", str(REPLAY))
        else:
            server.run("new-session", "-d", "-s", "rf-dev", "-x", "220", "-y", "50", *env, "--", str(REPLAY))
        pane = server.run("list-panes", "-t", "=rf-dev", "-F", "#{pane_id} #{pane_pid}").split()
        wait_until((config / "sessions" / f"{pane[1]}.json").exists)
        wait_until(lambda: ScreenState.READY is recogniser_for("claude", "2.1.316").recognise(look(pane[0])).state)
        return look_panes(server, [pane[0]])[pane[0]]

    def look(pane: str) -> PaneSnapshot:
        return look_panes(server, [pane])[pane].snapshot

    reader = recogniser_for("claude", "2.1.316")
    first = show("inline-220x50-empty-box-fresh-start")
    readings.forget()
    served = in_process(team)
    try:
        served.warm()
        assert readings.holds(reader, first.snapshot)
        changed = show("inline-220x50-after-turn", again=True)
        assert changed.snapshot != first.snapshot and not readings.holds(reader, changed.snapshot)
        assert served.check()
        assert readings.holds(reader, changed.snapshot)
        # A team file that does not load now: the check says nothing of it and keeps serving.
        path.write_text("name = \n")
        assert served.check()
    finally:
        served.listener.close()
        readings.forget()
