"""The last message ``send`` wrote to each inbox socket: for the duplicate warning and for ``wait-idle``.

One small file per socket, ``${XDG_STATE_HOME:-~/.local/state}/fabrikito/sent/<hash>.json``
(directory 0700, file 0600, rewritten atomically), holding the socket path,
when the message was written (epoch seconds) and the SHA-256 of its text as
sent (label included) — never the text itself.

* **Duplicates.**  Claude Code drops "identical repeats inside a short window"
  (message-claude.md).  Measured against 2.1.316 (``tests/live/test_send_live.py``,
  ``test_identical_text_again_is_warned_about``): two posts of the same text a
  few milliseconds apart deliver one; the same text sent again by a second
  ``fabrikito send`` (0.3 s to 60 s later) arrives.  The window is short, but
  not documented, so ``send`` warns for a repeat inside
  :data:`DUPLICATE_WINDOW` seconds: it *may* be dropped.
* **wait-idle.**  Right after a send the registry can still say ``idle``:
  the receiver has not started the turn yet.  ``wait-idle`` reads when the
  last message went to the session's socket and waits for a turn that began
  after it (see :func:`fabrikito.inbox.client.wait_idle`).

A record that cannot be read or written is no error: the send went (or not)
all the same; only the warning or the wait's start is lost.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping

from fabrikito.base.values import frozen

#: ``send`` warns about the same text to the same socket within this many seconds.
DUPLICATE_WINDOW = 5.0


@frozen
class LastSend:
    socket_path: str
    sent_at: float  # epoch seconds
    digest: str


def state_dir(env: Mapping[str, str] | None = None) -> str:
    from fabrikito.base import xdg

    return os.path.join(xdg.state_home_name(env), "sent")


def record_path(socket_path: str, env: Mapping[str, str] | None = None) -> str:
    """The record of the last send to ``socket_path`` (a string: send's path does not import pathlib)."""
    name = hashlib.sha256(socket_path.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(state_dir(env), f"{name}.json")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def last_send(socket_path: str, env: Mapping[str, str] | None = None) -> LastSend | None:
    """The last recorded send to ``socket_path``, or ``None``."""
    from fabrikito.base import statedir
    from fabrikito.base.errors import FabrikitoError

    try:
        raw = statedir.read_plain(record_path(socket_path, env))
        data = json.loads(raw) if raw else None
    except (OSError, ValueError, FabrikitoError):
        return None
    if not isinstance(data, dict) or data.get("socket") != socket_path:
        return None
    sent_at, text_digest = data.get("sentAt"), data.get("digest")
    if not isinstance(sent_at, int | float) or isinstance(sent_at, bool) or not isinstance(text_digest, str):
        return None
    return LastSend(socket_path, float(sent_at), text_digest)


def remember(socket_path: str, text: str, sent_at: float, env: Mapping[str, str] | None = None) -> str | None:
    """Record a send; return why it could not be recorded, or ``None``."""
    from fabrikito.base import statedir
    from fabrikito.base.errors import FabrikitoError

    path = record_path(socket_path, env)
    data = {"socket": socket_path, "sentAt": sent_at, "digest": digest(text)}
    try:
        folder = os.path.dirname(path)
        os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
        statedir.ensure_dir(folder)
        # not synced: a record lost in a crash only loses a warning (and wait-idle's start falls back)
        statedir.write_atomic(path, json.dumps(data).encode("utf-8", "surrogateescape"), sync=False)
    except (OSError, FabrikitoError) as exc:
        return str(exc)
    return None


def repeat_warning(previous: LastSend | None, text: str, now: float) -> str | None:
    """A warning when ``text`` went to the same socket within :data:`DUPLICATE_WINDOW` seconds."""
    if previous is None or previous.digest != digest(text):
        return None
    age = now - previous.sent_at
    if not 0 <= age < DUPLICATE_WINDOW:
        return None
    return (
        f"the same text went to this session {age:.1f} s ago: Claude Code drops identical repeats inside a "
        "short window, so the receiver may drop this one. Change the text (or wait a little) if it must arrive twice."
    )
