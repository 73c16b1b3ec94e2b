"""Every error fabrikito raises on purpose.

One base class carries the exit code; the CLI boundary (``fabrikito.cli``) turns
it into a message on stderr and that code.  Each message says what failed, on
what, and what to do about it.  ``HostError``, which names an ssh
:class:`~fabrikito.base.ssh.Problem`, is in :mod:`fabrikito.base.ssh`.
"""

from __future__ import annotations

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:  # every command imports this module: neither costs them anything at run time
    from collections.abc import Sequence


class FabrikitoError(Exception):
    """An error with a message for people and an exit code."""

    exit_code: int = 1

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(FabrikitoError):
    """The command line itself is wrong."""

    exit_code = 2


class TeamFileError(FabrikitoError):
    """The team file is missing, unreadable or invalid (``check`` exits 2)."""

    exit_code = 2


class TmuxError(FabrikitoError):
    """A tmux command failed: which one, and what tmux said."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        returncode: int | None,
        stderr: str,
        reason: str = "",
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr.strip()
        shown = " ".join(self.argv)
        if reason:
            what = reason
        elif returncode is None:
            what = "did not finish"
        else:
            what = f"exited with status {returncode}"
        detail = f": {self.stderr}" if self.stderr else ""
        super().__init__(f"tmux command failed ({what}): {shown}{detail}")


class StateFileError(FabrikitoError):
    """A file under ``.state/`` is not what it must be (a link, a FIFO...)."""


def print_error(text: str) -> None:
    """Print a message for people on stderr; a stderr that cannot be written is no second error."""
    import sys

    try:
        print(text, file=sys.stderr)
    except OSError:
        pass
