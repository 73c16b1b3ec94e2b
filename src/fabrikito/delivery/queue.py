"""The delivery queue: messages that wait for a seat's box, as files under ``.state/<team>/queue/``.

``say --queue`` queues a message a seat refused for its state (text in the
box, a dialog, copy mode, another ``say`` holding the lock, a seat down or
busy starting): one file per message in ``queue/<role>/`` (0700 directories,
0600 files, written to a temporary file and renamed, never through a link).
The delivery worker (:mod:`fabrikito.delivery.worker`) types them, oldest
first, through the same engine as ``say``.

A message's file carries its state, and the state is what makes a crash safe
(docs/decisions/0003-queued-delivery.md has the reasoning):

``pending``    waits; the worker may type it.
``typing``     written (and synced) right before the first paste; a worker that
               starts and finds one cannot know whether it went, so it marks it
               ``uncertain`` and never pastes it again.
``delivered``  the Enter landed; the log line is written, then the file removed.
``uncertain``  pasted, fate unknown (or typed and not submitted): kept for
               ``status`` until dropped; a fragment in the box is for ``flush``.
``expired``    its time ran out before its seat was ready: nothing was typed.
``held``       an inbox held it for the owner (:mod:`fabrikito.inbox.gate`): never
               typed until ``queue release`` makes it ``pending``; it expires
               like a pending one.

Enqueueing, dropping and the worker's ``pending`` → ``typing`` step take the
seat's queue lock (``queue/<role>/.lock``), so a message is never typed after
it was dropped, and the cap of 50 waiting messages a seat holds.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

from fabrikito import TYPE_CHECKING
from fabrikito.base import jsonfile, statedir, values
from fabrikito.base.errors import FabrikitoError, StateFileError, UsageError
from fabrikito.base.values import frozen
from fabrikito.delivery import workerstate
from fabrikito.log import msglog
from fabrikito.team.teamfile import Team

if TYPE_CHECKING:
    from fabrikito.delivery.engine import Delivery

#: The fields of a message's file, all of them and no others (the schema :func:`encode` writes).
FIELDS = frozenset({"format", "id", "role", "sender", "text", "queued", "expires", "state", "reason"})
MAX_WAITING = 50
DEFAULT_EXPIRE = 30 * 60.0
MAX_EXPIRE = 24 * 3600.0
FORMAT = 1
ASIDE = "aside"
LOCK = ".lock"
NAME = re.compile(r"(\d{19})-([0-9a-f]{8})\.json")
ID = re.compile(r"([a-z][a-z0-9_]*)-([0-9a-f]{8})")
STALE_TMP = 60.0


class State(StrEnum):
    PENDING = "pending"
    TYPING = "typing"
    DELIVERED = "delivered"
    UNCERTAIN = "uncertain"
    EXPIRED = "expired"
    HELD = "held"


WAITING = (State.PENDING, State.TYPING)


class QueueFull(FabrikitoError):
    """The seat already has 50 messages waiting."""


class Damaged(Exception):
    """A file in the queue that is not a message this queue wrote (its text says why)."""


@frozen
class Message:
    id: str
    role: str
    sender: str
    text: str
    queued: float  # epoch seconds
    expires: float
    state: State
    reason: str  # why it was queued (the refusal), or what became of it
    path: Path

    def moved(self, state: State, reason: str | None = None) -> Message:
        return values.replace(self, state=state, reason=self.reason if reason is None else reason)


@frozen
class Scan:
    """What the queue holds: each seat's messages oldest first, and what does not belong there."""

    messages: dict[str, list[Message]]
    damaged: list[tuple[Path, str]]

    def waiting(self, role: str) -> list[Message]:
        return [m for m in self.messages.get(role, []) if m.state in WAITING]


# -- places -----------------------------------------------------------------------


def queue_dir(team: Team) -> Path:
    return workerstate.queue_dir(team)


def seat_dir(team: Team, role: str) -> Path:
    return queue_dir(team) / role


def aside_dir(team: Team) -> Path:
    return queue_dir(team) / ASIDE


def ensure_seat_dir(team: Team, role: str) -> Path:
    statedir.ensure_state_dir(team.base_dir, team.name)
    statedir.ensure_dir(queue_dir(team))
    return statedir.ensure_dir(seat_dir(team, role))


def sync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` survive a power cut."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def seat_queue_lock(team: Team, role: str) -> Iterator[None]:
    fd = statedir.open_plain(ensure_seat_dir(team, role) / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- one file -----------------------------------------------------------------------


def encode(msg: Message) -> bytes:
    record = {
        "format": FORMAT,
        "id": msg.id,
        "role": msg.role,
        "sender": msg.sender,
        "text": msg.text,
        "queued": msg.queued,
        "expires": msg.expires,
        "state": msg.state.value,
        "reason": msg.reason,
    }
    return json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogateescape")


def decode(path: Path, data: bytes, team: Team, role: str) -> Message:
    """The message in ``data`` (the file ``path`` of seat ``role``), or :class:`Damaged`.

    Only what :func:`encode` writes is a message: its fields and no others, each of its kind, a sender
    fabrikito gives (:func:`fabrikito.delivery.identity.message_sender_ok`), a text ``say`` would type and a
    reason with nothing a terminal acts on.
    """
    from fabrikito.base.text import refusal_for
    from fabrikito.delivery.identity import message_sender_ok

    match = NAME.fullmatch(path.name)
    if match is None:
        raise Damaged("its name is not one the queue gives")
    try:
        record = json.loads(data.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        raise Damaged("it is not the queue's JSON") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT or type(record.get("format")) is not int:
        raise Damaged("it is not a message in the queue's format")
    if set(record) != FIELDS:
        odd = sorted(set(record) ^ FIELDS)
        raise Damaged(f"its fields are not the queue's ({', '.join(map(str, odd))})")
    try:
        msg = Message(
            id=jsonfile.string(record, "id"),
            role=jsonfile.string(record, "role"),
            sender=jsonfile.string(record, "sender"),
            text=jsonfile.string(record, "text"),
            queued=_time(record, "queued"),
            expires=_time(record, "expires"),
            state=State(record["state"]),
            reason=jsonfile.string(record, "reason"),
            path=path,
        )
    except (KeyError, TypeError, ValueError):
        raise Damaged("a field is missing or of the wrong kind") from None
    if msg.role != role or msg.id != f"{role}-{match.group(2)}":
        raise Damaged(f"it names another seat or id ({msg.role}, {msg.id})")
    if not message_sender_ok(team, msg.sender):
        raise Damaged(
            f"its sender {msg.sender!r} is not a role id of the team, owner or one of fabrikito's own origins"
        )
    why = refusal_for(msg.text) if msg.text.strip() else "it is empty"
    if why is None and refusal_for(msg.reason) is not None:
        why = "its reason holds characters a terminal acts on"
    if why is not None:
        raise Damaged(f"its text is not one fabrikito queues ({why})")
    return msg


def _time(record: dict[str, object], key: str) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(key)
    return float(value)


def write(msg: Message) -> None:
    """Rewrite the message's file atomically and durably (file and directory synced)."""
    statedir.write_atomic(msg.path, encode(msg))
    sync_dir(msg.path.parent)


def remove(msg: Message) -> None:
    statedir.remove_quietly(msg.path)
    sync_dir(msg.path.parent)


def read(path: Path, team: Team, role: str) -> Message:
    """Read one message file: :class:`Damaged` for anything but a file fabrikito wrote: a plain file with one
    name, this user's, mode 0600, holding a message (:func:`decode`)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        raise Damaged("it is not a plain file with one name (a link, a FIFO or a directory)")
    if st.st_uid != os.getuid():
        raise Damaged(f"it belongs to another user (uid {st.st_uid})")
    if stat.S_IMODE(st.st_mode) != statedir.FILE_MODE:
        raise Damaged(f"its mode is {stat.S_IMODE(st.st_mode):o}, and fabrikito writes its queue files 600")
    try:
        data = statedir.read_plain(path)
    except StateFileError as exc:
        raise Damaged(exc.message) from None
    if data is None:
        raise FileNotFoundError(path)
    return decode(path, data, team, role)


# -- reading the whole queue -------------------------------------------------------


def scan(team: Team, roles: list[str] | None = None) -> Scan:
    """Every message, per seat oldest first; damaged and foreign entries listed, not touched."""
    messages: dict[str, list[Message]] = {}
    damaged: list[tuple[Path, str]] = []
    top = queue_dir(team)
    try:
        if not stat.S_ISDIR(os.lstat(top).st_mode):
            return Scan(messages, [(top, "the queue must be a real directory (this is a link or a file)")])
        entries = sorted(os.listdir(top))
    except (FileNotFoundError, NotADirectoryError):
        return Scan(messages, damaged)
    known = set(team.roles)
    for entry in entries:
        path = top / entry
        if entry == ASIDE:
            continue
        if entry not in known:
            damaged.append((path, f"no seat '{entry}' in the team"))
            continue
        if roles is not None and entry not in roles:
            continue
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            damaged.append((path, "a seat's queue must be a directory (this is a file or a link)"))
            continue
        try:
            messages[entry] = _scan_seat(team, path, entry, damaged)
        except OSError as exc:
            damaged.append((path, f"it cannot be read ({exc.strerror or exc})"))
    return Scan(messages, damaged)


def _scan_seat(team: Team, path: Path, role: str, damaged: list[tuple[Path, str]]) -> list[Message]:
    found = []
    now = time.time()
    for name in sorted(os.listdir(path)):
        if name == LOCK:
            continue
        file = path / name
        if name.startswith(".") and name.endswith(".tmp"):
            # a rewrite a crash interrupted: the message's own file is intact
            _remove_stale_tmp(file, now)
            continue
        try:
            found.append(read(file, team, role))
        except FileNotFoundError:
            continue
        except Damaged as exc:
            damaged.append((file, str(exc)))
    return found


def _remove_stale_tmp(path: Path, now: float) -> None:
    try:
        if now - os.lstat(path).st_mtime > STALE_TMP:
            os.unlink(path)
    except OSError:
        pass


def find(team: Team, msg_id: str) -> Message | None:
    match = ID.fullmatch(msg_id)
    if match is None or team.seat(match.group(1)) is None:
        return None
    role = match.group(1)
    for msg in scan(team, [role]).messages.get(role, []):
        if msg.id == msg_id:
            return msg
    return None


# -- changes ------------------------------------------------------------------------


def enqueue(
    team: Team, role: str, sender: str, text: str, *, expire: float, reason: str, state: State = State.PENDING
) -> Message:
    """Add a message at the end of ``role``'s queue; :class:`QueueFull` at 50 waiting (or 50 held).

    ``sender`` must be one fabrikito gives (:func:`fabrikito.delivery.identity.message_sender_ok`): a file
    with any other would be set aside unread, so none is written.
    """
    from fabrikito.delivery.identity import message_sender_ok

    if not message_sender_ok(team, sender):
        raise UsageError(f"{sender!r} is no sender of team {team.name}: nothing was queued")
    with seat_queue_lock(team, role):
        held = scan(team, [role]).messages.get(role, [])
        alike = (state,) if state is State.HELD else WAITING
        if len([m for m in held if m.state in alike]) >= MAX_WAITING:
            what = "held" if state is State.HELD else "waiting"
            raise QueueFull(
                f"{role} already has {MAX_WAITING} messages {what} (the most a seat queues): "
                f"see ./fabrikito queue {role}, and send again once it has taken some"
            )
        last = max((int(NAME.fullmatch(m.path.name).group(1)) for m in held), default=0)  # type: ignore[union-attr]
        stamp = max(time.time_ns(), last + 1)
        tail = os.urandom(4).hex()
        now = time.time()
        msg = Message(
            id=f"{role}-{tail}",
            role=role,
            sender=sender,
            text=text,
            queued=now,
            expires=now + expire,
            state=state,
            reason=reason,
            path=seat_dir(team, role) / f"{stamp:019d}-{tail}.json",
        )
        write(msg)
        return msg


def claim(team: Team, msg: Message) -> Message:
    """``pending`` → ``typing``, under the seat's queue lock, before the first paste.

    Raises :class:`Gone` when the message was dropped (or is no longer pending).
    """
    with seat_queue_lock(team, msg.role):
        try:
            now = read(msg.path, team, msg.role)
        except (FileNotFoundError, Damaged):
            raise Gone(f"{msg.id} is no longer in the queue (dropped?)") from None
        if now.state is not State.PENDING:
            raise Gone(f"{msg.id} is {now.state.value}, not pending")
        typing = now.moved(State.TYPING)
        write(typing)
        return typing


class Gone(Exception):
    """The message changed under the worker (dropped by someone)."""


@contextmanager
def _locked_message(team: Team, msg_id: str) -> Iterator[Message]:
    """The queued message ``msg_id``, its seat's queue locked meanwhile; a usage error when there is none."""
    match = ID.fullmatch(msg_id)
    if match is None or team.seat(match.group(1)) is None:
        raise UsageError(f"'{msg_id}' is not a queued message's id (see ./fabrikito queue)")
    with seat_queue_lock(team, match.group(1)):
        msg = find(team, msg_id)
        if msg is None:
            raise UsageError(
                f"no message {msg_id} in the queue (delivered, or dropped already?): see ./fabrikito queue"
            )
        yield msg


def drop(team: Team, msg_id: str, *, by: str) -> Message:
    """Remove one message (waiting, uncertain or expired) and log it; a message being typed is refused."""
    with _locked_message(team, msg_id) as msg:
        if msg.state is State.TYPING:
            raise FabrikitoError(
                f"{msg_id} is being typed into {msg.role} right now: it cannot be dropped", exit_code=3
            )
        remove(msg)
    was = "" if msg.state in WAITING else f", was {msg.state.value}"
    log(team, msg, msglog.Outcome.DROPPED, f"dropped by {by}{was}")
    return msg


def release(team: Team, msg_id: str, *, by: str) -> Message:
    """``held`` → ``pending``: the owner lets a held message be typed; logged."""
    with _locked_message(team, msg_id) as msg:
        if msg.state is not State.HELD:
            raise UsageError(
                f"{msg_id} is {msg.state.value}, not held: only a message an inbox held is released "
                "(see ./fabrikito queue)"
            )
        now = time.time()
        window = msg.expires - msg.queued  # its time to wait starts again
        released = values.replace(msg.moved(State.PENDING, f"released by {by}"), expires=now + window)
        write(released)
    log(team, released, msglog.Outcome.QUEUED, f"released by {by}")
    return released


# -- the log ------------------------------------------------------------------------


def log(team: Team, msg: Message, outcome: msglog.Outcome, note: str = "") -> str | None:
    """Append the message's log line; the message field starts with ``[queued <id>…]``.

    Returns why the line could not be written, or ``None``.
    """
    head = f"[queued {msg.id}{', ' + note if note else ''}] "
    return log_line(team, msg.sender, msg.role, outcome, head + msglog.body_for(msg.sender, msg.role, msg.text))


def log_set_aside(team: Team, path: Path, moved_to: Path, why: str) -> None:
    role = path.parent.name if path.parent != queue_dir(team) else path.name
    body = f"[queue file set aside: {path.name}: {why}; now {moved_to}]"
    try:
        msglog.append_checked(team.log_path, msglog.format_line(time.time(), "?", role, msglog.Outcome.SET_ASIDE, body))
    except (OSError, FabrikitoError):
        pass


def set_aside(team: Team, path: Path, why: str) -> Path:
    """Move a damaged or foreign entry to ``queue/aside/`` (renamed, never followed) and log it."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    if path == queue_dir(team):  # the queue itself is a link or a file: nothing is created through it
        target = team.state_dir / f"queue.set-aside-{stamp}"
    else:
        statedir.ensure_dir(aside_dir(team))
        target = aside_dir(team) / f"{stamp}-{path.parent.name}-{path.name}"
    os.rename(path, target)
    log_set_aside(team, path, target, why)
    return target


def parse_duration(text: str) -> float:
    """``--expire``: ``90s``, ``30m``, ``2h``, ``1h30m`` or plain seconds; more than 0, at most 24 hours."""
    raw = text.strip().lower()
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?", raw)
    if not raw or match is None:
        raise UsageError(f"--expire {text!r}: give a duration such as 90s, 30m, 2h or 1h30m")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    total = hours * 3600.0 + minutes * 60.0 + seconds
    if total <= 0:
        raise UsageError(f"--expire {text!r}: the duration must be more than 0")
    if total > MAX_EXPIRE:
        raise UsageError(f"--expire {text!r}: a message waits at most 24 hours (24h)")
    return total


Printer = Callable[[str], None]


# -- say --queue ---------------------------------------------------------------------


def behind_earlier(team: Team, role: str) -> Delivery | None:
    """A refusal to try at once when earlier messages wait for ``role`` (first in, first out)."""
    from fabrikito.delivery.engine import Delivery, Result

    count = len(scan(team, [role]).waiting(role))
    if not count:
        return None
    return Delivery(
        role, Result.REFUSED, f"{count} earlier message{'s' if count > 1 else ''} wait for this seat", waitable=True
    )


def log_line(team: Team, sender: str, role: str, outcome: msglog.Outcome, body: str) -> str | None:
    """Append one line to the team's log; why it could not be written, or ``None``."""
    try:
        msglog.append_checked(team.log_path, msglog.format_line(time.time(), sender, role, outcome, body))
    except (OSError, FabrikitoError) as exc:
        return str(exc)
    return None
