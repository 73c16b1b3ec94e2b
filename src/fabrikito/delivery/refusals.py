"""Refusals for a box that holds text: the back-off, the notice, the log.

A box that is not empty blocks every later message to that seat.  For each
seat, ``.state/<team>/say/box-<role>.json`` (0600) keeps how many sends were
refused for the box since it was last seen empty, when the last one was, and
the last eight refused texts as hashes of (sender, text) with their times.  A
message to or from ``sec`` is never hashed.  The same text from the same
sender refused again within the window is a repeat.  Each refusal also
appends a line to ``.state/<team>/say-refusals.log`` (time, sender, receiver,
class): no message, no hash.

Every function here is called with the seat's ``say`` lock held.
"""

from __future__ import annotations

import json
import os
import time
from enum import StrEnum
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import statedir
from fabrikito.base.errors import StateFileError
from fabrikito.base.values import frozen
from fabrikito.log.msglog import escape_field, local_time

if TYPE_CHECKING:
    from typing import Any

KEPT_TEXTS = 8
DEFAULT_WINDOW = 300
DEFAULT_NOTICE_COUNT = 3
SEC = "sec"


class RefusalClass(StrEnum):
    BOX_TEXT = "box-text"
    BOX_TEXT_REPEAT = "box-text-repeat"


@frozen
class Notice:
    role: str
    count: int
    last: float


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        return default
    return value if value >= 0 else default


def resend_window() -> int:
    return _int_env("FABRIKITO_SAY_RESEND_WINDOW", DEFAULT_WINDOW)


def notice_count() -> int:
    return _int_env("FABRIKITO_SAY_NOTICE_COUNT", DEFAULT_NOTICE_COUNT)


def record_path(say_dir: Path, role: str) -> Path:
    return say_dir / f"box-{role}.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = statedir.read_plain(path)
    except (OSError, StateFileError):
        return {}
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    # A damaged record (edited, or from another version) counts as what can be read of it.
    texts = data.get("texts")
    return {
        "count": max(0, int(_number(data.get("count")))),
        "last": _number(data.get("last")),
        "texts": [
            {"hash": t["hash"], "time": _number(t.get("time"))}
            for t in (texts if isinstance(texts, list) else [])
            if isinstance(t, dict) and isinstance(t.get("hash"), str)
        ],
    }


def _number(value: object) -> float:
    """A finite number from a record, 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    import math

    number = float(value)
    return number if math.isfinite(number) else 0.0


def _digest(sender: str, text: str) -> str:
    import hashlib  # only when a refusal is recorded: status and a delivered say never need it

    h = hashlib.sha256()
    h.update(sender.encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def register(
    state_dir: Path, say_dir: Path, *, sender: str, role: str, text: str, now: float | None = None
) -> RefusalClass:
    """Record one refusal for the box; return its class.  Appends the refusals log line."""
    moment = time.time() if now is None else now
    path = record_path(say_dir, role)
    data = _load(path)
    texts = [t for t in data.get("texts", []) if isinstance(t, dict)]
    window = resend_window()
    hashed = SEC not in (sender, role)
    klass = RefusalClass.BOX_TEXT
    if hashed:
        key = _digest(sender, text)
        for entry in texts:
            if entry.get("hash") == key and moment - float(entry.get("time", 0)) <= window:
                klass = RefusalClass.BOX_TEXT_REPEAT
                break
        texts = [t for t in texts if t.get("hash") != key]
        texts.append({"hash": key, "time": moment})
        texts = texts[-KEPT_TEXTS:]
    record = {"count": int(data.get("count", 0)) + 1, "last": moment, "texts": texts}
    statedir.write_atomic(path, json.dumps(record).encode())
    line = "\t".join((local_time(moment), escape_field(sender), role, klass.value)) + "\n"
    try:
        statedir.append_line(state_dir / "say-refusals.log", line.encode("utf-8"))
    except (OSError, StateFileError):
        pass  # the refusal itself is reported to the caller; this log is a convenience
    return klass


def clear(say_dir: Path, role: str) -> None:
    """Forget a seat's refusals: its box was seen empty, or a delivery or flush succeeded."""
    statedir.remove_quietly(record_path(say_dir, role))


def notices(say_dir: Path, roles: list[str]) -> list[Notice]:
    """``NOTICE`` lines for ``status``: seats refused for their box at least N times."""
    threshold = notice_count()
    found = []
    for role in roles:
        data = _load(record_path(say_dir, role))
        count = int(data.get("count", 0))
        if threshold and count >= threshold:
            found.append(Notice(role=role, count=count, last=float(data.get("last", 0))))
    return found
