"""A length of time as people read it in a line of output: ``42s``, ``3m05s``, ``2h01m``.

Its own small module, so ``watch`` (whose start-up imports little) and the
delivery queue show an age the same way without one importing the other.
"""

from __future__ import annotations


def short(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h01m`` (whole seconds, never less than 0)."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
