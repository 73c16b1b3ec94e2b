"""``status`` for 12 seats: tmux calls made and wall time against a bare interpreter start.

Brings up 12 real Claude Code seats offline (as ``bench_up.py`` does; not
timed), then:

* counts the tmux processes one ``fabrikito status`` starts, through a
  ``tmux`` shim first on ``PATH`` that logs each call and execs the real one;
* times the installed ``fabrikito status`` against ``python -c pass``,
  interleaved: as people run it once ``up`` has started the team's command
  server (it runs it), and run in its own process
  (``FABRIKITO_SERVER=0``), and ``status.collect`` in-process;
* times, in the same rounds, the floor of any ``status`` that reads the
  screens: a bare interpreter that makes the same two tmux calls (the pane
  list, then every screen in one chained call) and nothing else (no
  parsing, no ``/proc``, no import but ``os``).

Writes the "status" section of docs/benchmarks.md.
"""

from __future__ import annotations

import compileall
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench import serverswap  # noqa: E402
from bench.bench_up import offline_team, stop  # noqa: E402 -- after the path is set
from bench.report import fabrikito_cli, write_section  # noqa: E402

from fabrikito.cli import serverctl  # noqa: E402
from fabrikito.delivery import seatpane  # noqa: E402
from fabrikito.launch import lifecycle, status  # noqa: E402
from fabrikito.offline import claude_setup  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team import teamfile  # noqa: E402

SEATS = int(os.environ.get("BENCH_SEATS", "12"))
FLOOR_NAME = "the two tmux calls alone"
IMPORT_RE = "python -c 'import re'"
OWN = "fabrikito status, in its own process"
# The floor: the tmux calls of status, from a bare interpreter. argv: tmux, then each call's
# arguments joined by \x1d (the formats hold \x1f), the calls separated by one argument "\x1e".
FLOOR = """
import os, sys
tmux, calls = sys.argv[1], " ".join(sys.argv[2:]).split(" \x1e ")
for call in calls:
    r, w = os.pipe()
    pid = os.posix_spawnp(tmux, [tmux, *call.split("\x1d")], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
    os.close(w)
    while os.read(r, 1 << 16):
        pass
    os.close(r)
    os.waitpid(pid, 0)
"""


def floor_argv(team: teamfile.Team, tmux: str) -> list[str]:
    """``python -c FLOOR``: status's two tmux calls (seatpane.list_panes, seatpane.look_panes), no more."""
    flags = list(team.server().server_flags)
    listing = [*flags, "list-panes", "-a", "-F", "\x1f".join("#{" + f + "}" for f in seatpane.LIST_FIELDS)]
    looks: list[str] = [*flags]
    fmt = "@m" + seatpane.SEP + seatpane.SEP.join("#{" + f + "}" for f in seatpane.SNAP_FIELDS)
    for row in seatpane.list_panes(team.server()):
        if len(looks) > len(flags):
            looks.append(";")
        looks += ["display-message", "-p", "-t", row.pane_id, fmt, ";", "capture-pane", "-p", "-e", "-t", row.pane_id]
    return [sys.executable, "-c", FLOOR, tmux, "\x1d".join(listing), "\x1e", "\x1d".join(looks)]


RUNS = int(os.environ.get("BENCH_RUNS", "20"))
# BENCH_BEFORE=DIR: also time the same command from another copy of the package (DIR/src, byte-compiled),
# in the same rounds, for a before/after made in one run (``git archive <commit> src | tar -x -C DIR``).
BEFORE = os.environ.get("BENCH_BEFORE")
BEFORE_NAME = "fabrikito status, before"


IDLE = 20
IDLE_RUNS = int(os.environ.get("BENCH_IDLE_RUNS", "60"))


def idle_connections(team: teamfile.Team, count: int) -> list[socket.socket]:
    """``count`` connections to the team's command server that send nothing (a hostile or stuck client)."""
    opened = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(serverctl.socket_path(team.path)))
        opened.append(sock)
    return opened


BLOCK = 5  # the code before is timed in blocks of this many runs, between this code's (each with its server)


def swap(team: teamfile.Team, *, before: bool) -> None:
    serverswap.use(
        team.path,
        before=before,
        now_src=ROOT / "src",
        before_src=Path(BEFORE) / "src" if BEFORE else None,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        tmux_flags=list(team.server().server_flags),
    )


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def settle(team: teamfile.Team, timeout: float = 120.0) -> None:
    """Wait until every seat is idle (their kickoff turns over), then a little more:
    timed runs must not share the CPUs with 12 seats still answering."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(seat.state is status.SeatState.IDLE for seat in status.collect(team).seats):
            break
        time.sleep(0.5)
    time.sleep(3)


def main() -> None:
    for name in claude_setup.stripped_names(os.environ):
        os.environ.pop(name, None)
    real_tmux = shutil.which("tmux")
    assert real_tmux is not None
    standin = StandIn().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = claude_setup.make_home(Path(tmp) / "home")
            roles = [f"s{i:02d}" for i in range(SEATS)]
            team = offline_team(Path(tmp) / "team", "st", roles, standin, home, f"fab-bs-{secrets.token_hex(3)}")
            try:
                result = lifecycle.up(team, out=lambda _line: None, helpers=[serverctl.UP_HELPER])
                assert not result.failed, result.failed
                settle(team)
                shim = Path(tmp) / "bin"
                shim.mkdir()
                calls = Path(tmp) / "tmux-calls"
                (shim / "tmux").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real_tmux} "$@"\n')
                (shim / "tmux").chmod(0o755)
                env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PATH": f"{shim}:{os.environ['PATH']}"}
                cli = [*fabrikito_cli(), "status", "--team", str(team.path)]
                assert serverctl.running_pid(team.path) is not None, "up started no command server"
                out = subprocess.run(cli, env=env, check=True, capture_output=True, text=True).stdout
                # the server's child runs with the asker's PATH; what goes through its control client is no call
                tmux_calls = len(calls.read_text().splitlines()) if calls.exists() else 0
                calls.unlink(missing_ok=True)
                own = {**env, "FABRIKITO_SERVER": "0"}
                subprocess.run(cli, env=own, check=True, capture_output=True, text=True)
                own_calls = len(calls.read_text().splitlines())
                states = [line.split()[3] for line in out.splitlines()[2 : 2 + SEATS]]
                bare = [sys.executable, "-c", "pass"]
                plain = {**env, "PATH": os.environ["PATH"]}  # timed without the counting shim
                floor = floor_argv(team, real_tmux)
                names = ("python -c pass", "fabrikito status", OWN, FLOOR_NAME, IMPORT_RE)
                times: dict[str, list[float]] = {name: [] for name in (*names, *((BEFORE_NAME,) if BEFORE else ()))}
                if BEFORE:
                    compileall.compile_dir(str(Path(BEFORE) / "src"), quiet=1)
                    before_env = {**plain, "PYTHONPATH": str(Path(BEFORE) / "src")}
                for run in range(RUNS):
                    if BEFORE and run % BLOCK == 0:  # its asker is served by its own copy's server only
                        swap(team, before=True)
                        for _ in range(BLOCK):
                            times[BEFORE_NAME].append(timed(cli, before_env))
                        swap(team, before=False)
                    times["python -c pass"].append(timed(bare, plain))
                    times["fabrikito status"].append(timed(cli, plain))
                    times[OWN].append(timed(cli, {**plain, "FABRIKITO_SERVER": "0"}))
                    times[FLOOR_NAME].append(timed(floor, plain))
                    times[IMPORT_RE].append(timed([sys.executable, "-c", "import re"], plain))
                idle_times: dict[str, list[float]] = {"without": [], "with": []}
                for _ in range(IDLE_RUNS):  # interleaved: 20 idle connections opened just before, or none
                    idle_times["without"].append(timed(cli, plain))
                    held = idle_connections(team, IDLE)
                    try:
                        idle_times["with"].append(timed(cli, plain))
                    finally:
                        for sock in held:
                            sock.close()
                inproc = []
                for _ in range(RUNS):
                    t0 = time.perf_counter()
                    found = status.collect(team)
                    inproc.append(time.perf_counter() - t0)
                    assert found.tmux_calls <= 2
            finally:
                stop(team, home)
    finally:
        standin.stop()
    median = {k: statistics.median(v) * 1000 for k, v in times.items()}
    p99 = {k: statistics.quantiles(v, n=100)[98] * 1000 for k, v in idle_times.items()}
    idle_ratio = p99["with"] / p99["without"]
    collect_ms = statistics.median(inproc) * 1000
    ratio = median["fabrikito status"] / median["python -c pass"]
    fastest = min(times["fabrikito status"]) / min(times["python -c pass"])
    floor_ratio = median[FLOOR_NAME] / median["python -c pass"]
    own_ratio = median[OWN] / median["python -c pass"]
    print(f"tmux calls: {tmux_calls} (in its own process: {own_calls}); states: {states}")
    print(
        f"medians: {median}; collect in-process {collect_ms:.1f} ms; ratio {ratio:.2f}x (own process "
        f"{own_ratio:.2f}x); p99 with {IDLE} idle connections {idle_ratio:.2f}x; load {os.getloadavg()[0]:.1f}"
    )
    if BEFORE:
        print(f"before: {median[BEFORE_NAME] / median['python -c pass']:.2f}x")
    body = "\n".join(
        [
            f"## `status` for {SEATS} seats: tmux calls and wall time",
            "",
            f"{SEATS} real Claude Code 2.1.316 seats, offline, idle after their kickoffs (states seen: "
            f"{', '.join(sorted(set(states)))}). tmux calls are counted by a `tmux` shim on `PATH`.",
            "",
            "| measure | value |",
            "|---|---|",
            f"| tmux processes one `fabrikito status` starts | **{tmux_calls}**, by the command server's child, "
            f"the rest through its tmux control client ({own_calls} when it runs in its own process; goal: at "
            "most 2) |",
            f"| `python -c pass`, median (fastest) | {median['python -c pass']:.1f} ms "
            f"({min(times['python -c pass']) * 1000:.1f} ms) |",
            f"| `fabrikito status`, run by the command server, median (fastest) | "
            f"{median['fabrikito status']:.1f} ms ({min(times['fabrikito status']) * 1000:.1f} ms) |",
            f"| `fabrikito status` in its own process (`FABRIKITO_SERVER=0`), median | {median[OWN]:.1f} ms "
            f"(**{own_ratio:.2f}x**) |",
            f"| `status.collect` in-process, median | {collect_ms:.1f} ms |",
            f"| {FLOOR_NAME} (a bare interpreter, `os` only), median | {median[FLOOR_NAME]:.1f} ms "
            f"(**{floor_ratio:.2f}x** a bare start) |",
            f"| {IMPORT_RE} (what an entry point's generated script costs first; bin/fabrikito does not), "
            f"median | {median[IMPORT_RE]:.1f} ms "
            f"({median[IMPORT_RE] / median['python -c pass']:.2f}x) |",
            *(
                [
                    f"| the same `status` from the code before (`{BEFORE}`), median | {median[BEFORE_NAME]:.1f} ms "
                    f"(**{median[BEFORE_NAME] / median['python -c pass']:.2f}x**) |"
                ]
                if BEFORE
                else []
            ),
            f"| `fabrikito status` p99 with {IDLE} idle connections open to the server, against without "
            f"({IDLE_RUNS} interleaved runs each) | {p99['with']:.1f} ms against {p99['without']:.1f} ms: "
            f"**{idle_ratio:.2f}x** (goal: 1.5x, {'met' if idle_ratio <= 1.5 else 'not met'}) |",
            "",
            f"`status` costs **{ratio:.2f}x** a bare interpreter start ({RUNS} interleaved runs each; goal: 3x, "
            f"{'met' if ratio <= 3 else 'not met'}; fastest run against fastest run: {fastest:.2f}x). "
            "`up` starts the team's command server (src/fabrikito/cli/server.py): `fabrikito status` "
            "imports its own error module and the wire module only (no `re`, `enum`, `pathlib` or `json`) and "
            "hands itself to the server, whose forked child runs it with everything imported, as the asker "
            "(its streams, folder, environment): the pane list goes through the server's tmux control-mode "
            "client, one tmux call reads every seat's screen (`display-message` and `capture-pane` chained, "
            "read-only), then `/proc`, the registry files and the tail of the log are read and the 12 screens "
            "recognised. The idle connections are read side by side with the asker's (one selector): they cost "
            "it nothing but a little of the server's time. "
            "Without a server (a team not brought up by "
            f"`up`, `FABRIKITO_SERVER=0`) status runs in its own process: {own_ratio:.2f}x, "
            "its imports (`re` and `enum`, `pathlib`, `json`, the recognisers) and the same work. "
            f"The two tmux calls alone, from a bare interpreter, cost {floor_ratio:.2f}x.",
            f"Load average at the end of the run: {os.getloadavg()[0]:.1f}.",
        ]
    )
    write_section("status", body)


if __name__ == "__main__":
    main()
