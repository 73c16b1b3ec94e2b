"""``fabrikito queue``: what waits for each seat, and why; ``queue drop ID``; the queue's part of ``status``.

:mod:`fabrikito.delivery.queue` is imported only when the team has a queue
folder: ``status`` runs on every look at the team, and a team that never
queued a message pays only for the worker's state (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from fabrikito import TYPE_CHECKING
from fabrikito.base import durations
from fabrikito.base.errors import UsageError
from fabrikito.base.values import frozen
from fabrikito.delivery import workerstate
from fabrikito.team.teamfile import Team

if TYPE_CHECKING:
    from typing import Any

    from fabrikito.delivery.queue import Message

JSON_VERSION = 1
NO_WORKER = "the delivery worker is not running: ./fabrikito up (or another say --queue) starts it"


@frozen
class SeatQueue:
    role: str
    waiting: int
    oldest: float | None  # seconds the oldest waiting message has waited
    why: str  # why the oldest waits


@frozen
class Overview:
    worker: workerstate.Info
    seats: tuple[SeatQueue, ...]
    messages: tuple[Message, ...]
    notices: tuple[str, ...]


def collect(team: Team, roles: list[str] | None = None, *, now: float | None = None) -> Overview:
    now = time.time() if now is None else now
    info = workerstate.read_info(team)
    if not os.path.lexists(workerstate.queue_dir(team)):  # nothing was ever queued (a link is still looked at)
        return Overview(info, (), (), ())
    from fabrikito.delivery import queue
    from fabrikito.delivery.queue import State

    found = queue.scan(team, roles)
    seats = []
    notices = []
    messages: list[Message] = []
    for role in roles if roles is not None else list(team.roles):
        held = found.messages.get(role, [])
        messages += held
        waiting = found.waiting(role)
        if waiting:
            seats.append(SeatQueue(role, len(waiting), now - waiting[0].queued, why_waits(info, waiting[0])))
        for msg in held:
            if msg.state in (State.UNCERTAIN, State.EXPIRED, State.HELD):
                notices.append(notice_line(msg))
    for path, why in found.damaged:
        notices.append(f"NOTICE queue: {path} does not belong in the queue ({why}); the worker sets it aside")
    aside = queue.aside_dir(team)
    try:
        set_aside = sorted(os.listdir(aside))
    except OSError:
        set_aside = []
    if set_aside:
        notices.append(
            f"NOTICE queue: {len(set_aside)} damaged or foreign file(s) were set aside in {aside}: "
            "look at them, then remove them"
        )
    return Overview(info, tuple(seats), tuple(messages), tuple(notices))


def why_waits(info: workerstate.Info, msg: Message) -> str:
    from fabrikito.delivery.queue import State

    if msg.state is State.TYPING:
        return "being typed now"
    if msg.state is State.HELD:
        return f"held: {msg.reason}; ./fabrikito queue release {msg.id} lets it be typed, drop refuses it"
    if msg.state is not State.PENDING:
        return msg.reason
    if not info.running:
        return NO_WORKER
    return info.waits.get(msg.role) or msg.reason


def notice_line(msg: Message) -> str:
    from fabrikito.delivery.queue import State

    if msg.state is State.HELD:
        return (
            f"NOTICE {msg.role}: message {msg.id} from {msg.sender} is held ({msg.reason}): "
            f"./fabrikito queue release {msg.id} lets it be typed, ./fabrikito queue drop {msg.id} refuses it"
        )
    if msg.state is State.UNCERTAIN:
        what = (
            f"was pasted but its fate is unknown ({msg.reason}); it is never pasted again: check the seat "
            f"(./fabrikito flush {msg.role} for a fragment left in its box), then"
        )
    else:
        what = "expired before the seat was ready; nothing was typed: send it again if it still matters, then"
    return f"NOTICE {msg.role}: queued message {msg.id} from {msg.sender} {what} ./fabrikito queue drop {msg.id}"


def render(team: Team, view: Overview, *, now: float | None = None) -> str:
    from fabrikito.delivery import queue

    now = time.time() if now is None else now
    w = view.worker
    lines = [
        f"delivery worker: running (pid {w.pid})" if w.running else "delivery worker: not running",
    ]
    if not view.messages:
        lines.append("nothing queued")
    for msg in view.messages:
        live = (*queue.WAITING, queue.State.HELD)
        expiry = "" if msg.state not in live else f", expires in {durations.short(msg.expires - now)}"
        waited = durations.short(now - msg.queued)
        lines.append(f"{msg.id}  to {msg.role} from {msg.sender}  {msg.state.value}, waited {waited}{expiry}")
        lines.append(f"    {why_waits(w, msg)}")
    lines += view.notices
    del team
    return "\n".join(lines)


def to_json(team: Team, view: Overview, *, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    w = view.worker
    return {
        **team.json_header(JSON_VERSION),
        "worker": {"running": w.running, "pid": w.pid},
        "messages": [
            {
                "id": m.id,
                "to": m.role,
                "from": m.sender,
                "state": m.state.value,
                "age_seconds": round(now - m.queued, 3),
                "expires_in_seconds": round(m.expires - now, 3),
                "why": why_waits(w, m),
            }
            for m in view.messages
        ],
        "notices": list(view.notices),
    }


def run(team: Team, args: list[str], *, as_json: bool, by: str, out: Callable[[str], None]) -> int:
    import json

    from fabrikito.delivery import queue

    if args[:1] == ["drop"]:
        if len(args) != 2:
            raise UsageError("queue drop takes one id (see ./fabrikito queue)")
        msg = queue.drop(team, args[1], by=by)
        out(f"dropped {msg.id} (to {msg.role} from {msg.sender}, {msg.state.value}): it will not be typed")
        return 0
    if args[:1] == ["release"]:
        if len(args) != 2:
            raise UsageError("queue release takes one id (see ./fabrikito queue)")
        msg = queue.release(team, args[1], by=by)
        from fabrikito.delivery import worker

        worker.ensure_running(team)
        out(f"released {msg.id} (to {msg.role} from {msg.sender}): it is typed once the seat is ready")
        return 0
    if len(args) > 1:
        raise UsageError("queue takes at most one role (or: queue drop ID, queue release ID)")
    roles = None
    if args:
        if team.seat(args[0]) is None:
            raise UsageError(f"no seat '{args[0]}' in team {team.name} (seats: {', '.join(team.roles)})")
        roles = [args[0]]
    view = collect(team, roles)
    out(json.dumps(to_json(team, view), indent=2, ensure_ascii=False) if as_json else render(team, view))
    return 0
