"""What an inbox of fabrikito's decides about one arriving message: who sent it, and accept, hold or refuse.

The receiving side of ``message-claude.md`` for a seat that is not Claude Code
(:mod:`fabrikito.inbox.server` runs the socket; this module holds no socket and
no file, so every rule is tested without one).  In order, for each user line:

1. **Who.**  :func:`read_arrival`, from the evidence about the connecting
   process (:mod:`fabrikito.inbox.peer`), never from the text: the sender is
   the seat whose pane the process runs in (its role), else ``session:<name>``
   for a Claude Code session that is no seat, else ``unverified-sender``.  Only
   when the process *is* a live Claude Code session is its envelope,
   ``<cross-session-message from="uds:…" from-name="NAME" from-mode="CLASS">``
   (``peer-wire-format-sniffed.jsonl``), Claude Code's own: then it is taken
   off, and the message asserts ``CLASS`` (when ``NAME`` and the address are
   that session's, and its registry entry, if it records a mode, agrees).
   Anything else that looks like an envelope or a ``[from X]`` label is the
   message's text, typed as it came, and asserts no class.
2. **Size and text.**  More than :data:`protocol.MAX_SERIALIZED_CHARS` in the
   message (envelope aside), an empty text or one a terminal would act on
   (control characters): refused.
3. **Repeats.**  A ``msg_id`` seen before from the same peer, or the same
   text from the same peer within :data:`REPEAT_WINDOW` seconds: dropped
   (nothing delivered twice).
4. **Throttle.**  A token bucket per verified peer (``Peer.key``: :data:`BURST`
   at once, then one every :data:`REFILL_SECONDS`) and one for the whole inbox
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
from fabrikito.inbox.peer import Peer
from fabrikito.team.teamfile import PermissionClass, Seat, Team

REPEAT_WINDOW = 5.0
"""Seconds within which the same text from the same sender is a repeat (``send`` warns within as many)."""

BURST = 10
REFILL_SECONDS = 2.0
INBOX_BURST = 60
INBOX_REFILL_SECONDS = 1.0
SEEN_IDS = 4096
MAX_SENDERS = 1024

ENVELOPE = re.compile(
    r"\A<cross-session-message((?:\s+[a-z-]+=\"[^\"\n]*\")*)\s*>\n(.*)\n</cross-session-message>\s*\Z", re.S
)
ATTRIBUTE = re.compile(r"([a-z-]+)=\"([^\"\n]*)\"")

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
    sender: str  # the label the delivery engine types: a role, session:<name>, or unverified-sender
    source: str  # who, for the throttle and repeats: the verified peer (Peer.key)
    mode: PermissionClass | None  # the class Claude Code asserts for its own session (None: none)
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


CLASSES = {"bypass": PermissionClass.BYPASS, "prompting": PermissionClass.PROMPTING}


def read_arrival(line: protocol.UserLine, team: Team, peer: Peer) -> Arrival:
    """The text, sender and class of ``line`` from ``peer`` (see the module docstring, step 1)."""
    content = line.content
    sender = peer.sender(team)
    wrapped = ENVELOPE.match(content) if peer.is_session else None
    if wrapped is not None:
        attrs = dict(ATTRIBUTE.findall(wrapped.group(1)))
        address = attrs.get("from")
        if attrs.get("from-name") == peer.session and address in (None, f"uds:{peer.session_socket}"):
            mode = CLASSES.get(attrs.get("from-mode", ""))
            recorded = _class_of_mode(peer.session_mode)
            if recorded is not None and recorded is not mode:
                mode = None  # the registry and the envelope disagree: no class
            return Arrival(wrapped.group(2), sender, peer.key, mode, line.msg_id)
    return Arrival(content, sender, peer.key, None, line.msg_id)


def _class_of_mode(mode: str | None) -> PermissionClass | None:
    """The class of a permission mode a registry entry records (``None``: none, or plan, which is either)."""
    if mode is None or mode == "plan":
        return None
    return PermissionClass.BYPASS if mode == "bypassPermissions" else PermissionClass.PROMPTING


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
        if arrival.msg_id is not None and f"{arrival.source}\0{arrival.msg_id}" in self.seen:
            return f"a repeat: message {arrival.msg_id} arrived before"
        digest = _digest(arrival.text)
        for _, source, seen in self.recent:
            if source == arrival.source and seen == digest:
                return f"a repeat: the same text from {arrival.sender} arrived within {REPEAT_WINDOW:g} s"
        return None

    def _remember(self, arrival: Arrival, now: float) -> None:
        self.recent.append((now, arrival.source, _digest(arrival.text)))
        if arrival.msg_id is not None:
            self.seen[f"{arrival.source}\0{arrival.msg_id}"] = None
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
                    "the sender's permission mode is not attested by its own Claude Code session, and this seat "
                    "bypasses permission prompts",
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
