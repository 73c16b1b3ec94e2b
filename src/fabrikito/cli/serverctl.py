"""The team's command server, from outside: where it listens, whether it runs, starting and ending it.

The server itself is :mod:`fabrikito.cli.server`: ``say``, ``flush`` and ``status`` hand
themselves to it (:mod:`fabrikito.cli.wire`), and for each it forks a
child that runs the command as the asking process would have, with its
descriptors, arguments, environment and folder (docs/decisions/0011, 0022).  ``up``
starts one for a team whose seats are all on this machine, ``down`` ends it.

It holds ``.state/.fabrikito.<file name>.lock`` while it runs (that file names
its pid and start time once it listens) and listens on
``.state/.fabrikito.<file name>.sock`` (0600, in the 0700 ``.state/``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import daemons, procs, statedir
from fabrikito.base.errors import FabrikitoError
from fabrikito.cli import wire
from fabrikito.team.teamfile import Team

if TYPE_CHECKING:
    from fabrikito.base.tmuxcontrol import Control

MODULE = "fabrikito.cli.server"
START_WAIT = 5.0
STOP_WAIT = 5.0
ERR_NAME = "command-server.err"


def lock_path(team_path: Path) -> Path:
    return team_path.parent / statedir.STATE_ROOT / f".fabrikito.{team_path.name}.lock"


def socket_path(team_path: Path) -> Path:
    return team_path.parent / statedir.STATE_ROOT / wire.socket_name(str(team_path))


def served(team: Team) -> bool:
    """Whether ``up`` starts a server for the team (all its seats on this machine)."""
    return not team.across_hosts


def running_pid(team_path: Path) -> int | None:
    """The pid of the server holding the team file's lock, when one does and it is that server."""
    lock = lock_path(team_path)
    if not daemons.lock_held(lock):
        return None
    try:
        fields = (statedir.read_plain(lock) or b"").split()
        pid, ticks = int(fields[0]), int(fields[1])
        if MODULE in procs.cmdline(pid) and procs.info(pid).start_ticks == ticks:
            return pid
    except (OSError, FabrikitoError, ValueError, IndexError, procs.ProcessGone, procs.ProcessUnreadable):
        pass
    return None


def ensure_running(team: Team, *, env: dict[str, str] | None = None) -> bool:
    """Start the team's command server unless one runs or the team is not served; ``True`` when
    one was started.  Returns once it listens, so a ``down`` right after it stops it."""
    if not served(team) or daemons.lock_held(lock_path(team.path)):
        return False
    statedir.ensure_state_dir(team.base_dir, team.name)
    child = daemons.start_detached(
        [sys.executable, "-m", MODULE, str(team.path)],
        cwd=team.base_dir,
        err_path=team.state_dir / ERR_NAME,
        env=env,
    )
    if not daemons.wait_started(child, lambda: running_pid(team.path) == child.pid, START_WAIT):
        raise FabrikitoError(f"it did not start: see {team.state_dir / ERR_NAME}")
    return True


def start_for_up(team: Team) -> bool | None:
    """``up``'s start of it (:data:`fabrikito.launch.lifecycle.Helper`): ``None`` for a team it does not serve."""
    return ensure_running(team) if served(team) else None


#: What ``up`` (and the demo) start after the seats' kickoffs; ``down`` ends it with :func:`stop`.
UP_HELPER = ("command server", start_for_up, "commands run without it, only slower")


def stop(team: Team) -> str | None:
    """End the team's command server; what happened, for people (``None``: none was running)."""
    pid = running_pid(team.path)
    if pid is None:
        return None
    if daemons.end(pid, lambda: daemons.lock_held(lock_path(team.path)), STOP_WAIT):
        return f"stopped the command server (pid {pid})"
    return f"killed the command server (pid {pid}): it did not stop within {STOP_WAIT:g} s"


def connect_control(team: Team) -> Control | None:
    """The team's tmux control-mode client for the server to share with the commands it runs
    (:mod:`fabrikito.base.tmuxcontrol`), or ``None``: the team's tmux server is not running, a client is
    attached to it, or the client did not attach.  Connected under :func:`~fabrikito.base.tmuxcontrol.tmux_events`."""
    from fabrikito.base import tmuxcontrol

    server = team.server()
    if not server.listening():
        return None
    with tmuxcontrol.tmux_events(server):
        return tmuxcontrol.connect(server)
