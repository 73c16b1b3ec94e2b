"""``say`` latency into an idle real seat against the floor, and throughput with concurrent senders.

One real Claude Code 2.1.316 seat (inline renderer, 120x40) on a private tmux
server, answered by the stand-in model.  In the same run, interleaved:

* floor: one bare bracketed paste of the labelled message, then polling the
  screen until it shows (what any tool that types into a pane must at least
  do), then Enter (not timed) so the seat is idle for the next round;
* ``deliver``: ``say``'s engine in-process (lock, pane checks, two pastes,
  the box checks, Enter, seeing the box empty again);
* ``say`` CLI: ``python -m fabrikito say`` end to end, as a script runs it.

Then 8 senders at once, each sending several messages: messages per second,
and whether every message arrived once, intact.  Writes the "say" section of
docs/benchmarks.md.
"""

from __future__ import annotations

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

from bench.report import write_section  # noqa: E402

from fabrikito.base.errors import TmuxError  # noqa: E402
from fabrikito.base.tmux import Server  # noqa: E402
from fabrikito.delivery import say, seatpane  # noqa: E402
from fabrikito.offline import claude_setup, seatkit  # noqa: E402
from fabrikito.offline.standin import StandIn  # noqa: E402
from fabrikito.team import teamfile  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
SENDERS = 8
EACH = int(os.environ.get("BENCH_EACH", "3"))


def wait_idle(standin: StandIn, mark: int, needle: str) -> None:
    standin.wait_for_request("dev", needle, 60, since=mark)
    time.sleep(0.3)  # the stand-in answers at once; let the turn end and the box redraw


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
        times: dict[str, list[float]] = {"floor (paste + render)": [], "deliver (in-process)": [], "say CLI": []}
        try:
            for i in range(ROUNDS):
                text = f"[from live-test] floor round {i} please look"
                mark = standin.mark()
                t0 = time.perf_counter()
                server.paste(seat.pane, text)
                while "floor round " + str(i) not in server.capture(seat.pane):
                    time.sleep(0.005)
                times["floor (paste + render)"].append(time.perf_counter() - t0)
                server.send_keys(seat.pane, "Enter")
                wait_idle(standin, mark, f"floor round {i} ")

                mark = standin.mark()
                ctx = say.Context(team=team, server=server, panes=seatpane.list_panes(server))
                t0 = time.perf_counter()
                result = say.deliver(ctx, team.seats[0], "live-test", f"engine round {i} please look")
                times["deliver (in-process)"].append(time.perf_counter() - t0)
                assert result.result is say.Result.DELIVERED, result
                wait_idle(standin, mark, f"engine round {i} ")

                mark = standin.mark()
                t0 = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "fabrikito", "say", "--team", str(team_path), "dev", f"cli round {i} look"],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                times["say CLI"].append(time.perf_counter() - t0)
                assert done.returncode == 0, done.stderr
                wait_idle(standin, mark, f"cli round {i} ")

            mark = standin.mark()
            t0 = time.perf_counter()
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", _SENDER, str(team_path), str(n), str(EACH)],
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
            with contextlib.suppress(TmuxError):
                server.kill_server()
            seatkit.stop_pids(seatkit.home_pids(home))
    median = {name: statistics.median(v) * 1000 for name, v in times.items()}
    floor = median["floor (paste + render)"]
    rows = [
        f"| {name} | {median[name]:.0f} | {min(v) * 1000:.0f} | {median[name] / floor:.1f}x |"
        for name, v in times.items()
    ]
    body = "\n".join(
        [
            "## `say`: latency into an idle seat, and concurrent senders",
            "",
            f"`python bench/bench_say.py`: one real seat (inline, 120x40), {ROUNDS} interleaved rounds.",
            "",
            "| variant | median ms | min ms | ratio to floor |",
            "|---|---|---|---|",
            *rows,
            "",
            "The floor is one bare paste and waiting for it to show. `say` adds the second paste (the label "
            "goes in on its own), a screen read after each paste, the Enter and seeing the box empty again; "
            "the CLI adds an interpreter start and the team file. Traced with `say --verbose`, most of the "
            "engine's time is Claude Code's own work: about 30-50 ms to draw the label, 15 ms for the message, and "
            "60-200 ms from the Enter until the box is drawn empty again (the confirmation that the Enter landed).",
            "",
            f"Concurrent: {SENDERS} senders x {EACH} messages = {SENDERS * EACH} in {elapsed:.1f} s "
            f"({SENDERS * EACH / elapsed:.2f} messages/s); delivered {delivered}, refused {len(codes) - delivered}; "
            f"arrived at the model intact: {len(arrived)} of {delivered} delivered.",
        ]
    )
    print(body)
    write_section("say", body)


_SENDER = """
import os, subprocess, sys
team, n, each = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(each):
    done = subprocess.run([sys.executable, "-m", "fabrikito", "say", "--team", team, "dev",
                           f"sender {n} message {k} end"], capture_output=True)
    print(done.returncode, flush=True)
"""


if __name__ == "__main__":
    main()
