"""The one log line of a ``say`` or ``flush``, however the command ends.

The spec asks for exactly one line in ``messages.log`` per ``say`` and per
``flush``: delivered or refused, and also when something fails on the way or a
signal stops it.  Rather than each exit path writing its own line, a command
runs inside :func:`guarded` with a :class:`OneLine`:

- the command writes the line itself when it knows the outcome
  (:meth:`OneLine.write`); a second write is a no-op, so there is never two;
- any exit that has not written it (a return, an exception, a signal turned
  into :class:`Interrupted`) writes it with the failure outcome
  (``NOT-DELIVERED``, ``NOT-FLUSHED``) on the way out;
- SIGTERM, SIGHUP and SIGINT raise :class:`Interrupted` so cleanup runs, except
  while the line is being written and after it was written: then the signal is
  only noted, so it can neither tear the record nor lose the report that
  follows it;
- one that came before and was held (blocked) until then, as the team's command
  server holds those it is passed until the command's guard is up
  (:mod:`fabrikito.cli.served`), is let through once :func:`guarded` is in
  place: it stops the command as if it had come just then.

The sender starts as ``?`` and is set as soon as it is known.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from fabrikito.base.errors import FabrikitoError
from fabrikito.log import msglog

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(BaseException):
    """A signal arrived while a command could still unwind: put everything back, log, report."""


class _Signals:
    __slots__ = ("defer", "noted")

    def __init__(self) -> None:
        self.defer = 0  # > 0: note a signal, do not raise
        self.noted: str | None = None


_SIGNALS = _Signals()


@contextmanager
def signals_raise() -> Iterator[None]:
    """Turn SIGTERM, SIGHUP and SIGINT into :class:`Interrupted` (unless deferred) while inside."""

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if _SIGNALS.defer:
            _SIGNALS.noted = _SIGNALS.noted or name
            return
        _SIGNALS.defer += 1  # a second signal must not interrupt the unwinding of the first
        raise Interrupted(name)

    depth = _SIGNALS.defer
    old = {}
    for sig in SIGNALS:
        try:
            old[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: signals go to the main thread anyway
            pass
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
        _SIGNALS.defer = depth


class OneLine:
    """The line a command owes the log: written once, by the command or on its way out.

    A plain class (not a dataclass): ``say`` and ``flush`` build one on every message.
    """

    __slots__ = ("error", "failed", "log_path", "message", "now", "recipient", "sender", "written")

    def __init__(
        self,
        log_path: Path,
        recipient: str,
        message: str,
        failed: msglog.Outcome,
        sender: str = msglog.UNKNOWN_PARTY,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.log_path = log_path
        self.recipient = recipient
        self.message = message  # as given; the sec rule is applied when the line is written
        self.failed = failed  # the outcome when the command ends without writing it
        self.sender = sender
        self.written = False
        self.error: str | None = None  # why the line could not be appended, once it was tried
        self.now = now

    def write(self, outcome: msglog.Outcome) -> str | None:
        """Append the line once; later calls change nothing.  Returns why it failed, or ``None``."""
        if self.written:
            return self.error
        _SIGNALS.defer += 1  # from here on a signal is noted, not raised: the rest is reporting
        self.written = True
        body = msglog.body_for(self.sender, self.recipient, self.message)
        try:
            msglog.append_checked(
                self.log_path, msglog.format_line(self.now(), self.sender, self.recipient, outcome, body)
            )
        except (OSError, FabrikitoError) as exc:
            self.error = str(exc)
        return self.error


def guarded(line: OneLine, run: Callable[[], int], *, stopped: Callable[[str], int]) -> int:
    """Run a command that owes ``line``: whatever happens, the line is written once.

    ``stopped(signal_name)`` reports a signal that arrived before the command
    finished (after the line is written) and returns the exit status.
    """
    _SIGNALS.noted = None
    with signals_raise():
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)  # one held until the guard was up arrives now
            return run()
        except Interrupted as exc:
            line.write(line.failed)
            return stopped(str(exc))
        finally:
            line.write(line.failed)
