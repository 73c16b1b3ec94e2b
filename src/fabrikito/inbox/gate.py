"""What an inbox of fabrikito's decides about one arriving message: who sent it, and accept, hold or refuse.

The receiving side of ``message-claude.md`` for a seat that is not Claude Code
(:mod:`fabrikito.inbox.server` runs the socket; this module holds no socket and
no file, so every rule is tested without one).  In order, for each user line:

1. **Who.**  :func:`read_arrival`.  A Claude Code peer wraps its text in
   ``<cross-session-message from="uds:…" from-name="NAME" from-mode="CLASS">``
   (``peer-wire-format-sniffed.jsonl``): the envelope is taken off, the sender
   is the seat whose session is ``NAME`` (its role), else ``NAME``, and the
   sender asserts ``CLASS``.  A raw post (``fabrikito send``, a script) asserts
   no class; its sender is the ``[from X]`` label it starts with (taken off:
   the delivery engine labels it again), else ``unknown``.  Labels are claims,
   not identities (the same as ``say``'s).
2. **Size and text.**  More than :data:`protocol.MAX_SERIALIZED_CHARS` in the
   message (envelope aside), an empty text or one a terminal would act on
   (control characters): refused.
3. **Repeats.**  A ``msg_id`` seen before, or the same text from the same
   sender within :data:`REPEAT_WINDOW` seconds: dropped (nothing delivered
   twice).
4. **Throttle.**  A token bucket per sender (:data:`BURST` at once, then one
   every :data:`REFILL_SECONDS`) and one for the whole inbox
   (:data:`INBOX_BURST`, one every :data:`INBOX_REFILL_SECONDS`): over either,
   refused ("throttled").
5. **Class.**  The inbox's policy (``inbound``): ``accept``, ``hold`` or
   ``refuse`` everything, or by default Claude Code's own rule: same class as
   the seat's, delivered; another class, held; no class asserted, delivered to
   a prompting seat and held by a bypass seat.

The cap of 50 waiting messages is the delivery queue's (:func:`fabrikito.delivery.queue.enqueue`).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict, deque
from enum import StrEnum

from fabrikito.base.text import refusal_for
from fabrikito.base.values import frozen
from fabrikito.inbox import protocol
from fabrikito.team.teamfile import PermissionClass, Seat, Team

REPEAT_WINDOW = 5.0
"""Seconds within which the same text from the same sender is a repeat (``send`` warns within as many)."""

BURST = 10
REFILL_SECONDS = 2.0
INBOX_BURST = 60
INBOX_REFILL_SECONDS = 1.0
SEEN_IDS = 4096
MAX_SENDERS = 1024
UNKNOWN_SENDER = "unknown"

ENVELOPE = re.compile(
    r"\A<cross-session-message((?:\s+[a-z-]+=\"[^\"\n]*\")*)\s*>\n(.*)\n</cross-session-message>\s*\Z", re.S
)
ATTRIBUTE = re.compile(r"([a-z-]+)=\"([^\"\n]*)\"")
LABEL = re.compile(r"\A\[from ([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\] ")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")

#: Arguments that start a Codex CLI or Gemini CLI seat without approvals: such a seat is in the bypass class.
BYPASS_ARGS = frozenset({"--dangerously-bypass-approvals-and-sandbox", "--yolo", "-y", "--approval-mode=yolo"})


class Inbound(StrEnum):
    """The inbox's policy, as Claude Code's ``crossSessionInbound``; ``default`` decides by class."""

    DEFAULT = "default"
    ACCEPT = "accept"
    HOLD = "hold"
    REFUSE = "refuse"


class Verdict(StrEnum):
    ACCEPT = "accepted"
    HOLD = "held"
    REFUSE = "refused"
    DROP = "dropped"


@frozen
class Arrival:
    """One user line, read: the text the seat gets and who it is from."""

    text: str
    sender: str  # the label the delivery engine types: a role, a session name, or "unknown"
    source: str  # who, for the throttle and repeats: the peer socket, the label, or "unknown"
    mode: PermissionClass | None  # the class the sender asserts (None: none)
    msg_id: str | None


@frozen
class Decision:
    verdict: Verdict
    reason: str


def seat_class(seat: Seat) -> PermissionClass:
    """The seat's permission class; a seat whose mode is not known is bypass when its args skip approvals."""
    known = seat.permission_class
    if known not in (PermissionClass.UNKNOWN, PermissionClass.NONE):  # NONE: a seat that is not Claude Code
        return known
    args = set(seat.args)
    if args & BYPASS_ARGS or seat.bypass_available or {"--approval-mode", "yolo"} <= args:
        return PermissionClass.BYPASS
    return PermissionClass.PROMPTING


def read_arrival(line: protocol.UserLine, team: Team) -> Arrival:
    """The text and sender of ``line`` (see the module docstring, step 1)."""
    content = line.content
    wrapped = ENVELOPE.match(content)
    if wrapped is not None:
        attrs = dict(ATTRIBUTE.findall(wrapped.group(1)))
        name = attrs.get("from-name", "")
        seat = team.seat_by_session(name) if name else None
        sender = seat.role if seat is not None else name if NAME.match(name) else UNKNOWN_SENDER
        mode = {"bypass": PermissionClass.BYPASS, "prompting": PermissionClass.PROMPTING}.get(
            attrs.get("from-mode", "")
        )
        source = line.sender or attrs.get("from") or f"name:{sender}"
        return Arrival(wrapped.group(2), sender, source, mode, line.msg_id)
    label = LABEL.match(content)
    if label is not None:
        return Arrival(content[label.end() :], label.group(1), f"label:{label.group(1)}", None, line.msg_id)
    return Arrival(content, UNKNOWN_SENDER, line.sender or f"label:{UNKNOWN_SENDER}", None, line.msg_id)


def text_refusal(text: str) -> str | None:
    """Why ``text`` is not taken at all (too large, empty, not typable), or ``None``."""
    try:
        protocol.check_size(text)
    except protocol.TooLargeError as exc:
        return str(exc)
    if not text.strip():
        return "the message is empty"
    return refusal_for(text.replace("\r\n", "\n"))


class Bucket:
    """A token bucket: ``capacity`` at once, one more every ``refill`` seconds."""

    __slots__ = ("capacity", "last", "refill", "tokens")

    def __init__(self, capacity: int, refill: float, now: float) -> None:
        self.capacity = capacity
        self.refill = refill
        self.tokens = float(capacity)
        self.last = now

    def take(self, now: float) -> bool:
        self.tokens = min(float(self.capacity), self.tokens + max(0.0, now - self.last) / self.refill)
        self.last = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class Gate:
    """The decisions of one inbox, with the memory they need (buckets, recent texts, seen ids)."""

    def __init__(self, seat_mode: PermissionClass, inbound: Inbound = Inbound.DEFAULT) -> None:
        self.seat_mode = seat_mode
        self.inbound = inbound
        self.buckets: dict[str, Bucket] = {}
        self.inbox_bucket: Bucket | None = None
        self.recent: deque[tuple[float, str, str]] = deque()
        self.seen: OrderedDict[str, None] = OrderedDict()

    def judge(self, arrival: Arrival, now: float) -> Decision:
        """Steps 2 to 5 of the module docstring; an accepted or held message is remembered as seen."""
        refusal = text_refusal(arrival.text)
        if refusal is not None:
            return Decision(Verdict.REFUSE, refusal)
        repeat = self._repeat(arrival, now)
        if repeat is not None:
            return Decision(Verdict.DROP, repeat)
        if self.inbox_bucket is None:
            self.inbox_bucket = Bucket(INBOX_BURST, INBOX_REFILL_SECONDS, now)
        if len(self.buckets) >= MAX_SENDERS:  # forget the senders whose bucket has filled up again
            full = BURST * REFILL_SECONDS
            self.buckets = {k: b for k, b in self.buckets.items() if now - b.last < full}
        bucket = self.buckets.setdefault(arrival.source, Bucket(BURST, REFILL_SECONDS, now))
        if not bucket.take(now):
            return Decision(
                Verdict.REFUSE,
                f"throttled: more than {BURST} messages from {arrival.sender} at once (then one every "
                f"{REFILL_SECONDS:g} s); batch them into one message",
            )
        if not self.inbox_bucket.take(now):
            return Decision(
                Verdict.REFUSE,
                f"throttled: more than {INBOX_BURST} messages to this inbox at once (then one every "
                f"{INBOX_REFILL_SECONDS:g} s)",
            )
        decision = self._by_policy(arrival)
        self._remember(arrival, now)
        return decision

    def _repeat(self, arrival: Arrival, now: float) -> str | None:
        while self.recent and now - self.recent[0][0] > REPEAT_WINDOW:
            self.recent.popleft()
        if arrival.msg_id is not None and arrival.msg_id in self.seen:
            return f"a repeat: message {arrival.msg_id} arrived before"
        digest = _digest(arrival.text)
        for _, source, seen in self.recent:
            if source == arrival.source and seen == digest:
                return f"a repeat: the same text from {arrival.sender} arrived within {REPEAT_WINDOW:g} s"
        return None

    def _remember(self, arrival: Arrival, now: float) -> None:
        self.recent.append((now, arrival.source, _digest(arrival.text)))
        if arrival.msg_id is not None:
            self.seen[arrival.msg_id] = None
            while len(self.seen) > SEEN_IDS:
                self.seen.popitem(last=False)

    def _by_policy(self, arrival: Arrival) -> Decision:
        if self.inbound is Inbound.ACCEPT:
            return Decision(Verdict.ACCEPT, 'this inbox accepts every message (inbound "accept")')
        if self.inbound is Inbound.HOLD:
            return Decision(Verdict.HOLD, 'this inbox holds every message for the owner (inbound "hold")')
        if self.inbound is Inbound.REFUSE:
            return Decision(Verdict.REFUSE, 'this inbox refuses every message (inbound "refuse")')
        ours = self.seat_mode.value
        if arrival.mode is None:
            if self.seat_mode is PermissionClass.BYPASS:
                return Decision(
                    Verdict.HOLD,
                    "the sender did not attest its permission mode, and this seat bypasses permission prompts",
                )
            return Decision(Verdict.ACCEPT, f"no class asserted, and this seat is in the {ours} class")
        if arrival.mode is self.seat_mode:
            return Decision(Verdict.ACCEPT, f"the sender's permission class ({ours}) is this seat's")
        return Decision(
            Verdict.HOLD,
            f"the sender's permission class ({arrival.mode.value}) is not this seat's ({ours}), so it was not "
            "delivered automatically",
        )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
