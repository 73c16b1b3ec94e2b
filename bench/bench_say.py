"""``say`` latency into an idle real seat against the floor, and throughput with concurrent senders.

One real Claude Code 2.1.316 seat (inline renderer, 120x40) on a private tmux
server, answered by the stand-in model.  In the same run, interleaved, each
timed from its start to the moment the stand-in receives the model request
the message causes (the seat's turn starting is what delivery is for):

* floor: one bare bracketed paste of the labelled message and an Enter right
  after it (two tmux calls, no checks: what any tool that types into a pane
  must at least do);
* ``deliver``: ``say``'s engine in-process (lock, pane checks, two pastes,
  the box checks, Enter);
* ``say`` CLI: the installed ``fabrikito say`` end to end, as a script runs
  it (interpreter start, the team file, who is speaking, the log line): once
  ``up`` has started the team's command server (it runs the command), and in
  its own process (``FABRIKITO_SERVER=0``).

Then 8 senders at once, each sending several messages: messages per second,
and whether every message arrived once, intact.  Writes the "say" section of
docs/benchmarks.md.
"""

from __future__ import annotations

import compileall
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench import serverswap  # noqa: E402
from bench.report import fabrikito_cli, write_section  # noqa: E402

from fabrikito.base.errors import TmuxError  # noqa: E402
from fabrikito.base.tmux import Server  # noqa: E402
from fabrikito.cli import serverctl  # noqa: E402
from fabrikito.delivery import engine, seatpane  # noqa: E402
from fabrikito.offline import claude_setup, seatkit  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team import teamfile  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
SENDERS = 8
EACH = int(os.environ.get("BENCH_EACH", "3"))


FLOOR = "floor: bare paste + Enter"
ENGINE = "deliver (in-process, tmux processes)"
CLI = "fabrikito say (CLI, run by the command server)"
OWN = "fabrikito say (CLI, in its own process)"
# BENCH_BEFORE=DIR: also time the CLI from another copy of the package (DIR/src), in the same rounds.
BEFORE = os.environ.get("BENCH_BEFORE")
CLI_BEFORE = "fabrikito say (CLI), the code before"


def to_request(standin: StandIn, mark: int, needle: str, t0: float) -> float:
    """Seconds from ``t0`` to the model request carrying ``needle``; then let the seat go idle again."""
    request = standin.wait_for_request("dev", needle, 60, since=mark)
    time.sleep(0.3)  # the stand-in answers at once; let the turn end and the box redraw
    return request.at - t0


def main() -> None:
    binary = claude_setup.ensure_claude()
    server = Server(socket_name=f"fab-bench-say-{os.getpid()}", timeout=10)
    with tempfile.TemporaryDirectory() as tmp, StandIn() as standin:
        root = Path(tmp)
        home = claude_setup.make_home(root / "home")
        seat = seatkit.start_seat(
            server,
            binary=binary,
            role="dev",
            home=home,
            cwd=root / "work",
            base_url=standin.base_url("dev"),
            width=120,
            height=40,
        )
        team_path = root / "team.toml"
        team_path.write_text(
            f'name = "bench"\ntmux_socket = "{server.socket_name}"\n'
            f'[[seat]]\nrole = "dev"\nsession = "{seat.session}"\npermission_mode = "acceptEdits"\n'
        )
        team = teamfile.load(team_path)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TEAM_ROLE": "live-test"}
        cli = fabrikito_cli()
        assert serverctl.ensure_running(team, env=env), "a command server runs for the bench's team already"
        times: dict[str, list[float]] = {
            FLOOR: [],
            ENGINE: [],
            CLI: [],
            OWN: [],
            **({CLI_BEFORE: []} if BEFORE else {}),
        }
        wall: dict[str, list[float]] = {ENGINE: [], CLI: [], OWN: [], **({CLI_BEFORE: []} if BEFORE else {})}
        variants = {CLI: (env, "cli"), OWN: ({**env, "FABRIKITO_SERVER": "0"}, "own")}
        if BEFORE:
            compileall.compile_dir(str(Path(BEFORE) / "src"), quiet=1)
            variants[CLI_BEFORE] = ({**env, "PYTHONPATH": str(Path(BEFORE) / "src")}, "before")

        def swap(*, before: bool) -> None:
            serverswap.use(
                team_path,
                before=before,
                now_src=ROOT / "src",
                before_src=Path(BEFORE) / "src" if BEFORE else None,
                env=env,
                tmux_flags=list(server.server_flags),
            )

        try:
            for i in range(ROUNDS):
                mark = standin.mark()
                t0 = time.monotonic()
                server.paste(seat.pane, f"[from live-test] floor round {i} please look")
                server.send_keys(seat.pane, "Enter")
                times[FLOOR].append(to_request(standin, mark, f"floor round {i} ", t0))

                mark = standin.mark()
                ctx = engine.Context(team=team, server=server, panes=seatpane.list_panes(server))
                t0 = time.monotonic()
                result = engine.deliver(ctx, team.seats[0], "live-test", f"engine round {i} please look")
                wall[ENGINE].append(time.monotonic() - t0)
                assert result.result is engine.Result.DELIVERED, result
                times[ENGINE].append(to_request(standin, mark, f"engine round {i} ", t0))

                for name, (cli_env, word) in variants.items():
                    if name == CLI_BEFORE:  # its asker is served by its own copy's server only
                        swap(before=True)
                    mark = standin.mark()
                    t0 = time.monotonic()
                    done = subprocess.run(
                        [*cli, "say", "--team", str(team_path), "dev", f"{word} round {i} please look"],
                        env=cli_env,
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    wall[name].append(time.monotonic() - t0)
                    assert done.returncode == 0, done.stderr
                    times[name].append(to_request(standin, mark, f"{word} round {i} ", t0))
                    if name == CLI_BEFORE:
                        swap(before=False)

            mark = standin.mark()
            t0 = time.perf_counter()
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", _SENDER, str(team_path), str(n), str(EACH), *cli],
                    env=env,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for n in range(SENDERS)
            ]
            outs = [p.communicate(timeout=600)[0] for p in procs]
            elapsed = time.perf_counter() - t0
            codes = [int(c) for out in outs for c in out.split()]
            delivered = codes.count(0)
            expected = {f"sender {n} message {k} end" for n in range(SENDERS) for k in range(EACH)}
            deadline = time.monotonic() + 120
            arrived: set[str] = set()
            while time.monotonic() < deadline:
                texts = [r.last_user_text for r in standin.requests("dev") if r.index >= mark and r.is_main]
                arrived = {m for m in expected if any(f"[from live-test] {m}" in t for t in texts)}
                if len(arrived) >= delivered:
                    break
                time.sleep(0.5)
        finally:
            serverctl.stop(team)
            with contextlib.suppress(TmuxError):
                server.kill_server()
            seatkit.stop_pids(seatkit.home_pids(home))
    refused, typed = codes.count(3), codes.count(4)
    median = {name: statistics.median(v) * 1000 for name, v in times.items()}
    floor = median[FLOOR]
    rows = [
        f"| {name} | {median[name]:.0f} | {min(v) * 1000:.0f} | "
        + (f"{statistics.median(wall[name]) * 1000:.0f}" if name in wall else "-")
        + f" | {median[name] / floor:.2f}x |"
        for name, v in times.items()
    ]
    ratio = median[CLI] / floor
    own_ratio = median[OWN] / floor
    fastest = min(times[CLI]) / min(times[FLOOR])
    body = "\n".join(
        [
            "## `say`: from the command to the model's request, and concurrent senders",
            "",
            f"`python bench/bench_say.py`: one real seat (inline, 120x40), {ROUNDS} interleaved rounds; "
            "each variant timed from its start to the stand-in receiving the model request its message causes.",
            "",
            "| variant | to the request, median ms | min ms | its own wall time, median ms | ratio to floor |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"`say` CLI / floor: **{ratio:.2f}x** (goal: 2x; {'met' if ratio <= 2 else 'not met'}; fastest run "
            f"against fastest run: {fastest:.2f}x), run by the team's command server as after `up` "
            "(src/fabrikito/cli/server.py: the command hands itself to a process that has everything "
            "imported, which forks a child to run it with the command's own input, output, arguments and "
            "environment; the child's tmux commands go through the server's tmux control-mode client, "
            "src/fabrikito/base/tmuxcontrol.py: a look costs no tmux process, so it looks every 3 ms); "
            f"in its own process (`FABRIKITO_SERVER=0`) {own_ratio:.2f}x, each look a tmux process, every 10 ms, "
            "as `deliver` in the bench's own process. "
            "The floor is one bare paste of the labelled message and an Enter, no checks. `say` adds "
            "the team file, who is speaking, the lock, a look at the pane and its foreground "
            "process, a screen read before typing, the label pasted on its own and read back, the message pasted and "
            "read back, then the Enter; each screen read waits for Claude Code to draw the "
            "paste. After the Enter `say` reads until the box is seen empty (its wall time above); its first look "
            "comes 50 ms after the Enter (`ENTER_SETTLE`), since looks taken while Claude Code builds its request "
            "(a tmux client and a capture each, on two shared cores) delayed the request by 10-20 ms.",
            "",
            f"Concurrent, through the command server: {SENDERS} senders x {EACH} messages = {SENDERS * EACH} in "
            f"{elapsed:.1f} s "
            f"({SENDERS * EACH / elapsed:.2f} messages/s); delivered {delivered}, refused (exit 3) {refused}, "
            f"typed but not submitted (exit 4) {typed}, other {len(codes) - delivered - refused - typed}; "
            f"arrived at the model intact: {len(arrived)} of {delivered} delivered.",
            f"Load average at the end of the run: {os.getloadavg()[0]:.1f}.",
        ]
    )
    print(body)
    write_section("say", body)


_SENDER = """
import os, subprocess, sys
team, n, each = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(each):
    done = subprocess.run([*sys.argv[4:], "say", "--team", team, "dev",
                           f"sender {n} message {k} end"], capture_output=True, text=True)
    print(done.returncode, flush=True)
    if done.returncode:
        print(done.stdout + done.stderr, file=sys.stderr, flush=True)
"""


if __name__ == "__main__":
    main()
