"""The command server's sockets: binding its own, and telling whether the team's tmux server still listens."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from fabrikito.base.errors import FabrikitoError
from fabrikito.cli.serverctl import socket_path


def listening(path: str) -> bool:
    """Whether a server listens on the unix socket ``path`` (tmux leaves its socket behind when killed)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        return False
    except OSError:
        return True  # cannot tell (a path too long, a slow server): keep serving
    finally:
        probe.close()
    return True


def listen(team_path: Path) -> tuple[socket.socket, int]:
    """Bind the socket (a stale one of a server that died is replaced; anything else is refused)."""
    where = socket_path(team_path)
    os.chdir(where.parent)  # the socket is bound by its short name: a deep team folder makes a long path
    try:
        st = os.lstat(where.name)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise FabrikitoError(f"{where} is there and is not a socket: remove it")
        os.unlink(where.name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(where.name)
    finally:
        os.umask(old)
    listener.listen(128)
    return listener, os.lstat(where.name).st_ino
