"""A served command is the same command: one matrix of scenarios, run directly and by the command server.

Each scenario (delivered, refused for each reason, queued, typed but not
submitted, stopped by a signal at two points, ``flush``, ``status``) runs
against a real Claude Code seat once directly (``FABRIKITO_SERVER=0``) and once
through the team's command server, with and without ``PYTHONUNBUFFERED`` in
the asker, and with the server started with and without it; its stdout,
stderr, exit status and log line must be the same as the direct run's without
it.  The ones whose output matters most also run with stdout a file, stdout
closed, and stdout and stderr a terminal (a tmux pane).  Everything runs in a
user's environment (tests/userenv.py): the server's and the asker's
``PYTHONUNBUFFERED`` are set only where a case says so.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fabrikito.base import procs
from fabrikito.base.tmux import Server
from fabrikito.cli import serverctl
from fabrikito.offline import claude_setup
from fabrikito.offline.seatkit import LiveSeat, SeatFactory, box_ready
from fabrikito.offline.standin import StandIn
from fabrikito.team import teamfile

from .teamkit import clean_env, log_lines, wait_for, write_team

pytestmark = pytest.mark.live

QUEUED = re.compile(r"queued dev-[0-9a-f]{8}")
MESSAGE_ID = re.compile(r"dev-[0-9a-f]{8}")  # a queued message's id: new each time


@dataclass
class Run:
    """What one run of a command showed."""

    code: int
    out: str
    err: str
    line: list[str] | None  # the log line it appended (without its time), or None

    def key(self) -> tuple[int, str, str, list[str] | None]:
        line = None if self.line is None else [MESSAGE_ID.sub("dev-ID", field) for field in self.line]
        return self.code, MESSAGE_ID.sub("dev-ID", self.out), MESSAGE_ID.sub("dev-ID", self.err), line


@dataclass
class Bench:
    """One seat, its team file and the command server."""

    tmux: Server
    seat: LiveSeat
    team: Path
    root: Path
    server_env: dict[str, str] = field(default_factory=dict)

    def start_server(self, unbuffered: bool) -> None:
        loaded = teamfile.load(self.team)
        serverctl.stop(loaded)
        env = clean_env({"PYTHONUNBUFFERED": "1"} if unbuffered else {}) | {"FABRIKITO_SAY_RESEND_WINDOW": "0"}
        assert serverctl.ensure_running(loaded, env=env)
        pid = serverctl.running_pid(self.team)
        assert pid is not None
        assert ("PYTHONUNBUFFERED" in procs.environ(pid)) is unbuffered
        wait_for(lambda: self.tmux.run("list-clients").strip() != "", 10, "the server's tmux control client")

    def stop_server(self) -> None:
        serverctl.stop(teamfile.load(self.team))

    def idle(self) -> None:
        wait_for(lambda: box_ready(self.tmux, self.seat.pane, self.seat.session), 30, "dev's empty box")

    def argv(self, *args: str) -> list[str]:
        command, *rest = args
        return [sys.executable, "-m", "fabrikito", command, "--team", str(self.team), *rest]

    def env(self, *, served: bool, unbuffered: bool, role: str | None) -> dict[str, str]:
        # Each scenario runs once served and twice direct, with the same text: with say's resend window (300 s)
        # the second refusal of a draft would be told as a repeat. The window off, each refusal is a first.
        extra = {"FABRIKITO_SAY_RESEND_WINDOW": "0"}
        if not served:
            extra["FABRIKITO_SERVER"] = "0"
        if unbuffered:
            extra["PYTHONUNBUFFERED"] = "1"
        if role is not None:
            extra["TEAM_ROLE"] = role
        return clean_env(extra)

    def lines(self) -> int:
        return len(log_lines(self.team))

    def new_line(self, before: int) -> list[str] | None:
        new = log_lines(self.team)[before:]
        assert len(new) <= 1, new  # one line at most, never two
        return new[0][1:] if new else None


@dataclass(frozen=True)
class Scenario:
    name: str
    args: tuple[str, ...]
    role: str | None = "live-test"
    stdin: str | None = None  # fed on stdin (None: no stdin)
    signal_after: tuple[int, float] | None = None  # (signal, seconds) with stdin held open
    setup: Callable[[Bench], Callable[[], None]] | None = None  # returns its cleanup
    code: int = 0


def draft(bench: Bench) -> Callable[[], None]:
    bench.tmux.send_keys(bench.seat.pane, "a person's half-written draft", literal=True)
    wait_for(lambda: "half-written draft" in bench.tmux.capture(bench.seat.pane), 10, "the draft")

    def clear() -> None:
        bench.tmux.send_keys(bench.seat.pane, "C-u")
        wait_for(lambda: "half-written draft" not in bench.tmux.capture(bench.seat.pane), 10, "the draft gone")

    return clear


def copy_mode(bench: Bench) -> Callable[[], None]:
    bench.tmux.run("copy-mode", "-t", bench.seat.pane)

    def leave() -> None:
        bench.tmux.run("send-keys", "-t", bench.seat.pane, "-X", "cancel")

    return leave


def seat_stopped(bench: Bench) -> Callable[[], None]:
    """Claude Code frozen: the label is pasted and never drawn, so say ends typed, not submitted.  Frozen by
    ptrace, not SIGSTOP: tmux sends a stopped pane's processes SIGCONT (seen in CI, where the SIGSTOPped seat
    drew the paste and say delivered), while a thread held in a ptrace stop stays stopped until released."""
    tasks = _freeze(bench.seat.pid)

    def resume() -> None:
        _thaw(tasks)
        time.sleep(1.0)
        bench.tmux.send_keys(bench.seat.pane, "C-u")
        time.sleep(0.5)
        bench.tmux.send_keys(bench.seat.pane, "C-u")

    return resume


_PTRACE_DETACH, _PTRACE_SEIZE, _PTRACE_INTERRUPT, _WALL = 17, 0x4206, 0x4207, 0x40000000


def _ptrace(request: int, tid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(request, tid, None, None) != 0:
        raise OSError(ctypes.get_errno(), f"ptrace {request:#x} of {tid}")


def _freeze(pid: int) -> list[int]:
    """Every thread of ``pid`` held in a ptrace stop (this thread is their tracer; :func:`_thaw` releases them)."""
    frozen: list[int] = []
    for _ in range(3):  # a thread started while the others were seized is seized on the next pass
        for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
            if tid in frozen:
                continue
            _ptrace(_PTRACE_SEIZE, tid)
            _ptrace(_PTRACE_INTERRUPT, tid)
            os.waitpid(tid, _WALL)
            frozen.append(tid)
    return frozen


def _thaw(tasks: list[int]) -> None:
    for tid in tasks:
        try:
            _ptrace(_PTRACE_DETACH, tid)
        except OSError:  # a thread that ended while held
            pass


def lock_held(bench: Bench) -> Callable[[], None]:
    """Another say holds the seat's lock: this one waits for it."""
    say_dir = bench.team.parent / ".state" / "live" / "say"
    say_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(say_dir / "dev.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return lambda: os.close(fd)


SCENARIOS = [
    Scenario("delivered", ("say", "dev", "the same message, served or not")),
    Scenario("refused: the box holds text", ("say", "dev", "not into a draft"), setup=draft, code=3),
    Scenario("refused: copy mode", ("say", "dev", "not in copy mode"), setup=copy_mode, code=3),
    Scenario("refused: empty", ("say", "dev", ""), code=3),
    Scenario("refused: to itself", ("say", "dev", "hello me"), role="dev", code=3),
    Scenario("refused: TEAM_ROLE=owner", ("say", "dev", "as the owner"), role="owner", code=3),
    Scenario("refused: a control character", ("say", "dev", "bell \a here"), code=3),
    Scenario("usage: no such seat", ("say", "nobody", "hello"), code=2),
    Scenario("queued", ("say", "--queue", "dev", "wait for the box"), setup=draft),
    Scenario("typed, not submitted", ("say", "dev", "into a stopped agent"), setup=seat_stopped, code=4),
    Scenario("stopped by SIGTERM reading stdin", ("say", "dev"), signal_after=(signal.SIGTERM, 1.5), code=3),
    Scenario(
        "stopped by SIGINT waiting for the lock",
        ("say", "dev", "behind the lock"),
        signal_after=(signal.SIGINT, 1.5),
        setup=lock_held,
        code=3,
    ),
    Scenario("from stdin", ("say", "dev"), stdin="two lines\non stdin\n"),
    Scenario("flush: nothing to flush", ("flush", "dev")),
    Scenario("status", ("status", "--no-screens")),
]
STREAMS = ("pipe", "file", "closed", "terminal")
ALL_STREAMS = ("delivered", "refused: the box holds text", "queued", "flush: nothing to flush")


def run(bench: Bench, scenario: Scenario, *, served: bool, unbuffered: bool, stream: str) -> Run:
    """Run ``scenario`` once; what it printed, its exit status, the log line it wrote."""
    cleanup = scenario.setup(bench) if scenario.setup is not None else None
    before = bench.lines()
    env = bench.env(served=served, unbuffered=unbuffered, role=scenario.role)
    try:
        if stream == "terminal":
            code, out, err = in_a_terminal(bench, scenario, env)
        else:
            code, out, err = in_a_process(bench, scenario, env, stream)
        line = bench.new_line(before)
        # What say --queue left waiting is dropped before the draft goes (its id read from the queue: with
        # stdout closed it printed none).
        listed = subprocess.run(
            bench.argv("queue", "dev"), env=clean_env(), capture_output=True, text=True, check=False
        )
        for queued in sorted(set(MESSAGE_ID.findall(listed.stdout))):
            dropped = subprocess.run(
                bench.argv("queue", "drop", queued), env=clean_env(), capture_output=True, check=False
            )
            assert dropped.returncode == 0, dropped.stderr
    finally:
        if cleanup is not None:
            cleanup()
    if scenario.args[0] != "status":
        bench.idle()
    return Run(code, out, err, line)


def in_a_process(bench: Bench, scenario: Scenario, env: dict[str, str], stream: str) -> tuple[int, str, str]:
    argv = bench.argv(*scenario.args)
    out_file = bench.root / "out"
    if stream == "closed":
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
    stdout = out_file.open("w") if stream == "file" else subprocess.PIPE
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if scenario.stdin is not None or scenario.signal_after else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL if stream == "closed" else stdout,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        if scenario.signal_after is not None:
            signo, after = scenario.signal_after
            time.sleep(after)
            proc.send_signal(signo)
            time.sleep(0.5)  # stdin stays open until the signal has done its work (a served one is passed on first)
            out, err = proc.communicate(timeout=60)
        else:
            out, err = proc.communicate(scenario.stdin, timeout=60)
    finally:
        if stream == "file":
            stdout.close()  # type: ignore[union-attr]
    if stream == "file":
        out = out_file.read_text()
    return proc.returncode, out or "", err


def in_a_terminal(bench: Bench, scenario: Scenario, env: dict[str, str]) -> tuple[int, str, str]:
    """stdout and stderr a terminal: a tmux pane of its own (on the test's server), read back."""
    done = bench.root / "done"
    done.unlink(missing_ok=True)
    command = " ".join(f"'{a}'" for a in bench.argv(*scenario.args))
    script = f'{command} </dev/null; echo "exit=$?" > {done}; sleep 30'
    pane = bench.tmux.new_session("term", ["sh", "-c", script], cwd=str(bench.root), width=200, height=20, env=env)
    try:
        # The shell makes the file before it writes the line: wait for the line.
        wait_for(lambda: done.exists() and "\n" in done.read_text(), 60, "the command in the terminal")
        code = int(done.read_text().strip().split("=")[1])
        shown = bench.tmux.capture(pane).rstrip("\n")
    finally:
        bench.tmux.kill_session("term")
    return code, shown, ""


@pytest.fixture(scope="module")
def pinned() -> Path:
    """The matrix runs on the pinned release only: what it compares is fabrikito's, not the agent's."""
    return claude_setup.ensure_claude()


@pytest.fixture
def bench(tmux_server: Server, claude_home: Path, standin: StandIn, tmp_path: Path, pinned: Path) -> Iterator[Bench]:
    factory = SeatFactory(tmux_server, pinned, claude_home, standin, tmp_path)
    try:
        seat = factory.start("dev")
        team = write_team(tmp_path / "team" / "team.toml", tmux_server, [seat])
        made = Bench(tmux_server, seat, team, tmp_path)
        try:
            yield made
        finally:
            from fabrikito.delivery import worker

            made.stop_server()
            worker.stop(teamfile.load(team))  # say --queue started it
    finally:
        factory.close()


@pytest.mark.parametrize("server_unbuffered", [False, True], ids=["server-buffered", "server-unbuffered"])
def test_a_served_command_is_the_same_command(bench: Bench, server_unbuffered: bool) -> None:
    """The matrix, each served run next to the direct runs it is compared with; every difference is listed
    at the end, each with both runs.  Once for a server started without ``PYTHONUNBUFFERED`` and once for
    one started with it (two tests: two workers run them side by side)."""
    differences: list[str] = []
    seen: dict[tuple[str, str], Run] = {}
    bench.start_server(server_unbuffered)
    for scenario in SCENARIOS:
        for stream in STREAMS if scenario.name in ALL_STREAMS else ("pipe",):
            ref = run(bench, scenario, served=False, unbuffered=False, stream=stream)
            seen[(scenario.name, stream)] = ref
            assert ref.code == scenario.code, (scenario.name, stream, ref)
            if scenario.args[0] == "say" and scenario.code != 2 and stream != "terminal":
                assert ref.line is not None, (scenario.name, ref)  # a say leaves its line, however it ends
            runs = [("direct", True, True)] + [("served", False, u) for u in (False, True)]
            for label, _direct, unbuffered in runs:
                got = run(bench, scenario, served=label == "served", unbuffered=unbuffered, stream=stream)
                if got.key() != ref.key():
                    differences.append(
                        f"{scenario.name} [{stream}] {label} (server PYTHONUNBUFFERED={server_unbuffered}, "
                        f"asker PYTHONUNBUFFERED={unbuffered}): {got} != direct {ref}"
                    )
    assert differences == [], "\n".join(differences)
    assert "delivered to dev" in seen[("delivered", "pipe")].out
    assert QUEUED.search(seen[("queued", "pipe")].out)
    assert seen[("delivered", "closed")].code == 0 and seen[("delivered", "closed")].out == ""
    assert "delivered to dev" in seen[("delivered", "terminal")].out
    assert "nothing to flush" in seen[("flush: nothing to flush", "file")].out
