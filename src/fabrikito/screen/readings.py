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

from fabrikito import TYPE_CHECKING
from fabrikito.screen import BoxReading, PaneSnapshot, Recogniser

if TYPE_CHECKING:  # status imports this module: typing is not imported at run time
    from collections.abc import Callable
    from typing import TypeVar

    K = TypeVar("K")
    V = TypeVar("V")

#: How many readings, and how many plain texts, are kept (each holds its screen, about 5-20 kB).
LIMIT = 160

_KEPT: dict[tuple[tuple[str, ...], PaneSnapshot], BoxReading] = {}
_PLAIN: dict[str, str] = {}


def read(recogniser: Recogniser, snapshot: PaneSnapshot) -> BoxReading:
    """``recogniser.recognise(snapshot)``, from the last reading of the same screen when there is one."""
    return _kept(_KEPT, (recogniser.key, snapshot), lambda: recogniser.recognise(snapshot))


def plain(ansi: str) -> str:
    """A screen captured with escapes as plain text (:func:`fabrikito.screen.ansi.plain`), kept the same way
    (the watcher shows each seat's screen)."""
    from fabrikito.screen.ansi import plain as plain_of

    return _kept(_PLAIN, ansi, lambda: plain_of(ansi))


def _kept(store: dict[K, V], key: K, make: Callable[[], V]) -> V:
    found = store.pop(key, None)
    if found is None:
        found = make()
        if len(store) >= LIMIT:
            del store[next(iter(store))]
    store[key] = found  # last in the order: the most recently used
    return found


def holds(recogniser: Recogniser, snapshot: PaneSnapshot) -> bool:
    """Whether a reading of ``snapshot`` by ``recogniser`` is kept (asking is not a use)."""
    return (recogniser.key, snapshot) in _KEPT


def kept() -> int:
    """How many readings are kept now."""
    return len(_KEPT)


def forget() -> None:
    """Drop every kept reading and plain text."""
    _KEPT.clear()
    _PLAIN.clear()
