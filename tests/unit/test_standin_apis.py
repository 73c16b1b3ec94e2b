"""The stand-in's three model APIs over real HTTP: Messages, OpenAI Responses (Codex), Gemini."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from fabrikito.offline import api_gemini, api_openai
from fabrikito.offline.replies import Reply
from fabrikito.offline.standin import StandIn


@pytest.fixture
def standin() -> Iterator[StandIn]:
    server = StandIn().start()
    yield server
    server.stop()


def _post(url: str, body: Any) -> tuple[int, str]:
    assert url.startswith("http://127.0.0.1:"), url
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (the stand-in on loopback)
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _events(stream: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in stream.splitlines() if line.startswith("data:")]


# -- OpenAI Responses -----------------------------------------------------------------------------


def _responses_body(prompt: str, *, tools: bool = True, after: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
        *(after or []),
    ]
    return {"model": "standin-model", "stream": True, "input": items, "tools": [{"name": "x"}] if tools else []}


def test_responses_stream_text_and_completion(standin: StandIn) -> None:
    standin.on("hello", Reply(text="hi there, friend", trickle=0.01), seat="cx")
    status, stream = _post(standin.base_url("cx") + "/v1/responses", _responses_body("say hello"))
    assert status == 200
    events = _events(stream)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 3 and "".join(deltas) == "hi there, friend"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done[0]["content"][0]["text"] == "hi there, friend"
    assert events[-1]["response"]["usage"]["total_tokens"] > 0
    (request,) = standin.requests("cx")
    assert request.api == "responses" and request.is_main and request.last_user_text == "say hello"


def test_responses_tool_call_and_its_follow_up(standin: StandIn) -> None:
    call = api_openai.shell_reply("touch x", then=Reply(text="all done"))
    standin.on("run", call, seat="cx")
    events = _events(_post(standin.base_url("cx") + "/v1/responses", _responses_body("run it"))[1])
    (item,) = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    args = json.loads(item["arguments"])
    assert args["cmd"] == "touch x" and args["sandbox_permissions"] == "require_escalated"
    after = [
        {"type": "function_call", "call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"]},
        {"type": "function_call_output", "call_id": item["call_id"], "output": "exit 0"},
    ]
    events = _events(_post(standin.base_url("cx") + "/v1/responses", _responses_body("run it", after=after))[1])
    texts = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert texts == ["all done"]
    result = standin.wait_for_tool_result("cx", "exec_command", timeout=1)
    assert result.content == "exit 0" and result.input == dict(call.input)


def test_responses_title_call_is_not_a_turn(standin: StandIn) -> None:
    standin.on("hello", "scripted", seat="cx")
    events = _events(_post(standin.base_url("cx") + "/v1/responses", _responses_body("hello", tools=False))[1])
    assert [e["delta"] for e in events if e["type"] == "response.output_text.delta"] == ["ok"]
    assert standin.rules(), "a turn's rule is not used up by the title call"
    assert standin.requests("cx")[0].kind == "stream"


# -- Gemini ------------------------------------------------------------------------------------


def _gemini_url(standin: StandIn, call: str, model: str = "gemini-3.1-pro-preview") -> str:
    return f"{standin.base_url('gm')}/v1beta/models/{model}:{call}"


def _gemini_body(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": parts}], **extra}


TOOLS = [{"functionDeclarations": [{"name": "run_shell_command"}]}]


def test_gemini_routing_call_gets_json_that_fits_its_schema(standin: StandIn) -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER"},
            "model_choice": {"type": "STRING", "enum": ["flash", "pro"]},
            "next_speaker": {"type": "STRING", "enum": ["model", "user"]},
        },
    }
    body = _gemini_body([{"text": "hello"}], generationConfig={"responseJsonSchema": schema})
    status, text = _post(_gemini_url(standin, "generateContent", "gemini-3.5-flash-lite"), body)
    assert status == 200
    answer = json.loads(json.loads(text)["candidates"][0]["content"]["parts"][0]["text"])
    assert answer == {
        "complexity_reasoning": "stand-in",
        "complexity_score": 1,
        "model_choice": "flash",
        "next_speaker": "user",
    }
    assert standin.requests("gm")[0].kind == "side"


def test_gemini_stream_text_without_the_session_context(standin: StandIn) -> None:
    standin.on("hello", Reply(text="hi there", trickle=0.01), seat="gm")
    parts = [{"text": "<session_context>cwd...</session_context>"}, {"text": "say hello"}]
    status, stream = _post(_gemini_url(standin, "streamGenerateContent") + "?alt=sse", _gemini_body(parts, tools=TOOLS))
    assert status == 200
    chunks = _events(stream)
    text = "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"])
    assert text == "hi there" and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    (request,) = standin.requests("gm")
    assert request.api == "gemini" and request.is_main and request.last_user_text == "say hello"


@pytest.mark.parametrize("with_id", [True, False])
def test_gemini_function_call_and_its_response(standin: StandIn, with_id: bool) -> None:
    standin.on("run", api_gemini.shell_reply("touch y", then=Reply(text="ran it")), seat="gm")
    url = _gemini_url(standin, "streamGenerateContent") + "?alt=sse"
    chunks = _events(_post(url, _gemini_body([{"text": "run it"}], tools=TOOLS))[1])
    (call,) = [p["functionCall"] for c in chunks for p in c["candidates"][0]["content"]["parts"] if "functionCall" in p]
    assert call["name"] == "run_shell_command" and call["args"]["command"] == "touch y"
    response: dict[str, Any] = {"name": call["name"], "response": {"output": "Output: (empty)"}}
    if with_id:
        response["id"] = call["id"]
    chunks = _events(_post(url, _gemini_body([{"functionResponse": response}], tools=TOOLS))[1])
    assert "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"]) == "ran it"
    result = standin.wait_for_tool_result("gm", "run_shell_command", timeout=1)
    assert result.content == "Output: (empty)"


def test_gemini_count_tokens_and_unknown_paths(standin: StandIn) -> None:
    status, text = _post(_gemini_url(standin, "countTokens"), _gemini_body([{"text": "x" * 400}]))
    assert status == 200 and json.loads(text)["totalTokens"] > 0
    status, _ = _post(standin.base_url("gm") + "/v1beta/nothing", {})
    assert status == 404


# -- Messages still --------------------------------------------------------------------------------


def test_messages_api_unchanged(standin: StandIn) -> None:
    standin.on("hello", "from claude's stand-in", seat="cl")
    body = {"stream": True, "tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": "say hello"}]}
    stream = _post(standin.base_url("cl") + "/v1/messages", body)[1]
    deltas = [e["delta"].get("text") for e in _events(stream) if e["type"] == "content_block_delta"]
    assert deltas == ["from claude's stand-in"]
    status, text = _post(standin.base_url("cl") + "/v1/messages/count_tokens", body)
    assert status == 200 and json.loads(text)["input_tokens"] > 0
    assert [r.kind for r in standin.requests("cl")] == ["main", "other"]
