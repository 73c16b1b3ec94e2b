"""What the command server's unit tests share: a team on a private tmux server, fabrikito run as a user runs it.

The team (``acme``: ``em``, ``sec``, ``qa``) has ``sleep`` in two of its sessions, so
both seats show as "not an agent" and a ``say`` to one is refused before anything is
typed (and logged); the third is down.  Commands run as real processes in an
environment built from the allow-list (tests/userenv.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests import userenv

SRC = Path(__file__).resolve().parents[2] / "src"


def write_team(folder: Path, socket_name: str) -> Path:
    path = folder / "team.toml"
    seats = "".join(f'\n[[seat]]\nrole = "{r}"\nsession = "acme-{r}"\n' for r in ("em", "sec", "qa"))
    path.write_text(f'name = "acme"\ntmux_socket = "{socket_name}"\n{seats}', encoding="utf-8")
    return path


def environ(**extra: str) -> dict[str, str]:
    """A user's environment (tests/userenv.py), fabrikito's source on ``PYTHONPATH``, and ``extra``."""
    return userenv.user_env({"PYTHONPATH": str(SRC)}, **extra)


def fabrikito(argv: list[str], cwd: Path, stdin: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ(**extra),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def here(argv: list[str], cwd: Path, stdin: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    """The command run in its own process, the server not asked."""
    return fabrikito(argv, cwd, stdin, FABRIKITO_SERVER="0", **extra)


def callers(log: Path) -> list[tuple[int, int]]:
    """``(parent, grandparent)`` of each tmux call logged since the last look; a call whose caller had exited
    before the shim looked (its grandparent logged as ``?``, or the call handed to init, pid 1, whose parent
    is 0) cannot be placed and is left out."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [(int(a), int(b)) for a, b in (line.split() for line in lines) if b != "?" and a != "1"]


def same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> bool:
    return (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def wait_until(done: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.01)
