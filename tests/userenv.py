"""What a test starts runs where users run: an environment built from an allow-list.

This machine's environment is not a user's: it sets ``PYTHONUNBUFFERED``,
``PYTHONDONTWRITEBYTECODE``, ``IS_SANDBOX`` and more, and a bug every user sees
(a served ``say`` that printed no receipt) passed every test while the tests
handed that environment on.  So the test process's own environment is cut to
what a user's shell has (:data:`ALLOWED`) before any test runs (:func:`scrub`,
called by tests/conftest.py): every command, server and seat a test starts
inherits that, or is given :func:`user_env` plus the variables the test sets
on purpose.  What the machine had is kept in :data:`MACHINE` for what is not a
user's run but the tests' own tooling: npm and pip installs, which need this
machine's certificates and proxies (:func:`tooling_env`), and the settings a run
of the tests is given (``CI``, ``FABRIKITO_RECORD_FIXTURES``: :func:`setting`).
tests/unit/test_user_env.py fails when anything outside the list reaches what a
test starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: What a user's shell has that fabrikito's commands, servers and seats may see.
ALLOWED = ("HOME", "PATH", "LANG", "TERM")

#: Set by the test runner itself in its own environment while a test runs (pytest's name for it): the one
#: variable a process a test starts inherits besides :data:`ALLOWED`.
RUNNER = ("PYTEST_CURRENT_TEST",)

#: Set on purpose for everything the tests start: the code under test (what the kits point every command at,
#: and what a command server or worker started from inside the test process inherits).
KIT = {"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}

#: The environment the tests were started with, before :func:`scrub`.
MACHINE: dict[str, str] = dict(os.environ)

#: Never handed on, not even to the tooling: a session's tmux and messaging context, fabrikito's own switches.
_NEVER = ("TMUX", "TMUX_PANE", "TEAM_ROLE", "CLAUDECODE", "CLAUDE_CODE_", "FABRIKITO")


def user_env(extra: Mapping[str, str] | None = None, **more: str) -> dict[str, str]:
    """The allow-listed variables as this process has them now (a test may have set ``PATH``, with another tmux
    release first), else as the machine had them; then ``extra`` and ``more`` (set on purpose)."""
    now = {name: os.environ[name] for name in ALLOWED if name in os.environ}
    env = {**{name: MACHINE[name] for name in ALLOWED if name in MACHINE}, **now}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(extra or {})
    env.update(more)
    return env


def leaks(env: Mapping[str, str], on_purpose: Mapping[str, str] | frozenset[str] = frozenset()) -> list[str]:
    """The names in ``env`` that are neither allowed, nor the runner's or the kit's, nor set on purpose."""
    return sorted(name for name in env if name not in (*ALLOWED, *RUNNER, *KIT) and name not in on_purpose)


def environ_of(pid: int) -> dict[str, str]:
    """The environment process ``pid`` was started with (``/proc/<pid>/environ``)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().split(b"\0")
    return dict(os.fsdecode(e).partition("=")[::2] for e in entries if e)


def scrub() -> None:
    """Cut this process's environment to :func:`user_env` (what everything it starts then inherits): Python's
    ``os.environ`` and the C library's, which what this process loaded can set behind it (GNU readline, which
    pytest imports, sets ``COLUMNS`` and ``LINES`` there), with :data:`KIT` set."""
    wanted = user_env(KIT)
    for name in list(os.environ):
        if name not in wanted:
            del os.environ[name]
    for name in _c_environ():
        if name not in wanted:
            os.unsetenv(name)
    os.environ.update(wanted)


def _c_environ() -> list[str]:
    """The names in the C library's environment (what a program started without an environment gets)."""
    import ctypes

    found = []
    entries = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
    at = 0
    while entries[at] is not None:
        found.append(os.fsdecode(entries[at] or b"").partition("=")[0])
        at += 1
    return found


def tooling_env() -> dict[str, str]:
    """For the tests' installs (npm, pip): the machine's environment less fabrikito's and tmux's context."""
    return {name: value for name, value in MACHINE.items() if not name.startswith(_NEVER)}


def setting(name: str, default: str = "") -> str:
    """A setting the run of the tests was given (``CI``, ``FABRIKITO_RECORD_FIXTURES``)."""
    return MACHINE.get(name, default)
