"""``fabrikito log`` for a team on more than one host: every host's log, read at once, merged by time.

Each host keeps its own ``messages.log`` (its seats' hooks, and every ``say``
that typed there or was sent from there).  This reads the others over ssh
(``fabrikito _host log`` through :mod:`fabrikito.base.ssh`, all hosts at once,
:data:`TIMEOUT` seconds each) and merges their lines with this machine's by
their time (the hosts' clocks and time zones are taken to agree).  A host that
does not answer is named with ssh's reason; its lines are left out.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from fabrikito.base.errors import FabrikitoError
from fabrikito.log.msglog import Foreign, Record, parse_line
from fabrikito.team import hosts
from fabrikito.team.teamfile import Seat, Team

TIMEOUT = 5.0

Line = tuple[int, Record | Foreign, str | None]


def merged(team: Team, local: list[tuple[int, Record | Foreign]]) -> tuple[list[Line], list[str]]:
    """This machine's lines (``local``) and every other host's, by time; and the hosts that could not be read."""
    here = hosts.here_of(team)
    by_dest = hosts.elsewhere(team, here)
    sources: list[tuple[str | None, list[tuple[int, Record | Foreign]]]] = [(here, local)]
    problems: list[str] = []
    if by_dest:
        with ThreadPoolExecutor(max_workers=len(by_dest), thread_name_prefix="host-log") as pool:
            futures = {dest: pool.submit(_read, team, dest, seats[0]) for dest, seats in by_dest.items()}
            for dest, future in futures.items():
                try:
                    sources.append((dest, future.result()))
                except FabrikitoError as exc:
                    problems.append(f"host {dest}: its log could not be read: {exc.message}")
    keyed: list[tuple[str, int, int, Line]] = []
    for index, (where, items) in enumerate(sources):
        last = ""
        for number, item in items:
            if isinstance(item, Record):
                last = item.time
            keyed.append((last, index, number, (number, item, where)))
    keyed.sort(key=lambda k: k[:3])
    return [k[3] for k in keyed], problems


def _read(team: Team, dest: str, seat: Seat) -> list[tuple[int, Record | Foreign]]:
    ref, program = hosts.command_for(team, seat)
    answer = hosts.host(team, dest).run(["_host", "log", ref], program=program, timeout=TIMEOUT)
    if answer.code != 0:
        raise FabrikitoError(answer.err.strip() or f"exit status {answer.code}")
    return [(n, parse_line(line)) for n, line in enumerate(answer.out.splitlines(keepends=True), start=1)]
