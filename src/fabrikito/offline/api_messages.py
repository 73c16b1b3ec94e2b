"""The Anthropic Messages API, as Claude Code calls it: ``POST <base>/v1/messages`` and its token count.

See :mod:`fabrikito.offline.standin` for what Claude Code sends and what is answered.
"""

from __future__ import annotations

from typing import Any

from fabrikito import TYPE_CHECKING
from fabrikito.offline.replies import (
    SUGGESTION_MARK,
    Reply,
    ToolResult,
    content_text,
    last_user_message,
    message_json,
    raw_tool_results,
    sse,
    sse_events,
    user_text,
)

if TYPE_CHECKING:
    from fabrikito.offline.answers import Answers
    from fabrikito.offline.exchange import Exchange


def serves(path: str) -> bool:
    return path.endswith(("/v1/messages", "/v1/messages/count_tokens"))


def answer(ex: Exchange, seat: str, path: str, body: Any, raw: bytes) -> None:
    if path.endswith("/count_tokens"):
        ex.record_plain(body)
        ex.send_json(200, {"input_tokens": max(1, len(raw) // 4)})
        return
    standin = ex.standin
    streamed = isinstance(body, dict) and bool(body.get("stream"))
    reply, results, text = choose(standin, seat, body, streamed)
    model = str(body.get("model", "claude-standin")) if isinstance(body, dict) else "claude-standin"
    number = standin.next_id()
    message_id = f"msg_standin_{number:06d}"
    tool_use_id = f"toolu_standin_{number:06d}"
    standin.record_call(seat, ex.path, body, reply, tool_use_id, streamed=streamed, text=text, results=results)
    if reply.error:
        ex.send_json(reply.error, {"type": "error", "error": {"type": reply.error_type, "message": reply.text}})
        return
    if not streamed:
        ex.send_json(200, message_json(reply, model, message_id, tool_use_id))
        return
    ex.open_stream(f"req_standin_{message_id}")
    start = message_json(Reply(), model, message_id, tool_use_id)
    start.update(content=[], stop_reason=None)
    start["usage"] = {
        "input_tokens": 10,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    ex.chunk(sse("message_start", {"type": "message_start", "message": start}))
    ex.hold(reply.delay, sse("ping", {"type": "ping"}))
    for event in sse_events(reply, model, message_id, tool_use_id):
        ex.chunk(event)
    ex.end_stream()


def choose(standin: Answers, seat: str, body: Any, streamed: bool) -> tuple[Reply, list[ToolResult], str]:
    """Pick the reply for a messages request; return it, the tool results and the user text."""
    message = last_user_message(body)
    text = user_text(message)
    calls = [
        (str(b.get("tool_use_id", "")), content_text(b.get("content", "")), bool(b.get("is_error", False)))
        for b in raw_tool_results(message)
    ]
    fixed: Reply | None = None
    if not streamed:
        fixed = Reply(text=standin.side_text)
    elif text.startswith(SUGGESTION_MARK):
        fixed = Reply(text=standin.suggestion_text)
    main = isinstance(body, dict) and bool(body.get("tools"))
    reply, results = standin.pick(seat, text, calls, main=main, fixed=fixed)
    return reply, results, text
