"""Helpers for live tests that drive fabrikito's own commands against bench seats."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests import userenv

from fabrikito.base.tmux import Server
from fabrikito.offline.replies import Reply
from fabrikito.offline.seatkit import LiveSeat
from fabrikito.offline.standin import StandIn

REPO = Path(__file__).resolve().parents[2]


def write_team(
    path: Path,
    server: Server,
    seats: Sequence[LiveSeat],
    *,
    extra: Sequence[tuple[str, str]] = (),
    name: str = "live",
) -> Path:
    """A team file whose roster is the bench ``seats`` (role, session) plus ``extra`` pairs."""
    lines = [f'name = "{name}"', f'tmux_socket = "{server.socket_name}"', ""]
    pairs = [(s.role, s.session, s.permission_mode) for s in seats] + [(r, s, "acceptEdits") for r, s in extra]
    for role, session, mode in pairs:
        lines += ["[[seat]]", f'role = "{role}"', f'session = "{session}"', f'permission_mode = "{mode}"', ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a command, server or seat a live test starts runs with: a user's shell's variables
    (tests/userenv.py), fabrikito's source on ``PYTHONPATH``, and ``extra``, set on purpose."""
    return userenv.user_env({"PYTHONPATH": str(REPO / "src"), **(extra or {})})


def fabrikito(
    *args: str,
    team: Path,
    role: str | None = "live-test",
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m fabrikito <command> --team <team> args...`` as a sender would."""
    extra = dict(env or {})
    if role is not None:
        extra["TEAM_ROLE"] = role
    command, *rest = args
    return subprocess.run(
        [sys.executable, "-m", "fabrikito", command, "--team", str(team), *rest],
        input=stdin,
        capture_output=True,
        text=True,
        env=clean_env(extra),
        timeout=timeout,
        check=False,
    )


def start_fabrikito(
    *args: str, team: Path, role: str = "live-test", env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start a command in a process group of its own (``os.killpg`` stops it and its children)."""
    command, *rest = args
    return subprocess.Popen(
        [sys.executable, "-m", "fabrikito", command, "--team", str(team), *rest],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env({"TEAM_ROLE": role, **(env or {})}),
        start_new_session=True,
    )


def log_lines(team: Path, name: str = "live") -> list[list[str]]:
    path = team.parent / ".state" / name / "messages.log"
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def wait_for(check: Callable[[], bool], timeout: float, what: str, describe: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}\n{describe()}")


def screen(server: Server, pane: str) -> str:
    return server.capture(pane)


def open_permission_prompt(tmux: Server, pane: str, standin: StandIn) -> None:
    """Have the seat (permission mode ``default``) ask to run a Bash command, and wait for its dialog."""
    standin.on("run the tool", Reply(tool="Bash", input={"command": "touch /tmp/fabrikito-never", "description": "t"}))
    tmux.paste(pane, "run the tool")
    tmux.send_keys(pane, "Enter")
    wait_for(lambda: "Do you want to proceed?" in tmux.capture(pane), 30, "the permission prompt")
    wait_still(tmux, pane, 10, "the permission prompt drawn whole")  # its box's border came a moment later


def wait_still(tmux: Server, pane: str, timeout: float, what: str) -> None:
    """Wait until the pane shows the same screen twice, 0.3 s apart (an agent still drawing has not settled:
    a screen captured meanwhile differs from the next for no one's doing)."""
    shown = [tmux.capture(pane)]

    def still() -> bool:
        time.sleep(0.3)
        shown.append(tmux.capture(pane))
        return shown[-1] == shown[-2]

    wait_for(still, timeout, what, lambda: shown[-1])


def say_cut_between_pastes(team: Path, role: str, text: str, folder: Path) -> None:
    """A ``say`` in its own process, killed between its two pastes, as a crash would: a ``tmux`` first on
    its PATH lets the label's paste through and holds the message's (``folder`` keeps that wrapper)."""
    import shutil
    import signal

    wrapper_dir, counter = folder / "bin", folder / "pastes"
    wrapper_dir.mkdir()
    (wrapper_dir / "tmux").write_text(
        "#!/bin/sh\n"
        'case "$*" in *paste-buffer*)\n'
        f"  n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}\n"
        '  if [ "$n" -ge 2 ]; then exec sleep 60; fi;;\n'
        "esac\n"
        f'exec {shutil.which("tmux")} "$@"\n'
    )
    (wrapper_dir / "tmux").chmod(0o755)
    env = {"PATH": f"{wrapper_dir}:{os.environ['PATH']}", "FABRIKITO_SERVER": "0"}  # its own tmux calls
    proc = start_fabrikito("say", role, text, team=team, env=env)
    wait_for(lambda: counter.exists() and counter.read_text().strip() == "2", 20, "say to paste its message")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
