"""The OpenAI Responses API, as Codex CLI calls it: ``POST <base>/responses``, streamed.

What Codex CLI 0.171 sends (observed offline, ``wire_api = "responses"``)
=======================================================================

* Nothing at start.  Each turn: ``POST <base_url>/responses`` with
  ``"stream": true``, ``tools`` and ``input``: the conversation as items
  (``message`` items of role ``developer``/``user``/``assistant``, the
  model's ``function_call`` items and Codex's ``function_call_output``
  items).  The turn's prompt is the last ``user`` message; a tool's follow-up
  ends with ``function_call_output`` items after it.
* Beside each turn, a second call without tools asking for a title for the
  thread: answered like any call that is not a turn (rules with
  ``main_only`` do not see it).
* An Enter while a turn streams sends a new request at once, holding both
  prompts (a mid-turn steer); the first stream's answer is dropped.

What is answered
================

Server-Sent Events: ``response.created``, then per output item
``response.output_item.added``, text deltas (``response.output_text.delta``)
and ``response.output_item.done``, then ``response.completed`` with usage.
A tool call is a ``function_call`` item (``arguments`` is a JSON string).
``Reply.delay`` holds the stream after ``response.created``; ``Reply.trickle``
streams the text a word at a time.

Codex 0.171 offers a model it has no metadata for the ``exec_command`` tool
(``cmd``: a shell command string; ``sandbox_permissions``, ``justification``);
:func:`shell_reply` builds a call, with ``require_escalated`` for the
approval dialog.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from fabrikito import TYPE_CHECKING
from fabrikito.offline.replies import Reply

if TYPE_CHECKING:
    from fabrikito.offline.exchange import Exchange

API = "responses"
#: The tool Codex 0.171 offers the stand-in's model for shell commands (a model with no metadata).
SHELL_TOOL = "exec_command"


def serves(path: str) -> bool:
    return path.endswith("/responses")


def shell_reply(command: str, *, escalate: bool = True, reason: str = "", then: Reply | None = None) -> Reply:
    """A Codex shell call of ``command``; with ``escalate`` Codex asks the user's approval first."""
    args: dict[str, Any] = {"cmd": command}
    if escalate:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = reason or f"Stand-in asks to run {command.split(maxsplit=1)[0]} outside the sandbox"
    return Reply(tool=SHELL_TOOL, input=args, then=then)


# -- reading a request -----------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [
        str(part.get("text", ""))
        for part in content or []
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    ]
    return "\n".join(parts)


def _output_text(output: Any) -> str:
    """A ``function_call_output``'s output: a string, or content items, or ``{"content": ...}``."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return _output_text(output.get("content", ""))
    if isinstance(output, list):
        return _text_of(output)
    return json.dumps(output)


def read(body: Any) -> tuple[str, list[tuple[str, str, bool]]]:
    """The prompt text (the last user message's) and the tool outputs that follow it."""
    items = body.get("input") if isinstance(body, dict) else None
    if isinstance(items, str):
        return items, []
    if not isinstance(items, list):
        return "", []
    text = ""
    last_user = -1
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message":
            last_user = i
            text = _text_of(item.get("content"))
    calls = [
        (str(item.get("call_id", "")), _output_text(item.get("output", "")), False)
        for item in items[last_user + 1 :]
        if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output")
    ]
    return text, calls


# -- answering ---------------------------------------------------------------------------


def answer(ex: Exchange, seat: str, path: str, body: Any, raw: bytes) -> None:
    standin = ex.standin
    text, calls = read(body)
    streamed = isinstance(body, dict) and bool(body.get("stream"))
    main = isinstance(body, dict) and bool(body.get("tools"))
    reply, results = standin.pick(seat, text, calls, main=main)
    number = standin.next_id()
    ids = _Ids(number)
    standin.record_call(
        seat, ex.path, body, reply, ids.call, streamed=streamed, text=text, results=results, api=API, turn=main
    )
    model = str(body.get("model", "standin-model")) if isinstance(body, dict) else "standin-model"
    if not streamed:
        ex.send_json(200, _response(ids, model, _items(reply, ids), "completed"))
        return
    ex.open_stream(f"req_standin_{number}")
    ex.chunk(_event("response.created", response=_response(ids, model, [], "in_progress")))
    ex.hold(reply.delay)
    for event in _events(ex, reply, ids):
        ex.chunk(event)
    ex.chunk(_event("response.completed", response=_response(ids, model, _items(reply, ids), "completed")))
    ex.end_stream()


class _Ids:
    """The ids of one answer's response, message item and tool call."""

    __slots__ = ("call", "function", "message", "response")

    def __init__(self, number: int) -> None:
        self.response = f"resp_standin_{number:06d}"
        self.message = f"msg_standin_{number:06d}"
        self.function = f"fc_standin_{number:06d}"
        self.call = f"call_standin_{number:06d}"


def _event(kind: str, **fields: Any) -> bytes:
    data = {"type": kind, **fields}
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _usage() -> dict[str, Any]:
    return {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }


def _response(ids: _Ids, model: str, output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {
        "id": ids.response,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": _usage() if status == "completed" else None,
    }


def _message_item(text: str, ids: _Ids, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": ids.message, "role": "assistant", "status": status, "content": content}


def _call_item(reply: Reply, ids: _Ids) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": ids.function,
        "call_id": ids.call,
        "name": reply.tool,
        "arguments": json.dumps(dict(reply.input)),
        "status": "completed",
    }


def _items(reply: Reply, ids: _Ids) -> list[dict[str, Any]]:
    items = []
    if reply.text or reply.tool is None:
        items.append(_message_item(reply.text, ids, "completed"))
    if reply.tool is not None:
        items.append(_call_item(reply, ids))
    return items


def _events(ex: Exchange, reply: Reply, ids: _Ids) -> Iterator[bytes]:
    index = 0
    if reply.text or reply.tool is None:
        yield _event("response.output_item.added", output_index=index, item=_message_item("", ids, "in_progress"))
        part: Mapping[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        yield _event("response.content_part.added", item_id=ids.message, output_index=index, content_index=0, part=part)
        for k, piece in enumerate(reply.pieces()):
            if k:
                ex.hold(reply.trickle)
            yield _event(
                "response.output_text.delta", item_id=ids.message, output_index=index, content_index=0, delta=piece
            )
        yield _event("response.output_item.done", output_index=index, item=_message_item(reply.text, ids, "completed"))
        index += 1
    if reply.tool is not None:
        yield _event("response.output_item.added", output_index=index, item=dict(_call_item(reply, ids), arguments=""))
        yield _event("response.output_item.done", output_index=index, item=_call_item(reply, ids))
