"""One round's reading of the team, as the set of conditions that need the owner.

A :class:`Condition` is keyed by what it is about (kind, seat, and a queued
message's id), so the same condition read again next round is the same key.
A condition with ``after`` is open only once it has lasted that long (a seat
busy, a box holding text, a message waiting): its ``since`` is when the thing
began as read (the registry's ``statusUpdatedAt``, the message's queue time),
or ``None`` when nothing says, and then the tracker counts from when it first
saw it.  The watcher answers nothing and types nothing: each detail says what
the owner can do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from fabrikito import TYPE_CHECKING
from fabrikito.base.values import frozen
from fabrikito.delivery.queueview import Overview
from fabrikito.launch.status import SeatState, SeatStatus, Status
from fabrikito.team.check import DIALOG_EXPIRY_DEFAULT, dialog_expiry
from fabrikito.team.teamfile import Seat
from fabrikito.team.watchconf import WatchConfig

if TYPE_CHECKING:
    from fabrikito.delivery.queue import Message

HELD_DIALOG = "Held message from another session"
HELD_LINE = re.compile(r"Held peer message — from (\S+)")
API_ERROR = re.compile(r"^● (API Error[^\n]*|.*\b(?:[Rr]ate limit|rate_limit|[Oo]verloaded)\b[^\n]*)")
RULE = "─" * 12
QUESTION_WAIT = 1.0  # how long a permission prompt is given to show its question before it is told without
SOCKET_PID = re.compile(r"/(\d+)\.sock\b")


@frozen
class Condition:
    key: str
    kind: str
    seat: str
    detail: str
    since: float | None = None  # when it began, when that can be read
    after: float = 0.0  # open once it has lasted this long


def conditions(found: Status, config: WatchConfig, now: float) -> dict[str, Condition]:
    """Every condition of the reading ``found``, by key."""
    screens: Mapping[str, str] = found.screens or {}
    out: dict[str, Condition] = {}
    by_pid = {s.pid: s.role for s in found.seats if s.pid is not None}
    for seat in found.seats:
        for c in _seat_conditions(seat, screens.get(seat.role), config, now, by_pid, found.team.seat(seat.role)):
            out[c.key] = c
    for notice in found.notices:
        c = Condition(
            f"notice {notice.role}",
            "notice",
            notice.role,
            f"{notice.count} sends were refused because its box holds text: attach and deal with the box "
            f"(./fabrikito flush {notice.role} if say left it there)",
            since=notice.last,
        )
        out[c.key] = c
    if found.queue is not None:
        for c in _queue_conditions(found.queue, config):
            out[c.key] = c
    return out


def _seat_conditions(
    seat: SeatStatus,
    screen: str | None,
    config: WatchConfig,
    now: float,
    by_pid: Mapping[int, str],
    team_seat: Seat | None,
) -> Iterator[Condition]:
    role, state = seat.role, seat.state
    if state is SeatState.DOWN:
        yield Condition(f"gone {role}", "gone", role, "its pane or session is gone: ./fabrikito up starts it again")
    elif state is SeatState.EXITED:
        yield Condition(f"exited {role}", "exited", role, "its agent exited: attach to read why, then ./fabrikito up")
    elif state is SeatState.NOT_AGENT:
        yield Condition(
            f"exited {role}", "not-agent", role, "its agent is not in the foreground (a shell?): attach and look"
        )
    elif state is SeatState.UNREACHABLE:
        yield Condition(f"unreachable {role}", "unreachable", role, f"its host does not answer: {seat.detail}")
    elif state is SeatState.WAITING:
        yield _dialog(seat, screen, now, by_pid, team_seat)
    elif state is SeatState.BUSY:
        yield Condition(
            f"busy-long {role}",
            "busy-long",
            role,
            "busy for a long time: attach to see whether it is stuck",
            since=seat.state_since,
            after=config.busy_after,
        )
    elif state is SeatState.BOX_TEXT:
        yield Condition(
            f"box-text {role}",
            "box-text",
            role,
            "its input box has held text for a long time: messages to it are refused or queued; "
            f"attach and submit or clear it (./fabrikito flush {role} if say left it there)",
            after=config.box_after,
        )
    if screen is not None and state in (SeatState.IDLE, SeatState.BOX_TEXT):
        error = api_error(screen)
        if error is not None:
            yield Condition(
                f"api-error {role}", "api-error", role, f"{error}: its turn ended on it; attach and try again"
            )


def held_expiry(seat: Seat | None) -> float | None:
    """The seat's ``dialogExpiry`` (read when a held dialog is on its screen: rare, so not cached)."""
    if seat is None:
        return DIALOG_EXPIRY_DEFAULT
    return dialog_expiry(seat)


def _dialog(
    seat: SeatStatus, screen: str | None, now: float, by_pid: Mapping[int, str], team_seat: Seat | None
) -> Condition:
    role = seat.role
    if screen is not None and HELD_DIALOG in screen:
        sender = HELD_LINE.search(screen)
        since = seat.state_since if seat.state_since is not None else now
        who = f" from {sender_name(sender.group(1), by_pid)}" if sender else ""
        expiry = held_expiry(team_seat)
        if expiry is None:
            when = "it never expires (dialogExpiry never) and waits for you: attach and choose to deliver it"
        else:
            left = max(0.0, expiry - (now - since))
            when = (
                f"it is dropped in about {_span(left)} (dialogExpiry {_span(expiry)}): attach and choose to "
                "deliver it, or it is lost"
            )
        return Condition(
            f"held-dialog {role}",
            "held-dialog",
            role,
            f"a message{who} is held at an approval dialog; {when}",
            since=seat.state_since,
        )
    if seat.detail == "permission prompt":
        asked = permission_question(screen) if screen is not None else None
        return Condition(
            f"permission {role}",
            "permission",
            role,
            f"a permission prompt waits{': ' + asked if asked else ''}: attach and answer it",
            # the registry can say so a frame before the screen shows what it asks: a second for that
            since=seat.state_since if asked else None,
            after=0.0 if asked else QUESTION_WAIT,
        )
    what = seat.detail or "a dialog"
    return Condition(
        f"dialog {role}", "dialog", role, f"waiting at {what}: attach and answer it", since=seat.state_since
    )


def _queue_conditions(view: Overview, config: WatchConfig) -> Iterator[Condition]:
    from fabrikito.delivery.queue import WAITING, State

    for msg in view.messages:
        if msg.state is State.EXPIRED:
            yield _queued(
                "queued-expired",
                msg,
                "expired before the seat was ready, nothing typed: send it again if it still matters, "
                f"then ./fabrikito queue drop {msg.id}",
                since=msg.expires,
            )
        elif msg.state is State.UNCERTAIN:
            what = f"was pasted but its fate is unknown ({msg.reason}): check the seat"
            yield _queued("queued-uncertain", msg, f"{what}, then ./fabrikito queue drop {msg.id}", since=msg.queued)
        elif msg.state is State.HELD:
            what = f"is held ({msg.reason}): ./fabrikito queue release {msg.id} or queue drop {msg.id}"
            yield _queued("queued-held", msg, what, since=msg.queued)
        elif msg.state in WAITING:
            what = f"has waited long: {msg.reason or 'the seat is not ready'}"
            yield _queued("queued-long", msg, what, since=msg.queued, after=config.queued_after)
    for line in view.notices:
        if line.startswith("NOTICE queue:"):
            yield Condition(f"notice queue {line}", "notice", "queue", line.removeprefix("NOTICE queue: "))


def _queued(kind: str, msg: Message, what: str, *, since: float, after: float = 0.0) -> Condition:
    """The condition ``kind`` of the queued message ``msg``: keyed by its id, about the seat it is for,
    its detail ``what`` said of it."""
    detail = f"queued message {msg.id} from {msg.sender} {what}"
    return Condition(f"{kind} {msg.id}", kind, msg.role, detail, since=since, after=after)


def sender_name(shown: str, by_pid: Mapping[int, str]) -> str:
    """The held message's sender as the dialog names it, or the seat whose agent listens on that socket
    (``uds:/tmp/cc-socks/<pid>.sock``)."""
    found = SOCKET_PID.search(shown)
    if found is not None and int(found.group(1)) in by_pid:
        return f"{by_pid[int(found.group(1))]} ({shown})"
    return shown


def transcript(screen: str) -> list[str]:
    """The screen's lines above the input box's top rule: what the agent printed last."""
    lines = screen.split("\n")
    for index in range(len(lines) - 1, 0, -1):
        if lines[index].startswith("❯") and RULE in lines[index - 1]:
            return lines[: index - 1]
    return lines


def api_error(screen: str) -> str | None:
    """The API error or rate limit the agent's last reply is, when it is one."""
    for line in reversed(transcript(screen)):
        stripped = line.rstrip()
        if stripped.startswith("❯"):
            return None  # a prompt after it: a later turn
        if stripped.startswith("●"):
            found = API_ERROR.match(stripped)
            return found.group(1)[:200] if found else None
    return None


def permission_question(screen: str) -> str | None:
    """What a permission prompt asks: its title and question (``Bash command · touch x · Do you want...``)."""
    lines = [line.strip() for line in screen.split("\n")]
    ask = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("Do you want to")), None)
    if ask is None:
        return None
    top = ask
    while top > 0 and RULE not in lines[top - 1]:
        top -= 1
    shown = [line[:120] for line in lines[top : ask + 1] if _worded(line) and not line.startswith("Tip:")]
    return " · ".join(shown)


def _worded(line: str) -> bool:
    """A line with words in it (not empty, not a rule of box-drawing characters)."""
    return any(ch.isalnum() for ch in line)


def _span(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"
