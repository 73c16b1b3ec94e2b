"""The host system's calls: the portable implementation (what a Mac runs) against the Linux one, same run.

Each call of :mod:`fabrikito.base.hostos` is timed in both implementations,
on this machine, interleaved round by round so drift hits both alike, on the
processes ``say`` and ``status`` read: this process, and a child leading a
session of its own on a terminal (as a pane's shell does).  Then the two
things a command pays once: a fresh interpreter reading one process (the
portable one imports psutil), and what ``say`` reads of a pane's processes to
find its agent (``delivery.seatpane.foreground_agent``'s calls), end to end.

The ratio is portable / Linux: what a Mac pays per call, measured where both
run, in the same units (on a Mac psutil reads the kernel's tables, not
``/proc``, so its own cost there is not measured here).

Run: ``.venv/bin/python bench/bench_hostos.py [--rounds N]``; writes the
"hostos" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import pty
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.report import write_section  # noqa: E402 -- after the path is set

from fabrikito.base.hostos import kinds, linux, portable  # noqa: E402

Impl = ModuleType  # linux or portable: the same functions


def _terminal_child() -> tuple[int, int]:
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execvp("sleep", ["sleep", "600"])  # noqa: S606 (a program, no shell)
        finally:
            os._exit(127)
    for _ in range(500):
        if linux.exe_name(pid) == "sleep":
            break
        time.sleep(0.01)
    return pid, master


def _walk(impl: Impl, root: int) -> int:
    """What ``say`` reads to find a pane's agent: the pane's process, its foreground group, and for each
    process in its tree its children, program, argv."""
    top = impl.info(root)
    foreground = impl.foreground_group(top)
    seen = 0
    queue = [root]
    while queue:
        pid = queue.pop(0)
        try:
            group = top.pgrp if pid == root else impl.info(pid).pgrp
            if group == foreground:
                impl.exe_name(pid)
                impl.cmdline(pid)
                impl.exe_path(pid)
            queue.extend(impl.children_of(pid))
        except (kinds.ProcessGone, kinds.ProcessUnreadable):
            continue
        seen += 1
    return seen


def calls(child: int, listener: str, conn: socket.socket) -> dict[str, Callable[[Impl], object]]:
    me = os.getpid()
    child_info = linux.info(child)

    def lock(impl: Impl) -> None:
        os.close(impl.lock_file("fabrikito-bench"))

    return {
        "info": lambda impl: impl.info(child),
        "stat": lambda impl: impl.stat(child),
        "parent": lambda impl: impl.parent(child),
        "alive": lambda impl: impl.alive(child),
        "exe_path": lambda impl: impl.exe_path(child),
        "cmdline": lambda impl: impl.cmdline(child),
        "environ": lambda impl: impl.environ(me),
        "cwd": lambda impl: impl.cwd(child),
        "children_of": lambda impl: impl.children_of(me),
        "pids": lambda impl: impl.pids(),
        "peer_cred": lambda impl: impl.peer_cred(conn),
        "lock_file": lock,
        "socket_owner (candidate)": lambda impl: impl.socket_owner(listener, [me], deadline=time.monotonic() + 5),
        "foreground_group": lambda impl: impl.foreground_group(replace_tty(child_info, impl)),
        "say's walk of a pane": lambda impl: _walk(impl, child),
    }


def replace_tty(info: kinds.ProcInfo, impl: Impl) -> kinds.ProcInfo:
    """The process as ``impl.info`` gives it (the portable one does not read the terminal's group)."""
    return info if impl is linux else impl.info(info.pid)


def fresh_interpreter(portable_on: bool, rounds: int) -> list[float]:
    code = "import os; from fabrikito.base import hostos; hostos.info(os.getpid()); hostos.cmdline(os.getpid())"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT / "src")}
    env["FABRIKITO_PORTABLE"] = "1" if portable_on else "0"
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        out.append(time.perf_counter() - start)
    return out


READING = """\
Read: the portable implementation is **not** as cheap as the Linux one here. A call that psutil answers costs
2-9x the direct `/proc` read (psutil's own checks and objects over the same files); two cost far more:
`children_of` (psutil finds children by reading every process's parent: {children:.0f}x here, a read of every
`/proc/<pid>/stat`; on a Mac psutil reads the whole table in one `sysctl`) and `foreground_group` (neither psutil
nor `tcgetpgrp` tells another terminal's foreground group, so it runs `ps -o tpgid`: {fg:.1f} ms). Together `say`'s
walk of a pane costs {walk_p:.1f} ms against {walk_l:.2f} ms, and the first call pays psutil's import,
{start:.0f} ms more for a fresh interpreter. On Linux fabrikito runs the Linux implementation, so none of this
reaches a Linux user; a Mac pays it on each `say` and `status` (docs/decisions/0025-host-system-calls.md: what
would remove it).
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    child, master = _terminal_child()
    where = tempfile.mkdtemp(prefix="fabrikito-bench-hostos-")
    path = os.path.join(where, "l.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    conn, _ = server.accept()
    try:
        table = calls(child, path, conn)
        times: dict[tuple[str, str], list[float]] = {}
        for name, call in table.items():
            for impl in (linux, portable):
                call(impl)  # warm: psutil imported, caches filled
            rounds = args.rounds if name not in ("pids", "say's walk of a pane", "foreground_group") else 30
            for _ in range(rounds):
                for impl in (linux, portable):
                    start = time.perf_counter()
                    call(impl)
                    times.setdefault((name, impl.NAME), []).append(time.perf_counter() - start)
        starts: dict[bool, list[float]] = {flag: [] for flag in (False, True)}
        for _ in range(args.starts):
            for flag in (False, True):
                starts[flag] += fresh_interpreter(flag, 1)
    finally:
        for sock in (conn, client, server):
            sock.close()
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(master)
        os.unlink(path)
        os.rmdir(where)

    def med(name: str, impl: str) -> float:
        return statistics.median(times[(name, impl)]) * 1e6

    def ratio(name: str) -> float:
        return med(name, "portable") / med(name, "linux")

    rows = ["| call | Linux median µs | portable median µs | portable / Linux |", "|---|---|---|---|"]
    for name in table:
        lin = statistics.median(times[(name, "linux")]) * 1e6
        por = statistics.median(times[(name, "portable")]) * 1e6
        rows.append(f"| {name} | {lin:.1f} | {por:.1f} | {por / lin:.2f}x |")
    lin_start = statistics.median(starts[False]) * 1e3
    por_start = statistics.median(starts[True]) * 1e3
    rows.append(
        f"| a fresh interpreter reading one process (ms) | {lin_start:.1f} ms | {por_start:.1f} ms | "
        f"{por_start / lin_start:.2f}x |"
    )
    body = (
        "## The host system's calls: the portable implementation against the Linux one\n\n"
        "`python bench/bench_hostos.py`: each call of `fabrikito.base.hostos` in its Linux implementation "
        "(`/proc`, `SO_PEERCRED`, `memfd_create`) and its portable one (psutil, `LOCAL_PEERCRED` and "
        "`LOCAL_PEERPID` as a Mac lays them out, an unlinked 0600 file, `ps -o tpgid`: what a Mac runs), "
        "interleaved round by round on this machine; the processes read are a child leading a session on a "
        f"terminal (as a pane's shell does) and this one. {args.rounds} rounds a call (30 for the whole process "
        f"table, the terminal's group and say's walk), {args.starts} fresh interpreters each.\n\n"
        + "\n".join(rows)
        + "\n\n"
        + READING.format(
            start=por_start - lin_start,
            children=ratio("children_of"),
            fg=med("foreground_group", "portable") / 1e3,
            walk_p=med("say's walk of a pane", "portable") / 1e3,
            walk_l=med("say's walk of a pane", "linux") / 1e3,
        )
    )
    print(body)
    write_section("hostos", body)


if __name__ == "__main__":
    main()
