"""A control client connecting while a person detaches, on each tmux release: does tmux survive?

The measurement behind ``tmuxcontrol.may_connect`` (docs/decisions/0026-tmux-releases.md).  Each round: a
private tmux server with a seat-like session, a person attached (``tmux -C attach``), then at once the
person leaves, a session is created and killed, and fabrikito's control client connects.  Counts the
rounds after which the tmux server no longer answers.  ``BENCH_RUNS`` rounds per release (default 15).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests import tmuxreleases  # noqa: E402

from fabrikito.base import tmuxcontrol  # noqa: E402 -- after the path is set
from fabrikito.base.errors import TmuxError  # noqa: E402
from fabrikito.base.tmux import Server  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "15"))


def one_round() -> tuple[bool, bool]:
    """(tmux still answers, the client connected) after one round."""
    server = Server(socket_name=f"fab-bench-{secrets.token_hex(4)}")
    server.new_session("acme-em", ["sleep", "300"], cwd="/")
    person = subprocess.Popen(
        ["tmux", *server.server_flags, "-C", "attach", "-t", "acme-em"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    while not server.run("list-clients", "-F", "#{client_pid}").strip():
        time.sleep(0.01)
    got: list[tmuxcontrol.Control | None] = []
    connecting = threading.Thread(target=lambda: got.append(tmuxcontrol.Control(server)))
    connecting.start()
    person.kill()
    try:
        server.run("new-session", "-d", "-s", "acme-x", "sleep 5")
        server.run("kill-session", "-t", "=acme-x")
    except TmuxError:
        pass
    connecting.join()
    control = got[0]
    attached = control is not None and control.attach()
    person.wait()
    time.sleep(0.2)
    alive = server.alive()
    if control is not None:
        control.close()
    try:
        server.kill_server()
    except TmuxError:
        pass
    return alive, attached


def main() -> int:
    base = os.environ["PATH"]
    for release in tmuxreleases.RELEASES:
        tmuxreleases.ensure(release)
        os.environ["PATH"] = tmuxreleases.path_with(release, base)
        crashed = connected = 0
        for _ in range(RUNS):
            alive, attached = one_round()
            crashed += not alive
            connected += attached
        print(f"tmux {release}: tmux crashed in {crashed} of {RUNS} rounds; the client attached in {connected}")
    os.environ["PATH"] = base
    return 0


if __name__ == "__main__":
    sys.exit(main())
