"""Readings of screens kept for the next look, so a process that reads a team round after round (the
delivery worker, the watcher) reads an unchanged screen once; a command server's children start with
the readings of its warm-up.

Recognition is a pure function of the recogniser and the snapshot (the screen with escapes, the pane's
size, cursor and modes), so a reading is kept under both: the recogniser's :attr:`~Recogniser.key`
names its dialect, release and, for one that fails closed, its reason, so a release qualified since,
or a seat restarted on another release, is read afresh.  At most :data:`LIMIT` readings are kept, the
least recently used dropped first: a team of 100 seats is read once per changed screen.
"""

from __future__ import annotations

from fabrikito.screen import BoxReading, PaneSnapshot, Recogniser

#: How many readings are kept (each holds its screen, about 5-20 kB).
LIMIT = 160

_KEPT: dict[tuple[tuple[str, ...], PaneSnapshot], BoxReading] = {}


def read(recogniser: Recogniser, snapshot: PaneSnapshot) -> BoxReading:
    """``recogniser.recognise(snapshot)``, from the last reading of the same screen when there is one."""
    key = (recogniser.key, snapshot)
    found = _KEPT.pop(key, None)
    if found is None:
        found = recogniser.recognise(snapshot)
        if len(_KEPT) >= LIMIT:
            del _KEPT[next(iter(_KEPT))]
    _KEPT[key] = found  # last in the order: the most recently used
    return found


def kept() -> int:
    """How many readings are kept now."""
    return len(_KEPT)


def forget() -> None:
    """Drop every kept reading."""
    _KEPT.clear()
