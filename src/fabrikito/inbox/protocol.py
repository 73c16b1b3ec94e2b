"""The inbox wire format of Claude Code's cross-session messaging, both ways.

One connection to a session's inbox socket carries newline-delimited JSON,
one object a line (``message-claude.md``, Step 2)::

    {"type":"auth","token":"<token>"}
    {"type":"user","message":{"role":"user","content":"<text>"}}

The auth line is optional on macOS and Linux and comes first when there is
one.  Claude Code's own peers add ``msgV``, ``msg_id``, ``priority`` and
``from`` to the user line (``peer-wire-format-sniffed.jsonl``); an outside
sender sends only the fields above.

This module is the one place that encodes and decodes those lines, so the
sender (:mod:`fabrikito.inbox`) and a future inbox server for seats that are
not Claude Code speak exactly the same format.  It imports only ``json`` and
``dataclasses``.

Text rules, decided here (``docs/decisions/0005-send-and-inbox-client.md``):

* The text must be a ``str`` holding only Unicode scalar values.  A lone
  surrogate (``"\\ud800"``, or the ``\\udcXX`` Python makes of bytes that are
  not UTF-8 in ``argv``) is **refused** with :class:`InvalidTextError`: the
  receiver would get a different text than was sent (or a line it cannot
  parse), so nothing is sent rather than something altered.
* Every line is ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``
  encoded as UTF-8: quotes, backslashes, newlines and control characters are
  JSON escapes, so a line never holds a raw newline; any other character is
  sent as itself.
* The size limit: the message is refused with :class:`TooLargeError` when its
  *serialized* form, the JSON string literal of the text without its two
  quotes, is longer than :data:`MAX_SERIALIZED_CHARS` (1,000,000) UTF-16 code
  units, the unit Claude Code (JavaScript) counts in.  A plain 1,000,000-character
  message is exactly at the limit and passes (Claude Code 2.1.316 delivered
  one, README section 8.4); 1,000,001 characters, or fewer characters that
  need escapes or lie outside the Basic Multilingual Plane, are over it.
"""

from __future__ import annotations

import json

from fabrikito import TYPE_CHECKING
from fabrikito.base.values import field, frozen

if TYPE_CHECKING:
    from typing import Any

MAX_SERIALIZED_CHARS = 1_000_000
"""The most UTF-16 code units the JSON-escaped text may take (see the module docstring)."""

AUTH_TYPE = "auth"
USER_TYPE = "user"


class ProtocolError(ValueError):
    """A text that cannot be sent, or a line that is not a valid inbox line."""


class InvalidTextError(ProtocolError):
    """The text holds a lone surrogate (it is not valid Unicode text)."""

    def __init__(self, index: int) -> None:
        super().__init__(
            f"the message holds a lone UTF-16 surrogate at character {index} (often bytes that are not "
            "UTF-8): it cannot be sent as it is; convert the text to UTF-8 first"
        )
        self.index = index


class TooLargeError(ProtocolError):
    """The serialized text is over :data:`MAX_SERIALIZED_CHARS`."""

    def __init__(self, size: int, limit: int = MAX_SERIALIZED_CHARS) -> None:
        super().__init__(
            f"the message is {size:,} characters serialized (JSON-escaped, counted in UTF-16 units), "
            f"over the limit of {limit:,}: split it, or send a path to a file instead"
        )
        self.size = size
        self.limit = limit


@frozen
class AuthLine:
    """``{"type":"auth","token":...}``."""

    token: str


@frozen
class UserLine:
    """``{"type":"user","message":{"role":"user","content":...}}`` and the optional peer fields."""

    content: str
    msg_id: str | None = None
    sender: str | None = None  # the "from" field of a peer line
    priority: str | None = None
    version: int | None = None  # "msgV"
    extra: dict[str, Any] = field(default_factory=dict)


Line = AuthLine | UserLine


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def check_text(text: str) -> None:
    """Raise :class:`InvalidTextError` if ``text`` holds a lone surrogate."""
    if not isinstance(text, str):
        raise TypeError(f"the message must be a str, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTextError(exc.start) from None


def serialized_size(text: str) -> int:
    """UTF-16 code units of the JSON string literal of ``text``, without the quotes."""
    literal = _dumps(text)[1:-1]
    return len(literal.encode("utf-16-le")) // 2


def check_size(text: str, limit: int = MAX_SERIALIZED_CHARS) -> int:
    """Return the serialized size of ``text``; raise :class:`TooLargeError` when it is over ``limit``."""
    size = serialized_size(text)
    if size > limit:
        raise TooLargeError(size, limit)
    return size


def auth_line(token: str) -> bytes:
    """The auth line, newline included."""
    if not token or not isinstance(token, str):
        raise ProtocolError("an auth line needs a non-empty token")
    return (_dumps({"type": AUTH_TYPE, "token": token}) + "\n").encode("utf-8")


def user_line(text: str) -> bytes:
    """The user message line, newline included (text checked, size not)."""
    check_text(text)
    return (_dumps({"type": USER_TYPE, "message": {"role": "user", "content": text}}) + "\n").encode("utf-8")


def encode(text: str, token: str | None = None, *, limit: int = MAX_SERIALIZED_CHARS) -> bytes:
    """The whole payload: the auth line when there is a token, then the user line.

    Raises :class:`InvalidTextError` or :class:`TooLargeError` before anything is built.
    """
    check_text(text)
    check_size(text, limit)
    head = auth_line(token) if token else b""
    return head + user_line(text)


def decode_line(line: bytes | str) -> Line:
    """Parse one line (with or without its newline) into an :class:`AuthLine` or :class:`UserLine`.

    Raises :class:`ProtocolError` for anything else: not UTF-8, not JSON, not
    an object, an unknown type, or a user line whose content is not a string.
    """
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"the line is not UTF-8 (byte {exc.start})") from None
    line = line.removesuffix("\n").removesuffix("\r")
    if "\n" in line:
        raise ProtocolError("one line expected, found a newline inside it")
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"the line is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ProtocolError("the line is not a JSON object")
    kind = data.get("type")
    if kind == AUTH_TYPE:
        token = data.get("token")
        if not isinstance(token, str) or not token:
            raise ProtocolError("an auth line without a string token")
        return AuthLine(token)
    if kind == USER_TYPE:
        message = data.get("message")
        if not isinstance(message, dict) or message.get("role") != "user":
            raise ProtocolError('a user line needs "message": {"role": "user", ...}')
        content = message.get("content")
        if not isinstance(content, str):
            raise ProtocolError("a user line's content must be a string (plain text only)")
        extra = {k: v for k, v in data.items() if k not in {"type", "message", "msg_id", "from", "priority", "msgV"}}
        msg_id = data.get("msg_id")
        sender = data.get("from")
        priority = data.get("priority")
        version = data.get("msgV")
        return UserLine(
            content=content,
            msg_id=msg_id if isinstance(msg_id, str) else None,
            sender=sender if isinstance(sender, str) else None,
            priority=priority if isinstance(priority, str) else None,
            version=version if isinstance(version, int) and not isinstance(version, bool) else None,
            extra=extra,
        )
    raise ProtocolError(f"unknown line type {kind!r}")


def decode(payload: bytes) -> list[Line]:
    """Parse a whole payload of newline-terminated lines; an unterminated tail is an error."""
    if payload and not payload.endswith(b"\n"):
        raise ProtocolError("the payload does not end with a newline: its last line is incomplete")
    return [decode_line(raw) for raw in payload.split(b"\n")[:-1]]
