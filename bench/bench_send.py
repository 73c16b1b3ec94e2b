"""Send latency: fabrikito's inbox path against the message-claude skill's minimal recipe, same run.

A local AF_UNIX listener stands in for a session's inbox (no Claude Code
needed): it accepts, reads to EOF and counts.  Measured, interleaved round
by round so drift hits every variant alike:

* ``recipe``   the skill's python recipe, in-process: json.dumps both lines,
  connect, sendall, shutdown, close (no discovery, token given);
* ``library``  ``client.send`` in-process: registry discovery (one entry),
  liveness check, key-file token, payload build, post;
* ``recipe-cli`` the skill's recipe as ``python3 - SOCK TOKEN MSG`` (a fresh
  interpreter, as the skill runs it);
* ``cli``      ``python -m fabrikito send --to NAME MSG`` end to end.

Run: ``.venv/bin/python bench/bench_send.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from fabrikito.inbox import client, sessions  # noqa: E402

RECIPE = """\
import json, socket, sys
sock, token, msg = sys.argv[1], sys.argv[2], sys.argv[3]
payload = ""
if token:
    payload += json.dumps({"type": "auth", "token": token}) + "\\n"
payload += json.dumps({"type": "user", "message": {"role": "user", "content": msg}}) + "\\n"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
s.sendall(payload.encode())
s.shutdown(socket.SHUT_WR)
s.close()
"""


def recipe_inline(sock: str, token: str, msg: str) -> None:
    payload = ""
    if token:
        payload += json.dumps({"type": "auth", "token": token}) + "\n"
    payload += json.dumps({"type": "user", "message": {"role": "user", "content": msg}}) + "\n"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(payload.encode())
    s.shutdown(socket.SHUT_WR)
    s.close()


def library(msg: str, env: dict[str, str]) -> None:
    client.send("bench-seat", msg, env=env)


class Sink:
    def __init__(self, path: str) -> None:
        self.count = 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(64)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                while conn.recv(1 << 16):
                    pass
            self.count += 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200, help="in-process rounds (subprocess ones: rounds / 10)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-send-"))
    sock = str(tmp / "client.sock")
    sink = Sink(sock)
    cfg = tmp / "claude"
    (cfg / "sessions").mkdir(parents=True)
    start = Path(f"/proc/{os.getpid()}/stat").read_text().rpartition(")")[2].split()[19]
    entry = {
        "pid": os.getpid(),
        "procStart": start,
        "name": "bench-seat",
        "cwd": str(tmp),
        "status": "idle",
        "messagingSocketPath": sock,
    }
    domain = sessions.own_pid_domain()
    if domain:
        entry["pidDomain"] = domain
    (cfg / "sessions" / f"{os.getpid()}.json").write_text(json.dumps(entry))
    token = "ab" * 16
    sessions.key_path(cfg / "sessions", os.getpid(), sock).write_text(
        json.dumps({"peerToken": token, "procStart": start})
    )
    env = {"CLAUDE_CONFIG_DIR": str(cfg), "HOME": str(tmp)}
    msg = 'bench: build 41 is green; "quoted" and\na second line ✓'
    sub_env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "src")}
    # The CLI's target is this process's registry entry (alive while the bench runs).

    variants: dict[str, Callable[[], None]] = {
        "recipe": lambda: recipe_inline(sock, token, msg),
        "library": lambda: library(msg, env),
    }
    subprocess_variants: dict[str, list[str]] = {
        "recipe-cli": [sys.executable, "-", sock, token, msg],
        "cli": [sys.executable, "-m", "fabrikito", "send", "--to", "bench-seat", msg],
    }
    times: dict[str, list[float]] = {k: [] for k in [*variants, *subprocess_variants]}
    for _ in range(10):  # warm-up
        for fn in variants.values():
            fn()
    for _ in range(args.rounds):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    for _ in range(max(5, args.rounds // 10)):
        for name, argv in subprocess_variants.items():
            t0 = time.perf_counter()
            subprocess.run(
                argv,
                input=RECIPE if name == "recipe-cli" else None,
                text=True,
                env=sub_env,
                check=True,
                cwd=tmp,
                stdout=subprocess.DEVNULL,
            )
            times[name].append(time.perf_counter() - t0)
    deadline = time.monotonic() + 5
    expected = sum(len(v) for v in times.values()) + 10 * len(variants)
    while sink.count < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    print(f"{'variant':<12} {'n':>5} {'median ms':>10} {'p90 ms':>8}  ratio to its recipe")
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    base = {"recipe": "recipe", "library": "recipe", "recipe-cli": "recipe-cli", "cli": "recipe-cli"}
    for name, vals in times.items():
        p90 = sorted(vals)[int(len(vals) * 0.9) - 1] * 1000
        ratio = med[name] / med[base[name]]
        print(f"{name:<12} {len(vals):>5} {med[name]:>10.3f} {p90:>8.3f}  {ratio:.2f}x")
    print(f"received {sink.count} of {expected} connections")
    return 0 if sink.count == expected else 1


if __name__ == "__main__":
    sys.exit(main())
