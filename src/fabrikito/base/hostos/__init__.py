"""The host system: every call only Linux has, with the portable one macOS runs beside it.

Nothing outside this package reads ``/proc`` or uses a Linux-only call
(``SO_PEERCRED``, ``memfd_create``, ``sched_*``...); tests/unit/test_hostos.py
fails when something does.  Two implementations answer the same questions:

* :mod:`~fabrikito.base.hostos.linux`: ``/proc``, ``SO_PEERCRED``, ``memfd_create``;
* :mod:`~fabrikito.base.hostos.portable`: psutil, ``LOCAL_PEERCRED`` and
  ``LOCAL_PEERPID``, an unlinked 0600 file.

Linux runs the first; every other system the second.  ``FABRIKITO_PORTABLE=1``
makes Linux run the second (``0`` or unset: the system decides), so the code a
Mac runs runs on every test run here (scripts/test runs the unit tier and the
``say``, queue, ``up`` and inbox live modules with it set).  The choice is made once, at
import, from this process's environment; the names below are the chosen
implementation's own functions (no call through a wrapper).
"""

from __future__ import annotations

import os
import sys

from fabrikito.base.hostos.kinds import PeerCred, ProcessGone, ProcessUnreadable, ProcInfo, Stat

__all__ = [
    "MAX_SOCKET_PATH",
    "NAME",
    "PORTABLE",
    "PORTABLE_ENV",
    "SHORT_ROOT",
    "PeerCred",
    "ProcInfo",
    "ProcessGone",
    "ProcessUnreadable",
    "Stat",
    "alive",
    "children_of",
    "cmdline",
    "cwd",
    "environ",
    "environ_values",
    "exe_name",
    "exe_path",
    "foreground_group",
    "info",
    "lock_file",
    "parent",
    "peer_cred",
    "pid_domain",
    "pid_domain_matches",
    "pids",
    "socket_owner",
    "stat",
]

PORTABLE_ENV = "FABRIKITO_PORTABLE"


def portable_wanted(env: dict[str, str] | os._Environ[str], platform: str) -> bool:
    """Whether the portable implementation runs: off Linux always; on Linux when ``FABRIKITO_PORTABLE=1``."""
    value = env.get(PORTABLE_ENV, "")
    if value not in ("", "0", "1"):
        sys.stderr.write(f"fabrikito: {PORTABLE_ENV}={value!r} is not 0 or 1: the system decides\n")
    return value == "1" or not platform.startswith("linux")


PORTABLE = portable_wanted(os.environ, sys.platform)

# The same names from either module, listed twice so mypy checks that each module's match the other's.
if PORTABLE:
    from fabrikito.base.hostos.portable import (
        MAX_SOCKET_PATH,
        NAME,
        SHORT_ROOT,
        alive,
        children_of,
        cmdline,
        cwd,
        environ,
        environ_values,
        exe_name,
        exe_path,
        foreground_group,
        info,
        lock_file,
        parent,
        peer_cred,
        pid_domain,
        pid_domain_matches,
        pids,
        socket_owner,
        stat,
    )
else:
    from fabrikito.base.hostos.linux import (
        MAX_SOCKET_PATH,
        NAME,
        SHORT_ROOT,
        alive,
        children_of,
        cmdline,
        cwd,
        environ,
        environ_values,
        exe_name,
        exe_path,
        foreground_group,
        info,
        lock_file,
        parent,
        peer_cred,
        pid_domain,
        pid_domain_matches,
        pids,
        socket_owner,
        stat,
    )
