"""What the stand-in model answers: scripted replies and rules, the parsed request, and Server-Sent Events.

:mod:`fabrikito.offline.standin` serves these; tests and the demo script a seat's
replies with :class:`Reply` and :class:`Rule`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from fabrikito.base.values import field, frozen

PING_INTERVAL = 0.5
SEAT_PREFIX = "/seat/"
SUGGESTION_MARK = "[SUGGESTION MODE:"

RuleKind = Literal["prompt", "tool_result"]


class StandInTimeoutError(AssertionError):
    """A wait on the stand-in ran out; the message lists what did arrive."""


@frozen
class Reply:
    """One model reply: text, a tool call (with optional text before it), or both, maybe slow.

    ``delay``: seconds before anything of the reply is sent (the turn stays busy, nothing
    streams).  ``error``: an HTTP status (400, 429, 529...) answered with an API-shaped error
    whose type is ``error_type`` and whose message is ``text``, as the real API fails.
    ``trickle``: seconds between the words of the text, which then streams one
    word at a time (the turn stays busy with part of its reply on the screen).
    """

    text: str = ""
    tool: str | None = None
    input: Mapping[str, Any] = field(default_factory=dict)
    delay: float = 0.0
    then: Reply | None = None
    trickle: float = 0.0
    error: int = 0  # an HTTP status: answer an API error (``text`` its message) instead of a reply
    error_type: str = "invalid_request_error"

    def pieces(self) -> list[str]:
        """The text as it is streamed: whole, or word by word (spaces kept) when it trickles."""
        if self.trickle <= 0 or not self.text:
            return [self.text] if self.text else []
        return re.findall(r"\s*\S+\s*|\s+", self.text)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reply:
        then = data.get("then")
        return cls(
            text=str(data.get("text", "")),
            tool=None if data.get("tool") is None else str(data["tool"]),
            input=dict(data.get("input") or {}),
            delay=float(data.get("delay", 0.0)),
            then=None if then is None else cls.from_json(then),
            trickle=float(data.get("trickle", 0.0)),
            error=int(data.get("error", 0)),
            error_type=str(data.get("error_type", "invalid_request_error")),
        )


@frozen
class Rule:
    """Answer ``reply`` to a request from ``seat`` (any when ``None``) whose text matches."""

    match: str
    reply: Reply
    seat: str | None = None
    regex: bool = False
    once: bool = True
    on: RuleKind = "prompt"
    main_only: bool = True

    def matches(self, text: str) -> bool:
        if self.regex:
            return re.search(self.match, text) is not None
        return self.match in text

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Rule:
        on = str(data.get("on", "prompt"))
        if on not in ("prompt", "tool_result"):
            raise ValueError(f"rule 'on' must be 'prompt' or 'tool_result', not {on!r}")
        kind: RuleKind = "prompt" if on == "prompt" else "tool_result"
        return cls(
            match=str(data["match"]),
            reply=Reply.from_json(data.get("reply") or {}),
            seat=None if data.get("seat") is None else str(data["seat"]),
            regex=bool(data.get("regex", False)),
            once=bool(data.get("once", True)),
            on=kind,
            main_only=bool(data.get("main_only", True)),
        )


@frozen
class ToolResult:
    """A tool result Claude Code sent back, joined with the call it answers (when the call was ours)."""

    seat: str
    tool_use_id: str
    tool: str | None
    input: Mapping[str, Any] | None
    content: str
    is_error: bool

    def json(self) -> Any:
        """The content parsed as JSON (SendMessage returns a JSON object as text)."""
        return json.loads(self.content)


@frozen
class Request:
    """One request as it arrived.

    ``api`` names the model API of a model call other than the Messages API
    (``responses``: the OpenAI Responses API; ``gemini``: the Gemini API), and
    ``turn`` says whether such a call is a main-loop turn (it carries tools).
    A Messages API call is told by its path, as are its kinds.
    """

    index: int
    seat: str
    method: str
    path: str
    body: Any
    streamed: bool
    last_user_text: str
    tool_results: tuple[ToolResult, ...]
    at: float  # time.monotonic()
    reply: Reply | None = None
    api: str = ""
    turn: bool = False

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and urlsplit(self.path).path.endswith("/v1/messages")

    @property
    def is_model_call(self) -> bool:
        """A call to one of the model APIs (Messages, Responses, Gemini), not a probe or a token count."""
        return self.is_messages or bool(self.api)

    @property
    def has_tools(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("tools"))

    @property
    def is_suggestion(self) -> bool:
        """The prompt-suggestion fork: streamed, with tools, its last user text in SUGGESTION MODE."""
        return self.is_messages and self.streamed and self.last_user_text.startswith(SUGGESTION_MARK)

    @property
    def is_main(self) -> bool:
        """A main-loop turn: a streamed messages request with tools (not the suggestion fork), or another
        API's turn."""
        if self.api:
            return self.turn
        return self.is_messages and self.streamed and self.has_tools and not self.is_suggestion

    @property
    def kind(self) -> str:
        """``main``, ``suggestion``, ``stream`` (streamed, no tools), ``side`` (not streamed) or ``other``."""
        if self.api:
            return "main" if self.turn else ("stream" if self.streamed else "side")
        if not self.is_messages:
            return "other"
        if self.is_suggestion:
            return "suggestion"
        if self.is_main:
            return "main"
        return "stream" if self.streamed else "side"


# -- request parsing --------------------------------------------------------


def split_seat(path: str) -> tuple[str, str]:
    """``/seat/dev/v1/messages`` -> (``dev``, ``/v1/messages``)."""
    if path.startswith(SEAT_PREFIX):
        rest = path[len(SEAT_PREFIX) :]
        seat, slash, tail = rest.partition("/")
        return seat, slash + tail
    return "", path


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "tool_result":
                    parts.append(content_text(block.get("content", "")))
                elif block.get("type") == "tool_reference":
                    parts.append(str(block.get("tool_name", "")))
    return "\n".join(parts)


def last_user_message(body: Any) -> Mapping[str, Any] | None:
    if not isinstance(body, dict):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message
    return None


def user_text(message: Mapping[str, Any] | None, *, reminders: bool = False) -> str:
    """The text blocks of a user message, joined by newlines.

    Tool results are left out, and so are the ``<system-reminder>`` blocks
    Claude Code puts before the prompt, unless ``reminders`` is true.
    """
    if message is None:
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
    if not reminders:
        parts = [p for p in parts if not p.lstrip().startswith("<system-reminder>")]
    return "\n".join(parts)


def raw_tool_results(message: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if message is None or not isinstance(message.get("content"), list):
        return []
    return [b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


# -- SSE --------------------------------------------------------------------


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def content_blocks(reply: Reply, tool_use_id: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text or reply.tool is None:
        blocks.append({"type": "text", "text": reply.text})
    if reply.tool is not None:
        blocks.append({"type": "tool_use", "id": tool_use_id, "name": reply.tool, "input": dict(reply.input)})
    return blocks


def message_json(reply: Reply, model: str, message_id: str, tool_use_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content_blocks(reply, tool_use_id),
        "stop_reason": "tool_use" if reply.tool is not None else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def sse_events(reply: Reply, model: str, message_id: str, tool_use_id: str) -> Iterator[bytes]:
    """The events after ``message_start`` (which the caller sends first)."""
    for index, block in enumerate(content_blocks(reply, tool_use_id)):
        if block["type"] == "text":
            yield sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
            if block["text"]:
                yield sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                )
        else:
            start = dict(block, input={})
            yield sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
            yield sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                },
            )
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
    stop = "tool_use" if reply.tool is not None else "end_turn"
    yield sse(
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
    )
    yield sse("message_stop", {"type": "message_stop"})
