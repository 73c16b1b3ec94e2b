"""A JSON object read from a file that another program writes (Claude Code's registry and settings, a
seat's files): what is missing, unreadable, broken or not an object reads as ``None``, never an error.

:func:`string` reads a field that a record fabrikito writes itself must hold (a queued message, a seat's
conversation record): there a field that is missing or not a string is an error, which its reader
turns into "damaged"."""

from __future__ import annotations

import json
import os
import time

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def read_object(path: str | os.PathLike[str], *, again_after: float | None = None) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` when missing, unreadable or not an object.

    ``again_after``: on a read or parse error (not a missing file), read once more after that many seconds,
    in case the file was caught half written.
    """
    for attempt in range(2):
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            if attempt == 0 and again_after is not None:
                time.sleep(again_after)
                continue
            return None
        return data if isinstance(data, dict) else None
    return None


def string(record: Mapping[str, object], key: str) -> str:
    """``record[key]``, which must be a string: ``KeyError`` when it is missing, ``TypeError`` when it is not
    a string."""
    value = record[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value
