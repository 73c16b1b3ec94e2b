"""Where fabrikito keeps per-user files: the XDG base directories, read when asked (never at import)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def _base(env: Mapping[str, str] | None, variable: str, default: str) -> Path:
    values = os.environ if env is None else env
    configured = values.get(variable, "")
    if configured and os.path.isabs(configured):
        return Path(configured)
    home = values.get("HOME") or os.path.expanduser("~")
    return Path(home, default)


def config_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/fabrikito`` (default ``~/.config/fabrikito``)."""
    return _base(env, "XDG_CONFIG_HOME", ".config") / "fabrikito"


def cache_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/fabrikito`` (default ``~/.cache/fabrikito``)."""
    return _base(env, "XDG_CACHE_HOME", ".cache") / "fabrikito"


def state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/fabrikito`` (default ``~/.local/state/fabrikito``)."""
    return _base(env, "XDG_STATE_HOME", os.path.join(".local", "state")) / "fabrikito"
