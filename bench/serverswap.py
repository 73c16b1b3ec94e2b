"""The team's command server of this code or of the code before, one at a time, for a bench's rounds.

A command asks the command server its own copy of fabrikito started (the
request names its package, and the wire changed with issue 21: an asker of
one copy is declined by a server of the other).  So a bench that times the
code before in the same run as this one swaps servers between the two:
:func:`use` ends whichever runs and starts the wanted one (each copy with its
own ``serverctl``/``commandserver`` module, run by ``python -c``), then waits
for its tmux control-mode client, so every timed command finds the server it
would find after ``up``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

# Each copy's own start and stop: this code's cli.serverctl, or the code before's launch.commandserver.
_NOW = "from fabrikito.cli import serverctl as s"
_BEFORE = "from fabrikito.launch import commandserver as s"
_DO = "; from fabrikito.team import teamfile; t = teamfile.load(sys.argv[1]); "


def _run(before: bool, src: Path, team: Path, action: str, env: dict[str, str]) -> None:
    code = "import sys; " + (_BEFORE if before else _NOW) + _DO + action
    subprocess.run(
        [sys.executable, "-c", code, str(team)], env={**env, "PYTHONPATH": str(src)}, check=True, capture_output=True
    )


def use(
    team: Path, *, before: bool, now_src: Path, before_src: Path | None, env: dict[str, str], tmux_flags: list[str]
) -> None:
    """Leave the server of ``before`` (the code before) or of this code running for ``team``, alone."""
    for copy, src in ((False, now_src), (True, before_src)):
        if src is not None:
            _run(copy, src, team, "s.stop(t)", env)
    _wait_for_clients(tmux_flags, attached=False)  # the one it stopped has gone: the next may connect its own
    src = before_src if before else now_src
    assert src is not None
    _run(before, src, team, "s.ensure_running(t)", env)  # it inherits that copy's PYTHONPATH
    _wait_for_clients(tmux_flags, attached=True)


def _wait_for_clients(tmux_flags: list[str], *, attached: bool) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        listed = subprocess.run(["tmux", *tmux_flags, "list-clients"], capture_output=True, text=True, check=False)
        if bool(listed.stdout.strip()) is attached:
            return
        time.sleep(0.05)
    raise AssertionError(f"the tmux control client was {'not ' if attached else ''}there within 10 s")
