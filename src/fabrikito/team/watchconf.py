"""The team file's ``notify`` key and ``[watch]`` table: who is told, and after how long.

``notify`` is an argument list run once for each event of the chosen kinds
(:mod:`fabrikito.watch.notify`); ``[watch]`` holds thresholds, each with a
default, in seconds::

    notify = ["notify-send", "fabrikito"]

    [watch]
    kinds = ["held-dialog", "permission", "exited"]  # default: every kind but restarting and resumed
    resolved = false      # also notify the resolved events (default false)
    notify_timeout = 10   # a notify command still running then is killed
    busy_after = 900      # a seat busy longer than this is told (15 min)
    box_after = 120       # a box holding text longer than this is told
    queued_after = 600    # a queued message waiting longer than this is told
    round = 0.5           # seconds between the watcher's rounds
"""

from __future__ import annotations

from collections.abc import Mapping

from fabrikito import TYPE_CHECKING
from fabrikito.base.values import frozen

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Every kind of event the watcher writes (docs/watch.md says what each means and what to do).
KINDS = (
    "held-dialog",
    "permission",
    "dialog",
    "exited",
    "not-agent",
    "gone",
    "unreachable",
    "unwatched",
    "busy-long",
    "api-error",
    "box-text",
    "queued-long",
    "queued-expired",
    "queued-uncertain",
    "queued-held",
    "notice",
    # restarts (fabrikito.launch.autorestart, up --resume): things that happened, told once each
    "restarting",
    "restarted",
    "restart-capped",
    "not-restarted",
    "resumed",
    "fresh-start",
)
#: The kinds of the restart notes (``"event": "noted"``) a notify command can be given.
RESTART_KINDS = frozenset({"restarting", "restarted", "restart-capped", "not-restarted", "resumed", "fresh-start"})
#: Told only when ``kinds`` names them: a restart decided (``restarted`` follows it) and a seat ``up`` resumed.
QUIET_KINDS = frozenset({"restarting", "resumed"})

NUMBERS = {
    "notify_timeout": (10.0, 0.1, 3600.0),
    "busy_after": (900.0, 0.0, 86400.0),
    "box_after": (120.0, 0.0, 86400.0),
    "queued_after": (600.0, 0.0, 86400.0),
    "round": (0.5, 0.05, 60.0),
}
WATCH_KEYS = frozenset({"kinds", "resolved", *NUMBERS})


@frozen
class WatchConfig:
    notify: tuple[str, ...] | None = None
    kinds: frozenset[str] = frozenset(KINDS) - QUIET_KINDS
    resolved: bool = False
    notify_timeout: float = NUMBERS["notify_timeout"][0]
    busy_after: float = NUMBERS["busy_after"][0]
    box_after: float = NUMBERS["box_after"][0]
    queued_after: float = NUMBERS["queued_after"][0]
    round: float = NUMBERS["round"][0]


def parse(notify: Any, table: Any, bad: Callable[[str, str], None]) -> WatchConfig:
    """The team file's ``notify`` and ``[watch]``; each problem goes to ``bad(where, message)``."""
    argv: tuple[str, ...] | None = None
    if notify is not None:
        if not isinstance(notify, list) or not notify or not all(isinstance(a, str) and a for a in notify):
            bad("team", "'notify' must be a list of strings: the program and its arguments (e.g. [\"notify-send\"])")
        else:
            argv = tuple(notify)
    if table is None:
        return WatchConfig(notify=argv)
    if not isinstance(table, Mapping):
        bad("watch", "must be a [watch] table")
        return WatchConfig(notify=argv)
    for key in sorted(set(table) - WATCH_KEYS):
        bad("watch", f"unknown key '{key}': remove it (known keys: {', '.join(sorted(WATCH_KEYS))})")
    kinds = frozenset(KINDS) - QUIET_KINDS
    raw_kinds = table.get("kinds")
    if raw_kinds is not None:
        if not isinstance(raw_kinds, list) or not all(isinstance(k, str) for k in raw_kinds):
            bad("watch", "'kinds' must be a list of event kinds")
        else:
            unknown = sorted(set(raw_kinds) - set(KINDS))
            if unknown:
                bad("watch", f"unknown event kind(s) {', '.join(unknown)} in 'kinds' (known: {', '.join(KINDS)})")
            kinds = frozenset(raw_kinds) & frozenset(KINDS)
    resolved = table.get("resolved", False)
    if not isinstance(resolved, bool):
        bad("watch", "'resolved' must be true or false")
        resolved = False
    numbers: dict[str, float] = {}
    for key, (default, low, high) in NUMBERS.items():
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            bad("watch", f"'{key}' must be a number of seconds from {low:g} to {high:g}, not {value!r}")
            value = default
        numbers[key] = float(value)
    return WatchConfig(
        notify=argv,
        kinds=kinds,
        resolved=resolved,
        notify_timeout=numbers["notify_timeout"],
        busy_after=numbers["busy_after"],
        box_after=numbers["box_after"],
        queued_after=numbers["queued_after"],
        round=numbers["round"],
    )
