"""Keeping the team's append-only logs bounded: rotate each past the team file's ``log_max_size``.

Run by whichever of the team's helpers is running (the delivery worker each
round, the command server at each of its checks); both may run it at once, as
:func:`fabrikito.base.rotate.rotate` takes its lock and looks at the size again
under it.  One ``lstat`` per log when nothing is due.  The files:
``messages.log`` and ``say-refusals.log`` (and any a later helper adds to
:data:`LOGS`), each keeping ``log_keep`` old generations.
"""

from __future__ import annotations

import os

from fabrikito import TYPE_CHECKING
from fabrikito.base import rotate

if TYPE_CHECKING:
    from fabrikito.team.teamfile import Team

#: The append-only line files of a team's state directory that rotate.
LOGS = ("messages.log", "say-refusals.log")


def upkeep(team: Team) -> list[str]:
    """Rotate what is due; the names rotated.  Never raises: a failure is reported as ``name: why``."""
    done = []
    for name in LOGS:
        path = os.path.join(team.state_dir, name)
        try:
            if rotate.rotate(path, max_size=team.log_max_size, keep=team.log_keep):
                done.append(name)
        except OSError as exc:
            done.append(f"{name}: not rotated ({exc})")
    return done
