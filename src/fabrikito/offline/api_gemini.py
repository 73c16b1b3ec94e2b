"""The Gemini API, as Gemini CLI calls it: ``models/<model>:streamGenerateContent``, ``:generateContent``,
``:countTokens``.

What Gemini CLI 0.61 sends (observed offline, ``GOOGLE_GEMINI_BASE_URL`` set)
============================================================================

* Nothing at start.  Per message, first a routing call:
  ``POST <base>/v1beta/models/<flash-lite>:generateContent`` whose
  ``generationConfig`` asks for JSON by a schema (``complexity_reasoning``,
  ``model_choice``); then the turn,
  ``POST <base>/v1beta/models/<model>:streamGenerateContent?alt=sse`` with
  ``tools`` (``functionDeclarations``) and ``contents``.  The user's content
  has two text parts: ``<session_context>…`` and the message.  A tool's
  follow-up ends with a user content of ``functionResponse`` parts.
* ``:countTokens`` may be asked for.

What is answered
================

* A call whose ``generationConfig`` has a JSON schema: one JSON object that
  fits it (strings the schema's first ``enum`` value, or a short text; the
  routing call's ``model_choice`` its first choice; a ``next_speaker`` always
  ``user``, so a turn never continues on its own).
* ``:streamGenerateContent``: Server-Sent Events (``data:`` lines), each a
  ``GenerateContentResponse``; the text (word by word with ``Reply.trickle``),
  then a ``functionCall`` part for a tool, then ``finishReason: STOP``.
  ``Reply.delay`` holds the stream before its first event.
* ``:generateContent`` without a schema: one ``GenerateContentResponse``.
* ``:countTokens``: ``{"totalTokens": N}``.

Gemini CLI's shell tool is ``run_shell_command``; :func:`shell_reply` builds a call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from fabrikito import TYPE_CHECKING
from fabrikito.offline.replies import Reply

if TYPE_CHECKING:
    from fabrikito.offline.exchange import Exchange

API = "gemini"
SHELL_TOOL = "run_shell_command"
CONTEXT_MARK = "<session_context>"
#: Answers that would make the CLI go on by itself, never given by the schema filler.
_FIXED_CHOICES = {"next_speaker": "user"}


def serves(path: str) -> bool:
    return "/models/" in path and path.endswith((":streamGenerateContent", ":generateContent", ":countTokens"))


def shell_reply(command: str, *, then: Reply | None = None) -> Reply:
    """A Gemini CLI shell call of ``command`` (it asks the user's approval before it runs)."""
    return Reply(tool=SHELL_TOOL, input={"command": command, "description": f"run {command}"}, then=then)


# -- reading a request -----------------------------------------------------------------------


def read(body: Any) -> tuple[str, list[tuple[str, str, bool]], list[str]]:
    """The prompt (the last user content's text, without the session context), its function
    responses as (id, output, is_error), and the names of the functions they answer."""
    contents = body.get("contents") if isinstance(body, dict) else None
    if not isinstance(contents, list):
        return "", [], []
    for content in reversed(contents):
        if not isinstance(content, dict) or content.get("role", "user") != "user":
            continue
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        texts = [str(p["text"]) for p in parts if "text" in p and not str(p["text"]).lstrip().startswith(CONTEXT_MARK)]
        calls: list[tuple[str, str, bool]] = []
        names: list[str] = []
        for part in parts:
            response = part.get("functionResponse")
            if isinstance(response, dict):
                result = response.get("response")
                is_error = isinstance(result, dict) and "error" in result and "output" not in result
                calls.append((str(response.get("id", "")), _result_text(result), is_error))
                names.append(str(response.get("name", "")))
        return "\n".join(texts), calls, names
    return "", [], []


def _result_text(result: Any) -> str:
    if isinstance(result, dict):
        for key in ("output", "error", "content"):
            if key in result:
                value = result[key]
                return value if isinstance(value, str) else json.dumps(value)
    return json.dumps(result)


def json_schema(body: Any) -> Mapping[str, Any] | None:
    """The JSON schema the call asks its answer to follow, if any."""
    config = body.get("generationConfig") if isinstance(body, dict) else None
    if not isinstance(config, dict):
        return None
    for key in ("responseJsonSchema", "responseSchema", "response_json_schema"):
        schema = config.get(key)
        if isinstance(schema, dict):
            return schema
    return None


def fill(schema: Mapping[str, Any], name: str = "") -> Any:
    """A value that fits ``schema`` (the subset of JSON schema Gemini CLI uses)."""
    kind = str(schema.get("type", "object")).lower()
    enum = schema.get("enum")
    if name in _FIXED_CHOICES and (not enum or _FIXED_CHOICES[name] in enum):
        return _FIXED_CHOICES[name]
    if isinstance(enum, list) and enum:
        return enum[0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {key: fill(sub, key) for key, sub in props.items() if isinstance(sub, dict)}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return False
    return "stand-in"


# -- answering ---------------------------------------------------------------------------------


def answer(ex: Exchange, seat: str, path: str, body: Any, raw: bytes) -> None:
    standin = ex.standin
    if path.endswith(":countTokens"):
        ex.record_plain(body)
        ex.send_json(200, {"totalTokens": max(1, len(raw) // 4)})
        return
    streamed = path.endswith(":streamGenerateContent")
    text, calls, names = read(body)
    # A response names its call's id when the call had one; else the call is found by its tool's name.
    pairs = zip(calls, names, strict=True)
    calls = [(use_id or standin.call_of(seat, name) or "", out, err) for (use_id, out, err), name in pairs]
    main = streamed and isinstance(body, dict) and bool(body.get("tools"))
    schema = json_schema(body)
    fixed = Reply(text=json.dumps(fill(schema))) if schema is not None else None
    reply, results = standin.pick(seat, text, calls, main=main, fixed=fixed)
    number = standin.next_id()
    call_id = f"call_standin_{number:06d}"
    standin.record_call(
        seat, ex.path, body, reply, call_id, streamed=streamed, text=text, results=results, api=API, turn=main
    )
    model = path.rsplit("/models/", 1)[1].split(":", 1)[0]
    if not streamed:
        ex.send_json(200, _chunk_json([*_text_parts(reply.text), *_call_parts(reply, call_id)], model, last=True))
        return
    ex.open_stream(f"req_standin_{number}")
    ex.hold(reply.delay)
    for event in _events(ex, reply, call_id, model):
        ex.chunk(event)
    ex.end_stream()


def _text_parts(text: str) -> list[dict[str, Any]]:
    return [{"text": text}] if text else []


def _call_parts(reply: Reply, call_id: str) -> list[dict[str, Any]]:
    if reply.tool is None:
        return []
    return [{"functionCall": {"id": call_id, "name": reply.tool, "args": dict(reply.input)}}]


def _chunk_json(parts: list[dict[str, Any]], model: str, *, last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    data: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if last:
        candidate["finishReason"] = "STOP"
        data["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
    return data


def _sse(data: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(data, separators=(',', ':'))}\r\n\r\n".encode()


def _events(ex: Exchange, reply: Reply, call_id: str, model: str) -> Iterator[bytes]:
    pieces = reply.pieces()
    for k, piece in enumerate(pieces):
        if k:
            ex.hold(reply.trickle)
        yield _sse(_chunk_json([{"text": piece}], model, last=False))
    yield _sse(_chunk_json(_call_parts(reply, call_id) or ([] if pieces else [{"text": ""}]), model, last=True))
