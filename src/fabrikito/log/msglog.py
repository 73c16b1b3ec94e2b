"""The message log ``.state/<team>/messages.log``: its line format and how lines are appended.

One line per message, five tab-separated fields: the local time
(``2026-10-30T14:05:09``), the sender, the recipient, the outcome and the
message.  The text fields are escaped (:func:`escape_field`) so a record stays
on one line and holds no terminal control code, and bash's ``printf '%b'`` on
a field gives back the original bytes.

A line is appended with one ``write()`` on an ``O_APPEND`` descriptor, so
concurrent writers never interleave.  Two ways to append, as the spec has them:

* :func:`append_checked`, for ``say`` and ``flush``: checks the path first
  (a symlink, a FIFO or a hard link means nothing is written and
  :class:`LogWriteError` says what to remove), then appends;
* :func:`append_hook`, for the SendMessage hook: opens without following a
  symlink, writes only to a regular file with one name, and never raises.

The hook itself imports only :mod:`fabrikito.log.logline`; this module, which
``say`` and ``flush`` import on every message, imports only ``os`` and ``enum``
of the standard library at module level (no ``re``, no ``pathlib``): the
reader's parts and ``statedir`` are imported where used.
"""

from __future__ import annotations

import os
from enum import StrEnum

from fabrikito.base.errors import FabrikitoError
from fabrikito.base.values import frozen
from fabrikito.log.logline import (
    BODY_NOT_LOGGED_SEC,
    BODY_NOT_LOGGED_UNRESOLVED,
    FIELD_FAILED,
    FLUSH_MESSAGE,
    LOG_NAME,
    NO_MESSAGE_NOTIFY,
    PLACEHOLDERS,
    SEC_ROLE,
    TIME_FORMAT,
    UNKNOWN_PARTY,
    UNREADABLE_MESSAGE,
    append_hook,
    body_for,
    escape_field,
    format_line,
    local_time,
    unescape_field,
)

__all__ = [
    "BODY_NOT_LOGGED_SEC",
    "BODY_NOT_LOGGED_UNRESOLVED",
    "FIELD_FAILED",
    "FLUSH_MESSAGE",
    "LOG_NAME",
    "NO_MESSAGE_NOTIFY",
    "PLACEHOLDERS",
    "SEC_ROLE",
    "TIME_FORMAT",
    "UNKNOWN_PARTY",
    "UNREADABLE_MESSAGE",
    "Foreign",
    "LogWriteError",
    "Outcome",
    "Record",
    "append_checked",
    "append_hook",
    "body_for",
    "escape_field",
    "format_line",
    "local_time",
    "parse_line",
    "unescape_field",
]


class Outcome(StrEnum):
    """The fourth field of a log line."""

    SENT = "sent"
    NOT_SENT = "NOT-SENT"
    NOTIFY_WHEN_IDLE = "NOTIFY-WHEN-IDLE"
    UNREADABLE = "UNREADABLE"
    DELIVERED = "delivered"
    NOT_DELIVERED = "NOT-DELIVERED"
    FLUSHED = "FLUSHED"
    NOT_FLUSHED = "NOT-FLUSHED"
    FLUSH_NOTHING = "FLUSH-NOTHING"
    QUEUED = "QUEUED"
    EXPIRED = "EXPIRED"
    UNCERTAIN = "UNCERTAIN"
    DROPPED = "DROPPED"
    SET_ASIDE = "SET-ASIDE"


class LogWriteError(FabrikitoError):
    """A line could not be appended to the message log; the message says what to do."""


# -- appending (say, flush) --------------------------------------------------------------


def append_checked(path: str | os.PathLike[str], line: bytes) -> None:
    """Append ``line`` for ``say`` and ``flush``: refuse a link first, then one ``write()``.

    Raises :class:`LogWriteError` (exit status 1) saying why nothing was
    written and what to remove or fix.  The check and the append are two
    steps; the append itself also opens without following a symlink and
    refuses a file that is not regular with one name.
    """
    from pathlib import Path

    from fabrikito.base import statedir
    from fabrikito.base.errors import StateFileError

    target = Path(path)
    reason = statedir.describe_unsafe(target)
    if reason is not None:
        raise LogWriteError(f"the record could not be written: {reason}")
    try:
        _ensure_parents(target)
        statedir.append_line(target, line)
    except StateFileError as exc:
        raise LogWriteError(f"the record could not be written: {exc.message}") from None
    except OSError as exc:
        what = exc.strerror or str(exc)
        raise LogWriteError(
            f"the record could not be written to {target} ({what}): check the state directory "
            "and its permissions, and that the disk is not full"
        ) from None


def _ensure_parents(path: os.PathLike[str]) -> None:
    from pathlib import Path

    from fabrikito.base import statedir

    parent = Path(path).parent
    if os.path.isdir(parent):
        return
    if not os.path.isdir(parent.parent):
        statedir.ensure_dir(parent.parent)
    statedir.ensure_dir(parent)


# -- reading --------------------------------------------------------------------


@frozen
class Record:
    """One well-formed log line, its text fields unescaped to the original bytes (``escaped``: the line's five
    fields as written, which its equality compares too and its repr leaves out)."""

    time: str
    sender: bytes
    recipient: bytes
    outcome: str
    message: bytes
    escaped: tuple[str, str, str, str, str]

    def __repr__(self) -> str:
        return (
            f"Record(time={self.time!r}, sender={self.sender!r}, recipient={self.recipient!r}, "
            f"outcome={self.outcome!r}, message={self.message!r})"
        )


@frozen
class Foreign:
    """A line the log's writers did not write whole: torn, or from something else."""

    raw: bytes
    reason: str


def parse_line(line: bytes) -> Record | Foreign:
    """Read one line of the log (with its newline).  Never raises.

    A line without its newline is torn (its writer did not finish, or it is
    still being written); a line that is not five fields of the log's format
    (a time, three escaped fields around an outcome, no raw control code) is
    foreign.
    """
    import re

    if not line.endswith(b"\n"):
        return Foreign(line, "torn: the line has no newline at its end")
    body = line[:-1]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Foreign(line, "not UTF-8 text")
    fields = text.split("\t")
    if len(fields) != 5:
        return Foreign(line, f"{len(fields)} tab-separated fields, not 5")
    when, sender, recipient, outcome, message = fields
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", when):
        return Foreign(line, "the first field is not a time like 2026-10-30T14:05:09")
    if not re.fullmatch(r"[A-Za-z?][A-Za-z-]*", outcome):
        return Foreign(line, "the fourth field is not an outcome")
    raw_control = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    if any(raw_control.search(f) for f in (sender, recipient, message)):
        return Foreign(line, "a raw control character in a field")
    try:
        decoded = (unescape_field(sender), unescape_field(recipient), unescape_field(message))
    except ValueError as exc:
        return Foreign(line, f"not escaped as the log escapes ({exc})")
    return Record(
        when, decoded[0], decoded[1], outcome, decoded[2], escaped=(when, sender, recipient, outcome, message)
    )
