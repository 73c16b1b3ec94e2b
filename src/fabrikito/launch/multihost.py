"""``up``, ``down`` and ``status`` for a team whose seats run on more than one host.

The team's machine (the *origin*, where the team file is) does its own seats
as for any team, and each other host's over ssh (:mod:`fabrikito.base.ssh`),
all hosts at once, each through ``fabrikito _host`` there
(:mod:`fabrikito.launch.hostside`):

* ``up``: connect (an unknown or changed host key, a refused login: the
  host's seats fail with what to do), check the host's fabrikito is this
  release (``_host version``; missing or different: how to install it), copy
  the team file and the shared prompt (``_host put``), then ``_host up`` for
  the seats there, its progress lines shown with the host's name;
* ``down``: ``_host down`` on every host; for the whole team, each host then
  ends the ssh connections it opened (to this machine, to other hosts), and
  this machine ends its own;
* ``status``: ``_host status`` on every host within :data:`STATUS_TIMEOUT`
  seconds; the seats of a host that does not answer are *unreachable*, with
  ssh's reason.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fabrikito import __version__
from fabrikito.base.errors import FabrikitoError
from fabrikito.base.ssh import HostError, Problem
from fabrikito.launch import status
from fabrikito.team import hosts
from fabrikito.team.teamfile import Seat, Team

STATUS_TIMEOUT = 5.0
PREPARE_TIMEOUT = 30.0
DOWN_TIMEOUT = 60.0


def remote_hosts(team: Team) -> dict[str, list[Seat]]:
    """The other hosts of a team run from its own machine, with their seats."""
    return hosts.elsewhere(team, hosts.here_of(team))


def check_version(team: Team, dest: str) -> None:
    """Raise :class:`HostError` unless ``dest`` runs this very release of fabrikito."""
    from fabrikito.base.ssh import NOT_FOUND
    from fabrikito.delivery.route import not_installed

    answer = hosts.host(team, dest).run(["_host", "version"], timeout=PREPARE_TIMEOUT)
    if answer.code == NOT_FOUND:
        raise HostError(dest, Problem.NOT_INSTALLED, not_installed(dest, answer.err).partition(": ")[2])
    there = answer.out.decode("utf-8", "replace").strip()
    if answer.code != 0 or there != f"fabrikito {__version__}":
        shown = there or answer.err.strip() or f"exit status {answer.code}"
        raise HostError(
            dest,
            Problem.NOT_INSTALLED,
            f"it runs {shown!r}, and this machine fabrikito {__version__}: install the same release there "
            f"(uv tool install fabrikito=={__version__}, or pipx), then run up again",
        )


def copy_team(team: Team, dest: str) -> None:
    """The team file and the shared prompt, to the host's copy of the team."""

    prompt = None
    if team.shared_prompt is not None and team.shared_prompt.is_file():
        prompt = team.shared_prompt.read_text(encoding="utf-8")
    from fabrikito.launch.seatfiles import say_command
    from fabrikito.team import routekeys

    data = json.dumps(
        {
            "team_toml": team.path.read_text(encoding="utf-8"),
            "prompt": prompt,
            "origin_team": str(team.path),
            "origin_command": say_command(),
            "peers": {routekeys.ORIGIN: routekeys.digest(routekeys.secret(team))},
        }
    ).encode()
    argv = ["_host", "put", team.name, "--host", dest]
    answer = hosts.host(team, dest).run(argv, input=data, timeout=PREPARE_TIMEOUT)
    try:
        if answer.code != 0:
            raise ValueError(answer.err.strip() or f"exit status {answer.code}")
        routekeys.add_peers(team, {dest: str(json.loads(answer.out)["secret_hash"])})
    except (ValueError, KeyError, TypeError) as exc:
        raise HostError(dest, Problem.NOT_INSTALLED, f"the team could not be copied there: {exc}") from None


def hand_round(team: Team, dests: Sequence[str]) -> None:
    """Every host gets the other hosts' secret hashes (for a say from one host to another)."""
    from fabrikito.team import routekeys

    if len(dests) < 2:
        return
    table = json.dumps(routekeys.peers(team)).encode()
    for dest in dests:
        try:
            hosts.host(team, dest).run(["_host", "peers", team.name], input=table, timeout=PREPARE_TIMEOUT)
        except HostError:
            pass  # a say from another host to this one is refused, saying to run up again


def up(
    team: Team, roles: Sequence[str] | None, *, out: Callable[[str], None], timeout: float, resume: bool | None = None
) -> dict[str, tuple[Seat, str]]:
    """Bring up the seats on every other host (``resume``: with ``--resume``); returns the seats that failed,
    with why."""

    failed: dict[str, tuple[Seat, str]] = {}
    lock = threading.Lock()

    def one(dest: str, seats: list[Seat]) -> None:
        def say(text: str) -> None:
            with lock:
                out(f"[{dest}] {text}")

        chosen = [s.role for s in seats]
        try:
            check_version(team, dest)
            copy_team(team, dest)
            say(f"fabrikito {__version__} there; the team file and shared prompt copied")
            argv = ["_host", "up", team.name, "--timeout", f"{timeout:g}", *(["--resume"] if resume else []), *chosen]
            lines = _Lines(say)
            answer = hosts.host(team, dest).run(argv, timeout=timeout + 120, on_out=lines.feed)
            lines.feed(b"\n")
        except (HostError, OSError) as exc:
            why = exc.message if isinstance(exc, HostError) else str(exc)
            say(f"FAILED: {why}")
            with lock:
                failed.update({s.role: (s, why) for s in seats})
            return
        if answer.code != 0:
            said = answer.err.strip()
            if said:
                say(said)
            with lock:
                for s in seats:
                    if f"{s.role} did not come up" in answer.out.decode("utf-8", "replace") or said:
                        failed[s.role] = (s, said or "it did not come up (see above)")

    by_host = {dest: [s for s in seats if not roles or s.role in roles] for dest, seats in remote_hosts(team).items()}
    by_host = {d: s for d, s in by_host.items() if s}
    if by_host:
        with ThreadPoolExecutor(max_workers=len(by_host), thread_name_prefix="host-up") as pool:
            for f in [pool.submit(one, d, s) for d, s in by_host.items()]:
                f.result()
        hand_round(team, [d for d in by_host if not any(s.role in failed for s in by_host[d])])
    return failed


def _start_watcher(team: Team, out: Callable[[str], None]) -> None:
    from fabrikito.launch import watcherproc

    try:
        started = watcherproc.start_for_up(team)
    except (OSError, FabrikitoError) as exc:
        out(f"the watcher could not be started ({exc}): {watcherproc.UP_HELPER[2]}")
        return
    if started is not None:
        out("watcher: started" if started else "watcher: already running")


class _Lines:
    """Bytes as they come from a host, shown line by line."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self.show = show
        self.pending = b""

    def feed(self, block: bytes) -> None:
        *whole, self.pending = (self.pending + block).split(b"\n")
        for line in whole:
            if line:
                self.show(line.decode("utf-8", "replace"))


def down(team: Team, roles: Sequence[str] | None, *, out: Callable[[str], None]) -> int:
    """Stop the seats on every other host; 1 when a host could not be reached or failed."""

    code = 0

    def one(dest: str, seats: list[Seat]) -> tuple[str, int, str]:
        chosen = [s.role for s in seats if not roles or s.role in roles]
        if not chosen:
            return dest, 0, ""
        close = [] if roles else ["--close"]  # the whole team: the host ends its own ssh connections too
        try:
            answer = hosts.host(team, dest).run(["_host", "down", team.name, *close, *chosen], timeout=DOWN_TIMEOUT)
        except HostError as exc:
            return dest, 1, f"FAILED: {exc.message}"
        text = answer.out.decode("utf-8", "replace") + answer.err
        return dest, 0 if answer.code == 0 else 1, text.strip()

    by_host = remote_hosts(team)
    if not by_host:
        return 0
    with ThreadPoolExecutor(max_workers=len(by_host), thread_name_prefix="host-down") as pool:
        for dest, result, text in pool.map(lambda item: one(*item), by_host.items()):
            code = max(code, result)
            for line in text.splitlines():
                out(f"[{dest}] {line}")
    return code


def collect(team: Team, *, screens: bool = True) -> status.Status:
    """``status`` of every seat: this machine's read here, each host's over ssh, in parallel."""
    from fabrikito.base.values import replace

    by_host = remote_hosts(team)
    with ThreadPoolExecutor(max_workers=len(by_host) or 1, thread_name_prefix="host-status") as pool:
        futures = {dest: pool.submit(_host_status, team, dest, seats) for dest, seats in by_host.items()}
        here = status.collect(hosts.local_team(team, hosts.here_of(team)), screens=screens)
        found = {s.role: s for s in here.seats}
        for future in futures.values():
            found.update({s.role: s for s in future.result()})
    seats = tuple(found[s.role] for s in team.seats if s.role in found)
    return replace(here, team=team, seats=seats)


def _host_status(team: Team, dest: str, seats: list[Seat]) -> list[status.SeatStatus]:

    try:
        answer = hosts.host(team, dest).run(["_host", "status", team.name], timeout=STATUS_TIMEOUT)
        if answer.code != 0:
            raise FabrikitoError(answer.err.strip() or f"exit status {answer.code}")
        rows: dict[str, dict[str, Any]] = {r["role"]: r for r in json.loads(answer.out)["seats"]}
    except HostError as exc:
        return [_unreachable(seat, dest, exc.reason) for seat in seats]
    except (FabrikitoError, ValueError, KeyError, TypeError) as exc:
        return [_unreachable(seat, dest, f"fabrikito there did not answer: {exc}") for seat in seats]
    result = []
    for seat in seats:
        row = rows.get(seat.role)
        if row is None:
            result.append(_unreachable(seat, dest, "never brought up on that host", state=status.SeatState.DOWN))
            continue
        result.append(
            status.SeatStatus(
                role=seat.role,
                session=seat.session,
                pane=row.get("pane"),
                state=status.SeatState(row["state"]),
                detail=str(row.get("detail") or ""),
                permission_class=str(row.get("class")),
                last_to=row.get("last_to"),
                last_from=row.get("last_from"),
                pid=row.get("pid"),
                release=row.get("release"),
                qualified=row.get("qualified"),
                host=dest,
                conversation=row.get("conversation"),  # the record its host keeps
                restarts=int(row.get("restarts") or 0),
            )
        )
    return result


def _unreachable(
    seat: Seat, dest: str, why: str, *, state: status.SeatState = status.SeatState.UNREACHABLE
) -> status.SeatStatus:
    return status.SeatStatus(
        role=seat.role,
        session=seat.session,
        pane=None,
        state=state,
        detail=why,
        permission_class=seat.permission_class.value,
        last_to=None,
        last_from=None,
        host=dest,
    )


def _split(team: Team, roles: Sequence[str] | None) -> tuple[Team, list[str] | None, bool]:
    """This machine's part of the team, the roles asked of it, and whether any seat here was asked for."""
    from fabrikito.base.errors import UsageError

    unknown = [r for r in roles or () if team.seat(r) is None]
    if unknown:
        raise UsageError(f"no seat {', '.join(unknown)} in team {team.name} (seats: {', '.join(team.roles)})")
    local = hosts.local_team(team, hosts.here_of(team))
    mine = [r for r in roles or () if local.seat(r) is not None]
    wanted = bool(local.seats) and (not roles or bool(mine))
    return local, mine or None, wanted


def run_up(
    team: Team, roles: Sequence[str] | None, *, out: Callable[[str], None], timeout: float, resume: bool | None = None
) -> int:
    """``up`` for a team across hosts: this machine's seats and every host's at once, then the status table.
    ``resume`` as for :func:`fabrikito.launch.lifecycle.up`: each host resumes its own seats from the
    conversation records it keeps (``_host up --resume``)."""
    from fabrikito.launch import lifecycle

    local, mine, wanted = _split(team, roles)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hosts") as pool:
        elsewhere = pool.submit(up, team, roles, out=out, timeout=timeout, resume=resume)
        # The whole team, so each seat's roster lists every seat; only this machine's are started.
        here = mine or list(local.roles)
        result = lifecycle.up(team, here, out=out, timeout=timeout, resume=resume) if wanted else None
        failed = elsewhere.result()
    if not local.seats:  # no seat here: this machine's watcher still reads the hosts' (lifecycle.up starts it else)
        _start_watcher(team, out)
    out("")
    out(status.render(collect(team)))
    for r in result.failed if result is not None else ():
        out(f"\n{r.role} did not come up: {r.detail}")
    for role, (_, why) in failed.items():
        out(f"\n{role} did not come up: {why}")
    return 1 if failed or (result is not None and result.exit_code) else 0


def run_down(team: Team, roles: Sequence[str] | None, *, out: Callable[[str], None]) -> int:
    """``down`` for a team across hosts: every host's seats, then this machine's."""
    from fabrikito.launch import teardown

    local, mine, wanted = _split(team, roles)
    if not roles:  # this machine's watcher first: the hosts' seats going down are not news to tell
        from fabrikito.launch import watcherproc

        said = watcherproc.stop(team)
        if said is not None:
            out(said)
    code = down(team, roles, out=out)
    if wanted:
        code = max(code, teardown.down(local, mine, out=out))
    if not roles:  # the whole team: every ssh connection it opened from here ends (the hosts end theirs)
        for dest in hosts.end_connections(team, hosts.here_of(team)):
            out(f"ended the ssh connection to {dest}")
    return code
