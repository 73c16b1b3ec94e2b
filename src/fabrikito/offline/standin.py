"""A stand-in for the Anthropic Messages API, for running real Claude Code offline.

Claude Code pointed at ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/seat/<role>``
(any ``ANTHROPIC_API_KEY``) sends its model requests here.  The path prefix
``/seat/<role>`` survives into every request (``/seat/<role>/v1/messages?beta=true``),
so each request is credited to the seat that sent it.  A base URL without the
prefix is credited to the seat ``""``.

What Claude Code 2.1.316 sends (observed)
========================================

* At start, ``HEAD <base>/api/hello`` (a connectivity probe): answered ``200``.
* Each turn: ``POST <base>/v1/messages?beta=true`` with ``"stream": true`` and
  a ``tools`` list.  ``messages`` ends with the turn's ``user`` message (text
  blocks: ``<system-reminder>`` blocks, then the prompt) followed by a
  ``system``-role message (environment, date); a tool's follow-up ends with a
  ``user`` message holding ``tool_result`` blocks.
* With prompt suggestions on (``CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION=1``),
  after a turn a forked request, also streamed and with ``tools``, whose last
  user text starts ``[SUGGESTION MODE:``: answered with ``suggestion_text``.
* No non-streamed side requests (titles...) were seen offline; they are
  answered anyway, with a plain JSON message whose text is ``side_text``.

What is answered
================

* ``POST .../v1/messages`` with ``"stream": true``: Server-Sent Events
  (``message_start``, ``ping``, ``content_block_start/delta/stop``,
  ``message_delta``, ``message_stop``), chunked, ``HTTP/1.1`` keep-alive.
* ``POST .../v1/messages`` without ``stream``: one JSON message (``side_text``).
* ``POST .../v1/messages/count_tokens``: ``{"input_tokens": N}``.
* ``HEAD``/``GET`` of anything: ``200`` with an empty JSON object; other
  ``POST`` paths: ``404`` with an API-shaped JSON error.

Which reply a streamed request gets
===================================

Rules are tried in the order they were added.  A rule matches a request when
its ``seat`` is ``None`` or the request's seat, its ``on`` is the request's
kind, and its ``match`` is in the request's *text* (a substring, or a regular
expression searched with ``re.search`` when ``regex`` is true):

* ``on="prompt"`` (the default): requests whose last ``user`` message carries
  no ``tool_result``; the text is :attr:`Request.last_user_text`, that
  message's text blocks without the ``<system-reminder>`` ones.  A message
  from another session arrives here too (``Another Claude session sent a
  message: <cross-session-message ...>``), so a rule can answer it.
* ``on="tool_result"``: requests answering a tool call; the text is the
  tool results' content.

A one-shot rule (``once=True``, the default) is used up by its first match;
a persistent one (``once=False``) keeps matching.  Rules see only streamed
requests with a ``tools`` list unless the rule says ``main_only=False``, and
never the prompt-suggestion fork (it repeats the conversation and would fire a
trigger twice).

When a reply calls a tool, the follow-up request carrying that tool's result
gets the reply's ``then`` (default: the text ``done``), so a turn ends unless
``then`` calls another tool.  With no matching rule the reply is
``default_text`` (``ok``).

Replies: ``Reply(text=...)``, ``Reply(tool="Bash", input={...})`` (optionally
with text before the call) and ``delay=seconds`` on either, which sends
``message_start`` at once, then a ``ping`` every half second, then the rest
(the seat stays busy meanwhile).

Script file (``python -m fabrikito.offline.standin --port N --script FILE.json``)
=========================================================================

JSON (the ``//`` comments below are explanations, not part of the format)::

    {
      "default_text": "ok",            // optional
      "side_text": "ok",               // optional: non-streamed side requests
      "suggestion_text": "run the test suite",  // optional: the prompt-suggestion fork
      "rules": [
        {"seat": "em", "match": "kick off", "reply": {"text": "on it"}},
        {"match": "ping (\\\\w+)", "regex": true, "once": false,
         "reply": {"tool": "SendMessage", "input": {"to": "dev", "message": "hi"},
                   "then": {"text": "sent"}}},
        {"seat": "dev", "match": "build", "reply": {"text": "building", "delay": 20}},
        {"on": "tool_result", "match": "success", "reply": {"text": "good"}}
      ]
    }

Rule keys: ``match`` (required), ``seat``, ``regex``, ``once`` (default
true), ``on`` (``prompt``/``tool_result``), ``main_only`` (default true),
``reply``.  Reply keys: ``text``, ``tool``, ``input``, ``delay``, ``then``
(a reply).  The server prints one line per request to stderr and runs until
interrupted.

Records
=======

Every request is recorded as a :class:`Request` (seat, method, path, parsed
body, streamed or not, last user text, tool results).  ``requests()``,
``wait_for_request()``, ``last_user_texts()``, ``tool_results()`` and
``wait_for_tool_result()`` read them; waits run on a monotonic clock.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from fabrikito.base.values import replace
from fabrikito.offline.replies import (
    PING_INTERVAL,
    SEAT_PREFIX,
    SUGGESTION_MARK,
    Reply,
    Request,
    Rule,
    RuleKind,
    StandInTimeoutError,
    ToolResult,
    _content_text,
    last_user_message,
    message_json,
    raw_tool_results,
    split_seat,
    sse,
    sse_events,
    user_text,
)

__all__ = [
    "Reply",
    "Request",
    "Rule",
    "StandIn",
    "StandInTimeoutError",
    "ToolResult",
    "load_script",
    "main",
]

# -- the server -------------------------------------------------------------


class StandIn:
    """The stand-in server.  Start with :meth:`start` (or ``with``); stop with :meth:`stop`."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        default_text: str = "ok",
        side_text: str = "ok",
        suggestion_text: str = "run the test suite",
        rules: Sequence[Rule] = (),
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.host = host
        self._port = port
        self.default_text = default_text
        self.side_text = side_text
        self.suggestion_text = suggestion_text
        self._log = log
        self._rules: list[Rule] = list(rules)
        self._records: list[Request] = []
        self._calls: dict[str, tuple[str, str, Mapping[str, Any], Reply | None]] = {}
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------

    def start(self) -> StandIn:
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer((self.host, self._port), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._port = int(httpd.server_address[1])
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, name=f"standin-{self._port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    def base_url(self, seat: str) -> str:
        """The ``ANTHROPIC_BASE_URL`` for ``seat``."""
        if not seat or "/" in seat:
            raise ValueError(f"a seat name must be non-empty and have no '/': {seat!r}")
        return f"{self.url}{SEAT_PREFIX}{seat}"

    # -- script -------------------------------------------------------------

    def add_rule(self, rule: Rule) -> Rule:
        with self._cond:
            self._rules.append(rule)
        return rule

    def on(
        self,
        match: str,
        reply: Reply | str,
        *,
        seat: str | None = None,
        regex: bool = False,
        once: bool = True,
        kind: RuleKind = "prompt",
        main_only: bool = True,
    ) -> Rule:
        """Add a rule; a ``str`` reply means a text reply."""
        answer = Reply(text=reply) if isinstance(reply, str) else reply
        return self.add_rule(
            Rule(match=match, reply=answer, seat=seat, regex=regex, once=once, on=kind, main_only=main_only)
        )

    def remove_rule(self, rule: Rule) -> None:
        with self._cond:
            if rule in self._rules:
                self._rules.remove(rule)

    def rules(self) -> list[Rule]:
        with self._cond:
            return list(self._rules)

    # -- records ------------------------------------------------------------

    def requests(self, seat: str | None = None) -> list[Request]:
        with self._cond:
            return [r for r in self._records if seat is None or r.seat == seat]

    def main_requests(self, seat: str | None = None) -> list[Request]:
        return [r for r in self.requests(seat) if r.is_main]

    def mark(self) -> int:
        """The number of requests so far: pass it as ``since`` to wait only for later ones."""
        with self._cond:
            return len(self._records)

    def last_user_texts(self, seat: str | None = None, *, main_only: bool = True) -> list[str]:
        return [r.last_user_text for r in self.requests(seat) if r.is_messages and (r.is_main or not main_only)]

    def tool_results(self, seat: str | None = None, tool: str | None = None) -> list[ToolResult]:
        out: list[ToolResult] = []
        seen: set[str] = set()
        for r in self.requests(seat):
            for result in r.tool_results:
                if result.tool_use_id in seen:
                    continue
                seen.add(result.tool_use_id)
                if tool is None or result.tool == tool:
                    out.append(result)
        return out

    def wait_for_request(
        self,
        seat: str | None,
        match: str | Callable[[Request], bool],
        timeout: float = 30.0,
        *,
        since: int = 0,
        main_only: bool = True,
    ) -> Request:
        """The first request (index >= ``since``) from ``seat`` whose last user text holds ``match``.

        ``match`` may be a predicate on the :class:`Request` instead.  With
        ``main_only`` a substring is looked for only in main-loop requests.
        """

        def check(r: Request) -> bool:
            if r.index < since or (seat is not None and r.seat != seat):
                return False
            if callable(match):
                return match(r)
            return (r.is_main or not main_only) and r.is_messages and match in r.last_user_text

        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for r in self._records:
                    if check(r):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        raise StandInTimeoutError(self._timeout_message(seat, match, timeout, since))

    def wait_for_tool_result(self, seat: str | None, tool: str, timeout: float = 30.0) -> ToolResult:
        deadline = time.monotonic() + timeout
        while True:
            found = self.tool_results(seat, tool)
            if found:
                return found[0]
            left = deadline - time.monotonic()
            if left <= 0:
                raise StandInTimeoutError(self._timeout_message(seat, f"a {tool} tool result", timeout, 0))
            with self._cond:
                self._cond.wait(min(left, 0.5))

    def _timeout_message(self, seat: str | None, match: object, timeout: float, since: int) -> str:
        shown = match if isinstance(match, str) else getattr(match, "__name__", "predicate")
        lines = [f"no request from seat {seat!r} matching {shown!r} within {timeout:g}s; requests since #{since}:"]
        for r in self.requests():
            if r.index >= since:
                text = r.last_user_text[-160:].replace("\n", "\\n")
                kind = r.kind
                lines.append(f"  #{r.index} seat={r.seat!r} {r.method} {r.path} {kind}: {text!r}")
        return "\n".join(lines)

    # -- answering (called from handler threads) ------------------------------

    def _record(self, request: Request) -> None:
        with self._cond:
            request = replace(request, index=len(self._records))
            self._records.append(request)
            self._cond.notify_all()
        if self._log is not None:
            kind = request.kind
            text = request.last_user_text[-100:].replace("\n", "\\n")
            self._log(f"#{request.index} {request.seat or '-'} {request.method} {request.path} {kind} {text!r}")

    def _choose(self, seat: str, body: Any, streamed: bool) -> tuple[Reply, list[ToolResult], str]:
        """Pick the reply for a messages request; return it, the tool results and the user text."""
        message = last_user_message(body)
        text = user_text(message)
        raw = raw_tool_results(message)
        results: list[ToolResult] = []
        follow_up: Reply | None = None
        answered_ours = False
        with self._cond:
            for block in raw:
                use_id = str(block.get("tool_use_id", ""))
                call = self._calls.get(use_id)
                results.append(
                    ToolResult(
                        seat=seat,
                        tool_use_id=use_id,
                        tool=call[1] if call else None,
                        input=call[2] if call else None,
                        content=_content_text(block.get("content", "")),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
                if call is not None and call[0] == seat:
                    answered_ours = True
                    if call[3] is not None:
                        follow_up = call[3]
            if not streamed:
                return Reply(text=self.side_text), results, text
            if text.startswith(SUGGESTION_MARK):
                return Reply(text=self.suggestion_text), results, text
            main = isinstance(body, dict) and bool(body.get("tools"))
            kind: RuleKind = "tool_result" if raw else "prompt"
            subject = "\n".join(r.content for r in results) if raw else text
            for rule in self._rules:
                if rule.seat is not None and rule.seat != seat:
                    continue
                if rule.on != kind or (rule.main_only and not main):
                    continue
                if rule.matches(subject):
                    if rule.once:
                        self._rules.remove(rule)
                    return rule.reply, results, text
        if follow_up is not None:
            return follow_up, results, text
        if answered_ours:
            return Reply(text="done"), results, text
        return Reply(text=self.default_text), results, text

    def _note_call(self, seat: str, tool_use_id: str, reply: Reply) -> None:
        if reply.tool is None:
            return
        with self._cond:
            self._calls[tool_use_id] = (seat, reply.tool, dict(reply.input), reply.then)

    def _next_id(self) -> int:
        with self._cond:
            return next(self._ids)


def _make_handler(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fabrikito-standin"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the records are the log

        # -- helpers --------------------------------------------------------

        def _read_body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                return self.rfile.read(length)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                return b"".join(chunks)
            return b""

        def _send_json(self, status: int, data: Any, *, head: bool = False) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("request-id", f"req_standin_{standin._next_id()}")
            self.end_headers()
            if not head:
                self.wfile.write(payload)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _record_plain(self, body: Any = None) -> None:
            seat, _ = split_seat(urlsplit(self.path).path)
            standin._record(
                Request(
                    index=-1,
                    seat=seat,
                    method=self.command,
                    path=self.path,
                    body=body,
                    streamed=False,
                    last_user_text="",
                    tool_results=(),
                    at=time.monotonic(),
                )
            )

        # -- verbs ----------------------------------------------------------

        def do_HEAD(self) -> None:
            self._record_plain()
            self._send_json(200, {}, head=True)

        def do_GET(self) -> None:
            self._record_plain()
            self._send_json(200, {})

        def do_POST(self) -> None:
            raw = self._read_body()
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            seat, rest = split_seat(urlsplit(self.path).path)
            if rest.endswith("/v1/messages/count_tokens"):
                self._record_plain(body)
                self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
                return
            if not rest.endswith("/v1/messages"):
                self._record_plain(body)
                self._send_json(
                    404, {"type": "error", "error": {"type": "not_found_error", "message": f"stand-in: no {rest}"}}
                )
                return
            streamed = isinstance(body, dict) and bool(body.get("stream"))
            reply, results, text = standin._choose(seat, body, streamed)
            model = str(body.get("model", "claude-standin")) if isinstance(body, dict) else "claude-standin"
            number = standin._next_id()
            message_id = f"msg_standin_{number:06d}"
            tool_use_id = f"toolu_standin_{number:06d}"
            standin._note_call(seat, tool_use_id, reply)
            standin._record(
                Request(
                    index=-1,
                    seat=seat,
                    method="POST",
                    path=self.path,
                    body=body,
                    streamed=streamed,
                    last_user_text=text,
                    tool_results=tuple(results),
                    at=time.monotonic(),
                    reply=reply,
                )
            )
            if not streamed:
                self._send_json(200, message_json(reply, model, message_id, tool_use_id))
                return
            self._stream(reply, model, message_id, tool_use_id)

        def _stream(self, reply: Reply, model: str, message_id: str, tool_use_id: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", f"req_standin_{message_id}")
            self.end_headers()
            start = message_json(Reply(), model, message_id, tool_use_id)
            start.update(content=[], stop_reason=None)
            start["usage"] = {
                "input_tokens": 10,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
            try:
                self._chunk(sse("message_start", {"type": "message_start", "message": start}))
                deadline = time.monotonic() + reply.delay
                while not standin._stopping.is_set():
                    self._chunk(sse("ping", {"type": "ping"}))
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    standin._stopping.wait(min(PING_INTERVAL, left))
                for event in sse_events(reply, model, message_id, tool_use_id):
                    self._chunk(event)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    return Handler


# -- command line -----------------------------------------------------------


def load_script(path: str) -> tuple[dict[str, str], list[Rule]]:
    """Read a JSON script file: (options, rules)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a script is a JSON object with 'rules'")
    options = {k: str(data[k]) for k in ("default_text", "side_text", "suggestion_text") if k in data}
    rules = [Rule.from_json(r) for r in data.get("rules", [])]
    return options, rules


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fabrikito.offline.standin", description="Serve a scripted stand-in for the Messages API."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    parser.add_argument("--script", help="JSON script file (see the module docstring)")
    parser.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    args = parser.parse_args(argv)
    options: dict[str, str] = {}
    rules: list[Rule] = []
    if args.script:
        options, rules = load_script(args.script)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    standin = StandIn(host=args.host, port=args.port, rules=rules, log=None if args.quiet else log, **options)
    standin.start()
    print(f"stand-in listening on {standin.url} (seat base URL: {standin.url}/seat/<role>)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        standin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
