"""What ``status`` and the delivery worker's round cost at 12, 25, 50 and 100 seats, on replayed panes.

Real Claude Code seats take about 200 MB and a start-up's CPU each (50 of
them brought up together took 48 s of this 2-CPU machine: ``bench_up.py``),
and what is measured here is fabrikito's part, so each seat here is a tmux pane
that shows a screen recorded from Claude Code 2.1.316
(``tests/fixtures/screens/2.1.316``, cycling through busy, a draft in the
box, a permission prompt and a dialog; each with its seat's session name in
its banner, so no two seats show the same screen, as no two real seats do)
and then runs a process named ``claude`` with a session registry entry, as
the unit tier's replay does: status and the worker read tmux, ``/proc``, the
registry and the screens exactly as they do for real seats.  Real seats are measured by ``bench_status.py`` (12).

Per seat count, the median of ``BENCH_RUNS`` interleaved rounds:

* ``fabrikito status`` in its own process (``FABRIKITO_SERVER=0``), and
  handed to the team's command server as ``up`` leaves it, each against a
  bare ``python -c pass`` started the same way; the tmux processes it
  started (a logging ``tmux`` shim first on ``PATH``) and its peak RSS;
* ``status.collect`` in-process: CPU time (user + system) per call, every
  screen read afresh (as a command run once reads them);
* a delivery worker round with a message queued for every seat, in-process:
  CPU of the first round and the median of the rounds after it (each seat's
  box is refused or held, so nothing is typed, and the screens do not change:
  a later round reads each from the last one's reading, ``screen/readings.py``);
* a watcher round (``watch/watcher.py``), in-process: CPU of the first round
  and the median of the rounds after it (screens unchanged, as between most
  rounds of a team at work);
* the resident memory (``VmRSS``, and its peak ``VmHWM``) of the delivery
  worker, the command server and the watcher, each a process of its own as
  ``up`` starts them, and of an inbox server (``up`` starts one per seat
  that is not Claude Code; here for the first seat) after it took
  ``INBOX_MESSAGES`` messages by ``fabrikito send``.

Writes the "seats" section of docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.report import fabrikito_cli, write_section  # noqa: E402

from fabrikito.base.tmux import Server  # noqa: E402
from fabrikito.cli import serverctl  # noqa: E402
from fabrikito.delivery import worker, workerstate  # noqa: E402
from fabrikito.inbox import inboxfiles  # noqa: E402
from fabrikito.inbox import server as inbox_server  # noqa: E402
from fabrikito.launch import status, watcherproc  # noqa: E402
from fabrikito.screen import PaneSnapshot, readings, recogniser_for  # noqa: E402
from fabrikito.team import teamfile  # noqa: E402
from fabrikito.watch.watcher import Watcher  # noqa: E402

COUNTS = [int(c) for c in os.environ.get("BENCH_COUNTS", "12,25,50,100").split(",")]
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
INBOX_MESSAGES = 5
SCREENS = ROOT / "tests" / "fixtures" / "screens" / "2.1.316"
#: Screens whose box refuses a message (busy, a draft, a permission prompt, a dialog): the queued messages
#: stay queued, so a round looks at every seat and types into none of the replayed panes.
SHOWN = [
    "inline-120x40-busy",
    "inline-120x40-typed-short-unsubmitted",
    "inline-120x40-permission-prompt-bash",
    "inline-120x40-bypass-dialog",
]
SEAT = r"""cat "$1"; mkdir -p "$CLAUDE_CONFIG_DIR/sessions"
printf '{"pid": %d, "version": "2.1.316", "sessionId": "s%d"}' $$ $$ > "$CLAUDE_CONFIG_DIR/sessions/$$.json"
exec -a claude sleep 3600"""
SHIM = """#!/bin/sh
echo "$*" >> "$TMUX_CALLS"
exec {tmux} "$@"
"""


def screens() -> list[Path]:
    found = []
    for stem in SHOWN:
        if (SCREENS / f"{stem}.ansi").exists():
            found.append(SCREENS / f"{stem}.ansi")
    return found


def team_of(base: Path, socket: str, count: int) -> Path:
    path = base / f"team{count}" / "team.toml"
    path.parent.mkdir(parents=True)
    seats = "".join(f'\n[[seat]]\nrole = "s{i:03d}"\nsession = "b{count}-s{i:03d}"\n' for i in range(count))
    path.write_text(f'name = "b{count}"\ntmux_socket = "{socket}"\n{seats}')
    return path


def own_screen(recorded: Path, session: str, folder: Path) -> Path:
    """``recorded`` as this seat shows it: its own session name where the recording shows its folder's
    name (else on its first, empty row), so no two seats show the same screen, as no two real seats do
    (a reading kept for one screen is not another seat's).  Read as the recording is read, or it stops."""
    text = recorded.read_text(encoding="utf-8")
    own = text.replace("seat-a", session, 1) if "seat-a" in text else session + text
    meta = json.loads(recorded.with_suffix(".json").read_text(encoding="utf-8"))

    def reading(ansi: str) -> tuple[object, ...]:
        snap = PaneSnapshot(ansi, 120, 40, False, False, int(meta["cursor_x"]), int(meta["cursor_y"]))
        found = recogniser_for("claude", "2.1.316").recognise(snap)
        return found.state, found.busy, found.box_text

    assert reading(own) == reading(text), f"{recorded.name} with {session} in it is read otherwise"
    path = folder / f"{session}-{recorded.name}"
    path.write_text(own, encoding="utf-8")
    return path


def start_panes(server: Server, team: teamfile.Team, config: Path, shown: list[Path]) -> None:
    folder = config.parent / "screens"
    folder.mkdir(exist_ok=True)
    for i, seat in enumerate(team.seats):
        screen = own_screen(shown[i % len(shown)], seat.session, folder)
        server.run(
            "new-session", "-d", "-s", seat.session, "-x", "120", "-y", "40", "-e", f"CLAUDE_CONFIG_DIR={config}",
            "--", "bash", "-c", SEAT, "seat", str(screen),
        )  # fmt: skip


def run_status(cli: list[str], team: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall time and peak RSS (KiB) of one ``fabrikito status``."""
    started = time.perf_counter()
    proc = subprocess.Popen([*cli, "status", "--team", str(team)], env=env, stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss


def tmux_calls(cli: list[str], team: Path, env: dict[str, str], shim: Path) -> int:
    """The tmux processes one ``fabrikito status`` starts (a logging shim first on ``PATH``; not timed)."""
    calls = Path(env["TMUX_CALLS"])
    calls.write_text("")
    subprocess.run([*cli, "status", "--team", str(team)], env={**env, "PATH": f"{shim}:{env['PATH']}"},
                   stdout=subprocess.DEVNULL, check=False)  # fmt: skip
    return len(calls.read_text().splitlines())


def bare(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - started


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def collect_cpus(team: teamfile.Team) -> tuple[float, float]:
    """CPU of one ``status.collect`` that reads every screen afresh (as a command run once does), and of
    one right after it (every screen's reading kept: a command server's child whose screens its warm-up read)."""
    readings.forget()
    spent = []
    for _ in range(2):
        before = cpu()
        status.collect(team)
        spent.append(cpu() - before)
    return spent[0], spent[1]


def worker_round_cpus(team: teamfile.Team) -> tuple[float, float]:
    """CPU of a worker's first round (every screen read afresh), and the median of the rounds after it
    (screens unchanged: each read from the last round's reading), in-process."""
    readings.forget()
    w = worker.Worker(team, worker.TmuxSeats(team), recovering=False)
    spent = []
    for _ in range(RUNS + 1):
        before = cpu()
        w.round()
        spent.append(cpu() - before)
    return spent[0], statistics.median(spent[1:])


def watcher_round_cpus(team: teamfile.Team) -> tuple[float, float]:
    """CPU of a watcher's first round, and the median of the rounds after it (in-process)."""
    readings.forget()
    watcher = Watcher(team)
    spent = []
    for _ in range(RUNS + 1):
        before = cpu()
        watcher.round()
        spent.append(cpu() - before)
    watcher.notifier.close()
    return spent[0], statistics.median(spent[1:])


def rss_mb(pid: int | None) -> str:
    """``VmRSS`` (peak ``VmHWM``) of a process, in MB; ``-`` when it is not there."""
    if pid is None:
        return "-"
    try:
        rows = dict(row.split(":", 1) for row in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in row)
    except OSError:
        return "-"
    now, peak = (int(rows[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
    return f"{now:.0f} ({peak:.0f})"


def queue_one_each(cli: list[str], team: Path, env: dict[str, str]) -> int:
    queued = 0
    for seat in teamfile.load(team).seats:
        done = subprocess.run(
            [*cli, "say", "--team", str(team), "--queue", seat.role, "a message queued for the bench"],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        queued += done.returncode == 0
        if done.returncode != 0 and not queued:
            print(f"say --queue {seat.role}: exit {done.returncode}: {done.stderr.strip()}", flush=True)
    return queued


def inbox_rss(cli: list[str], team: teamfile.Team, env: dict[str, str], config: Path) -> str:
    """An inbox server for the team's first seat, as ``up`` starts one for a seat that is not Claude Code,
    registered where the seats' Claude Code looks: its RSS (peak) once it took :data:`INBOX_MESSAGES`
    messages by ``fabrikito send`` (queued for the worker, as every message it takes)."""
    seat = team.seats[0]
    inbox_env = {**env, "CLAUDE_CONFIG_DIR": str(config)}
    inbox_server.start_inbox(team, seat, env=inbox_env)
    try:
        for i in range(INBOX_MESSAGES):
            done = subprocess.run(
                [*cli, "send", "--team", str(team.path), "--to", seat.session, f"a message to the inbox {i}"],
                env=inbox_env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0 and i == 0:
                print(f"send --to {seat.session}: exit {done.returncode}: {done.stderr.strip()}", flush=True)
        time.sleep(0.5)
        return rss_mb(inboxfiles.read_info(inboxfiles.places(team, seat.role)).pid)
    finally:
        inbox_server.stop_inbox(team, seat)


def main() -> None:
    cli = fabrikito_cli()
    tmux = shutil.which("tmux") or "tmux"
    socket = f"fab-bench-{secrets.token_hex(4)}"
    server = Server(socket_name=socket, timeout=20.0)
    shown = screens()
    rows = []
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        base = Path(tmp)
        (base / "bin").mkdir()
        (base / "bin" / "tmux").write_text(SHIM.format(tmux=tmux))
        (base / "bin" / "tmux").chmod(0o755)
        config = base / "claude-config"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(base),
            "LANG": "C.UTF-8",
            "FABRIKITO_SERVER": "0",
            "TMUX_CALLS": str(base / "calls"),
        }
        try:
            server.run("new-session", "-d", "-s", "_keep", "--", "sleep", "3600")
            for count in COUNTS:
                path = team_of(base, socket, count)
                team = teamfile.load(path)
                start_panes(server, team, config, shown)
                time.sleep(1.0)
                walls, bares, cpus, warm_cpus = [], [], [], []
                calls = tmux_calls(cli, path, env, base / "bin")
                rss = 0
                for _ in range(RUNS):
                    took, rss_now = run_status(cli, path, env)
                    walls.append(took)
                    rss = max(rss, rss_now)
                    bares.append(bare(env))
                    cold, warm = collect_cpus(team)
                    cpus.append(cold)
                    warm_cpus.append(warm)
                queued = queue_one_each(cli, path, env)
                worker.stop(team)  # its background worker: the rounds are timed here, alone
                first_round, worker_round = worker_round_cpus(team)
                first_watch, watch_round = watcher_round_cpus(team)
                served_env = {k: v for k, v in env.items() if k != "FABRIKITO_SERVER"}
                serverctl.ensure_running(team, env=served_env)  # as up leaves it: status handed to it
                time.sleep(0.5)  # its first reading (cli/server.py: warm)
                served_calls = tmux_calls(cli, path, served_env, base / "bin")  # its child's own tmux processes
                served = []
                for _ in range(RUNS):
                    served.append(run_status(cli, path, served_env)[0])
                    bares.append(bare(env))
                queue_one_each(cli, path, served_env)  # the worker again, a process of its own
                watcherproc.ensure_running(team, env=served_env)
                time.sleep(3.0)  # a few of the worker's and the watcher's rounds
                helpers = (
                    f"{rss_mb(workerstate.read_info(team).pid)} | {rss_mb(serverctl.running_pid(path))} | "
                    f"{rss_mb(watcherproc.info(team).pid)} | {inbox_rss(cli, team, served_env, config)}"
                )
                watcherproc.stop(team)
                serverctl.stop(team)
                wall, floor = statistics.median(walls), statistics.median(bares)
                by_server = statistics.median(served)
                row = (
                    f"| {count} | {wall * 1000:.0f} ms | {wall / floor:.2f}x | {by_server * 1000:.0f} ms | "
                    f"**{by_server / floor:.2f}x** | {calls} / {served_calls} | {rss / 1024:.0f} MB | "
                    f"{statistics.median(cpus) * 1000:.1f} ms ({statistics.median(warm_cpus) * 1000:.1f}) | "
                    f"{worker_round * 1000:.1f} ms "
                    f"(first {first_round * 1000:.1f}; {queued} queued) | "
                    f"{watch_round * 1000:.1f} ms (first {first_watch * 1000:.1f}) | {helpers} |"
                )
                rows.append(row)
                print(row, flush=True)
                worker.stop(team)  # the one say --queue started: it must not run into the next count's rounds
                for seat in team.seats:
                    server.run("kill-session", "-t", f"={seat.session}")
        finally:
            subprocess.run([tmux, "-L", socket, "kill-server"], check=False, capture_output=True)
    load = os.getloadavg()[0]
    names = ", ".join(p.stem for p in shown)
    body = (
        "## Seat counts (issue 26): bench/bench_seats.py\n\n"
        "Replayed panes, not real seats: a real Claude Code seat takes about 200 MB and a start-up's CPU "
        "(`up` of 50 real ones: the up-50 section), and what is measured here is fabrikito's part. Each pane "
        "shows a screen recorded "
        f"from Claude Code 2.1.316 ({names}, in turn, each with its seat's session name in its banner, so no "
        "two seats show the same screen) and runs a process named `claude` with a session registry entry, so "
        "`status` and the worker read tmux, /proc, the registry and the screens as they do for real "
        f"seats. Median of {RUNS} interleaved rounds; load average at the end {load:.1f}.\n\n"
        "| seats | `status` (own process) | / bare start | `status` (served) | / bare start | "
        "tmux processes: own / served | peak RSS (own process) | `status.collect` CPU: screens read afresh "
        "(each reading kept) | worker round CPU (first) | watcher round CPU (first) | "
        "RSS MB (peak): worker | command server | watcher | inbox server |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "Goals (issue 26): `status` <= 2 tmux calls and <= 3x a bare start at 50 seats; a worker round under "
        "50 ms of CPU at 50 seats; each helper under 50 MB (the inbox server after it took "
        f"{INBOX_MESSAGES} messages by `fabrikito send`). `up` at 12/25/50 seats: bench_up.py (real seats, and "
        "BENCH_REPLAY=1 for replayed ones). A served `status` starts with the readings of the command server's "
        "last reading of the team (at its start and at each check, every 10 s: docs/decisions/0042); the "
        "screens here do not change, so it pays what the `status.collect` column shows in brackets, and a "
        "screen changed since that reading costs it the difference.\n"
    )
    write_section("seats", body)


if __name__ == "__main__":
    main()
