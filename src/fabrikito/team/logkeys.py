"""The team file's keys for the message log's rotation: ``log_max_size`` and ``log_keep``.

The log (and say's refusal log) is renamed ``messages.log.1`` past ``log_max_size``
bytes, the older ones shifted, and the one past ``log_keep`` removed
(docs/decisions/0027-log-reads-what-it-shows.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

DEFAULT_LOG_MAX_SIZE = 16 * 1024 * 1024
DEFAULT_LOG_KEEP = 5
MIN_LOG_MAX_SIZE = 64 * 1024
MAX_LOG_KEEP = 99
SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse(data: Mapping[str, Any], bad: Callable[[str, str], None]) -> tuple[int, int]:
    """``(log_max_size, log_keep)`` from the team table; a bad value is reported to ``bad`` and its default used."""
    log_keep = data.get("log_keep", DEFAULT_LOG_KEEP)
    if isinstance(log_keep, bool) or not isinstance(log_keep, int) or not 1 <= log_keep <= MAX_LOG_KEEP:
        bad(
            "team", f"'log_keep' must be a whole number of old log files to keep, 1 to {MAX_LOG_KEEP}, not {log_keep!r}"
        )
        log_keep = DEFAULT_LOG_KEEP
    return max_size(data.get("log_max_size", DEFAULT_LOG_MAX_SIZE), bad), log_keep


def max_size(value: object, bad: Callable[[str, str], None]) -> int:
    """``log_max_size``: bytes, as a number or a text like ``"16M"`` (K, M, G: powers of 1024)."""
    size: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (m := re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", value, re.IGNORECASE)):
        size = int(m.group(1)) * SIZE_UNITS[m.group(2).upper()]
    if size is None or size < MIN_LOG_MAX_SIZE:
        bad(
            "team",
            f'\'log_max_size\' must be a size of at least 64K, as bytes or a text like "16M" or "1G", not {value!r}',
        )
        return DEFAULT_LOG_MAX_SIZE
    return size
