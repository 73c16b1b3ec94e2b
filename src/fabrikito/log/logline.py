"""One line of the message log: escaping, formatting, and the hook's append.

This is the part of the message log the SendMessage hook needs on every
message a seat sends, so it imports only ``os``, ``stat`` and ``time``.
:mod:`fabrikito.log.msglog` builds on it (outcomes as an enum, the checked append
``say`` and ``flush`` use, the reader).

Five tab-separated fields: the local time (``2026-10-30T14:05:09``), the
sender, the recipient, the outcome and the message.  The text fields are
escaped (:func:`escape_field`) so a record stays on one line and holds no
terminal control code, and bash's ``printf '%b'`` on a field gives back the
original bytes.
"""

from __future__ import annotations

import os
import stat
import time

LOG_NAME = "messages.log"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
FIELD_FAILED = "<log_field failed>"
NO_MESSAGE_NOTIFY = "<no message: notify when idle>"
UNREADABLE_MESSAGE = "<hook input could not be read>"
FLUSH_MESSAGE = "[flush]"
BODY_NOT_LOGGED_SEC = "[body not logged: sec]"
BODY_NOT_LOGGED_UNRESOLVED = "[body not logged: unresolved address]"
UNKNOWN_PARTY = "?"
SEC_ROLE = "sec"

#: Fixed messages that hold no text of anyone's, so the sec rule keeps them.
PLACEHOLDERS = frozenset({NO_MESSAGE_NOTIFY, UNREADABLE_MESSAGE, FLUSH_MESSAGE})


# The outcomes, as the fourth field holds them (fabrikito.log.msglog.Outcome names them too).
SENT = "sent"
NOT_SENT = "NOT-SENT"
NOTIFY_WHEN_IDLE = "NOTIFY-WHEN-IDLE"
UNREADABLE = "UNREADABLE"


# -- escaping -------------------------------------------------------------------


def _hex_escape(char: str) -> str:
    return "".join(f"\\x{b:02X}" for b in char.encode("utf-8"))


def _text_table() -> dict[int, str]:
    table = {ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
    controls = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    for code in controls:
        table.setdefault(code, _hex_escape(chr(code)))
    return table


def _byte_table() -> dict[int, str]:
    # Applied to bytes decoded as Latin-1, so each character is one byte.
    table = {ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
    for code in [*range(0x00, 0x20), *range(0x7F, 0x100)]:
        table.setdefault(code, f"\\x{code:02X}")
    return table


_TEXT_TABLE = _text_table()
_BYTE_TABLE = _byte_table()


def escape_field(value: str | bytes) -> str:
    """Escape one field as the spec says; ``<log_field failed>`` if that fails.

    Valid UTF-8 (or a ``str`` that encodes to it) keeps its text and has
    ``\\``, newline, carriage return and tab written ``\\\\ \\n \\r \\t``, and every
    other C0 control, DEL, C1 control and bidi embedding, override or isolate
    written as its UTF-8 bytes, ``\\xHH`` each.  Anything else (invalid UTF-8,
    or a ``str`` holding surrogates, taken as its ``surrogateescape`` bytes)
    has every byte from 0x80 up written ``\\xHH``.
    """
    try:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return _escape_bytes(_str_bytes(value))
            return value.translate(_TEXT_TABLE)
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return _escape_bytes(value)
        return text.translate(_TEXT_TABLE)
    except Exception:
        return FIELD_FAILED


def _str_bytes(value: str) -> bytes:
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def _escape_bytes(data: bytes) -> str:
    return data.decode("latin-1").translate(_BYTE_TABLE)


_SIMPLE_ESCAPES = {"\\": b"\\", "n": b"\n", "r": b"\r", "t": b"\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


def unescape_field(field: str | bytes) -> bytes:
    """The original bytes of an escaped field; ``ValueError`` on an escape the log never writes."""
    text = field.decode("utf-8") if isinstance(field, bytes) else field
    if "\\" not in text:
        return text.encode("utf-8")
    out = bytearray()
    i = 0
    n = len(text)
    while i < n:
        j = text.find("\\", i)
        if j < 0:
            out += text[i:].encode("utf-8")
            break
        out += text[i:j].encode("utf-8")
        if j + 1 >= n:
            raise ValueError("a field ends with a lone backslash")
        kind = text[j + 1]
        simple = _SIMPLE_ESCAPES.get(kind)
        if simple is not None:
            out += simple
            i = j + 2
        elif kind == "x" and len(digits := text[j + 2 : j + 4]) == 2 and set(digits) <= _HEX:
            out.append(int(digits, 16))
            i = j + 4
        else:
            raise ValueError(f"unknown escape \\{kind} at {j}")
    return bytes(out)


# -- lines ------------------------------------------------------------------------


def local_time(when: float | None = None) -> str:
    """``2026-10-30T14:05:09`` in local time; now when ``when`` is ``None``."""
    return time.strftime(TIME_FORMAT, time.localtime(when))


def format_line(
    when: float | None,
    sender: str | bytes,
    recipient: str | bytes,
    outcome: str,
    message: str | bytes,
) -> bytes:
    """One log line, newline included: time, sender, recipient, outcome, message.

    ``when`` is seconds since the epoch (``None`` for now).  The sender and the
    message are escaped as the spec says; the recipient and the outcome are
    escaped the same way, which changes nothing for a role id, a session name
    or an outcome, and keeps the line one line whatever ``to`` held.
    """
    fields = (
        local_time(when),
        escape_field(sender),
        escape_field(recipient),
        escape_field(str(outcome)),
        escape_field(message),
    )
    return ("\t".join(fields) + "\n").encode("utf-8")


def body_for(sender: str, recipient: str, message: str) -> str:
    """The message as logged: a message to or from ``sec`` keeps no body (placeholders stay)."""
    if SEC_ROLE in (sender, recipient) and message not in PLACEHOLDERS:
        return BODY_NOT_LOGGED_SEC
    return message


# -- the hook's append ---------------------------------------------------------------


_HOOK_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def append_hook(path: str | os.PathLike[str], line: bytes) -> bool:
    """Append ``line`` for the hook; never raises.  ``True`` when the whole line was written.

    Opens without following a symlink (``O_NOFOLLOW``; ``O_NONBLOCK`` keeps a
    FIFO from blocking the open) and writes only to a regular file with one
    name, checked on the open descriptor, so a link costs this line and
    nothing is written through it.  The state directory is created (0700)
    when it is missing.
    """
    try:
        try:
            fd = os.open(path, _HOOK_FLAGS, 0o600)
        except FileNotFoundError:
            _make_dirs(os.path.dirname(os.fspath(path)))
            fd = os.open(path, _HOOK_FLAGS, 0o600)
    except Exception:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return False
        return os.write(fd, line) == len(line)
    except Exception:
        return False
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def _make_dirs(directory: str) -> None:
    parent = os.path.dirname(directory)
    if parent and parent != directory and not os.path.isdir(parent):
        os.mkdir(parent, 0o700)
    os.mkdir(directory, 0o700)
