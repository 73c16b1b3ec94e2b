"""One run of a command: who it speaks for, where it prints, which tmux it talks through.

The command line makes one :class:`Invocation` for each command it runs and
hands it to the handler, which passes what the engine needs on to it (the
caller's pid to ``say``'s who-is-speaking walk, its printers, the tmux server
to use).  Nothing of it is kept in a module: a command run by the team's
command server (:mod:`fabrikito.cli.server`) gets the asker's pid, the asker's
streams and the server's tmux control-mode client in its own invocation, and
a command run by itself gets its own process, its own streams and no client,
so the same code prints the same bytes either way.

What is printed through :meth:`Invocation.out` and :meth:`Invocation.err` is
written whole and flushed at once, line by line: the order of stdout and
stderr on one terminal or file, and what a reader sees while the command
runs, do not depend on how Python buffers its streams (``PYTHONUNBUFFERED``,
a pipe or a terminal).  A reader that went away (``| head``) ends the output
quietly, not the command.  Imports ``os`` and ``sys`` only: every command makes
one.
"""

from __future__ import annotations

import os
import sys

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TextIO

    from fabrikito.base.tmux import Server
    from fabrikito.base.tmuxcontrol import Control


class Invocation:
    """One command being run: the process it speaks for (``pid``), its standard streams, whether the team's
    command server runs it (``served``), the tmux control-mode client its tmux commands go through
    (``control``, the server's; ``None``: tmux processes of its own), and whether a stop signal is held
    until its guard is up (``held``)."""

    __slots__ = ("control", "handed", "held", "pid", "served", "stderr", "stdin", "stdout")

    def __init__(
        self,
        *,
        pid: int,
        stdin: TextIO | None,
        stdout: TextIO | None,
        stderr: TextIO | None,
        served: bool = False,
        control: Control | None = None,
        held: bool = False,
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.served = served
        self.control = control
        self.held = held  # the stop signals are held until the command's guard is up (cli.wire.holding)
        self.handed = False  # the team's command server ran it (cli.wire.ask): nothing ran in this process

    @classmethod
    def here(cls) -> Invocation:
        """A command run by this process itself."""
        return cls(pid=os.getpid(), stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)

    def out(self, line: str) -> None:
        """Print ``line`` on stdout, now."""
        write_line(self.stdout, line)

    def err(self, line: str) -> None:
        """Print ``line`` on stderr, now."""
        write_line(self.stderr, line)

    def tmux(self, server: Server) -> Server:
        """``server``, its commands sent through this invocation's control client when it has one on it."""
        control = self.control
        if control is None or control.broken is not None or control.flags != server.server_flags:
            return server
        from fabrikito.base.tmuxcontrol import Controlled

        return Controlled.over(server, control)


def write_line(stream: TextIO | None, line: str) -> None:
    """``line`` and a newline on ``stream``, flushed; a reader that went away is no error (its descriptor is
    then pointed at ``/dev/null``, so neither a later line nor the flush at exit fails again)."""
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except BrokenPipeError:
        _to_null(stream)
    except (OSError, ValueError):
        pass


def _to_null(stream: TextIO) -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
        stream.flush()  # what is left in its buffer goes to /dev/null now
    except (OSError, ValueError):
        pass
