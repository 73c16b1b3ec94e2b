"""Send latency: fabrikito's inbox path against the message-claude skill's minimal recipe, same run.

A local AF_UNIX listener stands in for a session's inbox (no Claude Code
needed): it accepts, reads to EOF and counts.  Measured, interleaved round
by round so drift hits every variant alike:

* ``recipe``   the skill's python recipe, in-process: json.dumps both lines,
  connect, sendall, shutdown, close (no discovery, token given);
* ``library``  ``client.send`` in-process: registry discovery (one entry),
  liveness check, key-file token, payload build, post;
* ``recipe-cli`` the skill's recipe as ``python3 - SOCK TOKEN MSG`` (a fresh
  interpreter, as the skill runs it; socket and token given);
* ``find-recipe-cli`` the skill's recipe that finds its target by name in the
  registry and reads its peerToken (the one for a caller without the
  session's environment), run as a script: the like-for-like baseline of
  ``send --to NAME``;
* ``cli``      the installed ``fabrikito send --to NAME MSG`` end to end.

Run: ``.venv/bin/python bench/bench_send.py [--rounds N]``; writes the "send"
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import compileall
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
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.report import fabrikito_cli, write_section  # noqa: E402 -- after the path is set

from fabrikito.inbox import client, sessions  # noqa: E402

# BENCH_BEFORE=DIR: also time `send` from another copy of the package (DIR/src), in the same rounds.
BEFORE = os.environ.get("BENCH_BEFORE")

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

# The skill's recipe for a caller that finds its target on disk (message-claude,
# "The recipe that works from codex"), with the target's name from argv.
FIND_RECIPE = """\
import glob, hashlib, json, os, socket, sys

CLAUDE_DIR = os.path.expanduser(os.environ.get("CLAUDE_CONFIG_DIR", "~/.claude"))
SESSIONS = os.path.join(CLAUDE_DIR, "sessions")
TARGET_NAME, TEXT = sys.argv[1], sys.argv[2]

def live_sessions():
    for f in glob.glob(os.path.join(SESSIONS, "*.json")):
        try:
            with open(f) as src:
                d = json.load(src)
        except Exception:
            continue
        if d.get("messagingSocketPath"):
            yield d

def peer_token(d):
    sock = d["messagingSocketPath"]
    name = f"{d['pid']}.{hashlib.sha256(sock.encode()).hexdigest()}.key"
    try:
        with open(os.path.join(SESSIONS, name)) as src:
            return json.load(src)["peerToken"]
    except Exception:
        return None

def send(d, text):
    token = peer_token(d)
    if not token:
        raise RuntimeError("peerToken not found for target session")
    lines = [
        json.dumps({"type": "auth", "token": token}),
        json.dumps({"type": "user", "message": {"role": "user", "content": text}}),
    ]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(d["messagingSocketPath"])
    s.sendall(("\\n".join(lines) + "\\n").encode())
    s.shutdown(socket.SHUT_WR)
    s.close()

send(next(d for d in live_sessions() if d.get("name") == TARGET_NAME), TEXT)
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
        self.server.listen(1024)  # the in-process rounds connect faster than a starved accept thread takes them
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
    Path(sessions.key_path(cfg / "sessions", os.getpid(), sock)).write_text(
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
    find_script = tmp / "find_recipe.py"
    find_script.write_text(FIND_RECIPE)
    subprocess_variants: dict[str, list[str]] = {
        "recipe-cli": [sys.executable, "-", sock, token, msg],
        "find-recipe-cli": [sys.executable, str(find_script), "bench-seat", msg],
        "cli": [*fabrikito_cli(), "send", "--to", "bench-seat", msg],
    }
    envs = {name: sub_env for name in subprocess_variants}
    if BEFORE:  # the same command from the code before, in the same rounds
        compileall.compile_dir(str(Path(BEFORE) / "src"), quiet=1)
        subprocess_variants["cli-before"] = subprocess_variants["cli"]
        envs["cli-before"] = {**sub_env, "PYTHONPATH": str(Path(BEFORE) / "src")}
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
                env=envs[name],
                check=True,
                cwd=tmp,
                stdout=subprocess.DEVNULL,
            )
            times[name].append(time.perf_counter() - t0)
    deadline = time.monotonic() + 5
    expected = sum(len(v) for v in times.values()) + 10 * len(variants)
    while sink.count < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    base = {"recipe": "recipe", "library": "recipe", "recipe-cli": "recipe-cli"}
    base |= {"find-recipe-cli": "find-recipe-cli", "cli": "find-recipe-cli", "cli-before": "find-recipe-cli"}
    rows = []
    for name, vals in times.items():
        p90 = sorted(vals)[int(len(vals) * 0.9) - 1] * 1000
        rows.append(
            f"| {name} | {len(vals)} | {med[name]:.3f} | {p90:.3f} | "
            f"{med[name] / med[base[name]]:.2f}x of {base[name]} |"
        )
    ratio = med["cli"] / med["find-recipe-cli"]
    fastest = min(times["cli"]) / min(times["find-recipe-cli"])
    print("\n".join(rows))
    print(f"received {sink.count} of {expected} connections; ratio {ratio:.2f}x; load {os.getloadavg()[0]:.1f}")
    body = "\n".join(
        [
            "## `fabrikito send` against the message-claude recipes",
            "",
            "`python bench/bench_send.py`: a local AF_UNIX listener stands in for a session's inbox (accept, read "
            "to EOF); every variant runs in the same run, interleaved round by round. `recipe` is the skill's "
            "minimal python recipe in-process (socket and token given); `library` is `inbox.client.send` "
            "in-process (registry discovery over one entry, pid + procStart liveness, key-file token, payload "
            "checks, post); `recipe-cli` is the minimal recipe as `python3 - SOCK TOKEN MSG`; "
            "`find-recipe-cli` is the skill's recipe that finds its target by name in the registry and reads its "
            "peerToken, run as a script (the like-for-like baseline of `send --to NAME`); `cli` is the installed "
            "`fabrikito send --to NAME MSG`"
            + (f"; `cli-before` is the same command from the code in `{BEFORE}`." if BEFORE else "."),
            "",
            "| variant | n | median ms | p90 ms | ratio |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"`send` CLI / the finding recipe as a script: **{ratio:.2f}x** (goal: 1.3x; "
            f"{'met' if ratio <= 1.3 else 'not met'}; fastest run against fastest run: {fastest:.2f}x); "
            "against the minimal recipe (no lookup at all) "
            f"{med['cli'] / med['recipe-cli']:.2f}x. All {sink.count} of {expected} connections arrived. "
            "Both recipes import `json`, `socket` (and `hashlib`, `glob` with `re`); the CLI adds its own modules, "
            "the registry and liveness checks and the record of the last send (for the repeat warning); not "
            "`pathlib` (string paths on this path: tests/unit/test_startup.py), not argparse (a plain command "
            "line is read by `fabrikito.fastargs`), and outside a team (none here) not the team file, the message "
            "log or who is speaking beyond `TEAM_ROLE`.",
            f"Load average at the end of the run: {os.getloadavg()[0]:.1f}.",
        ]
    )
    write_section("send", body)
    return 0 if sink.count == expected else 1


if __name__ == "__main__":
    sys.exit(main())
