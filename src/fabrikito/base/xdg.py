"""Where fabrikito keeps per-user files: the XDG base directories, read when asked (never at import).

Worked out as strings (``send`` does not import :mod:`pathlib`, 3.5 ms of its
start); the functions most callers use give a ``Path``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def _base(env: Mapping[str, str] | None, variable: str, default: str) -> str:
    values = os.environ if env is None else env
    configured = values.get(variable, "")
    if configured and os.path.isabs(configured):
        return os.path.join(configured, "fabrikito")
    home = values.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, default, "fabrikito")


def config_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/fabrikito`` (default ``~/.config/fabrikito``)."""
    from pathlib import Path

    return Path(_base(env, "XDG_CONFIG_HOME", ".config"))


def cache_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/fabrikito`` (default ``~/.cache/fabrikito``)."""
    from pathlib import Path

    return Path(_base(env, "XDG_CACHE_HOME", ".cache"))


def state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/fabrikito`` (default ``~/.local/state/fabrikito``)."""
    from pathlib import Path

    return Path(state_home_name(env))


def state_home_name(env: Mapping[str, str] | None = None) -> str:
    """:func:`state_home` as a string."""
    return _base(env, "XDG_STATE_HOME", os.path.join(".local", "state"))
