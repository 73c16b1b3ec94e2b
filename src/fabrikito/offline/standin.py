"""A stand-in model server, for running real Claude Code, Codex CLI and Gemini CLI offline.

One server speaks three model APIs, told apart by the request's path
(:mod:`fabrikito.offline.exchange`): the Anthropic Messages API (below, and
:mod:`~fabrikito.offline.api_messages`), the OpenAI Responses API for Codex CLI
(:mod:`~fabrikito.offline.api_openai`) and the Gemini API for Gemini CLI
(:mod:`~fabrikito.offline.api_gemini`).  The rules, replies and records are
the same for all three; a reply's ``tool`` names the calling agent's tool
(``Bash`` for Claude Code, ``exec_command`` for Codex, ``run_shell_command``
for Gemini; each API module has a ``shell_reply`` helper).  Codex's base URL
is ``<url>/seat/<role>/v1``; Gemini's ``GOOGLE_GEMINI_BASE_URL`` is
``<url>/seat/<role>``: both keep the prefix, as Claude Code does.

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
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import ThreadingHTTPServer

from fabrikito.offline.answers import Answers
from fabrikito.offline.replies import (
    SEAT_PREFIX,
    Reply,
    Request,
    Rule,
    RuleKind,
    StandInTimeoutError,
    ToolResult,
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


class StandIn(Answers):
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
        super().__init__(
            default_text=default_text, side_text=side_text, suggestion_text=suggestion_text, rules=rules, log=log
        )
        self.host = host
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------

    def start(self) -> StandIn:
        from fabrikito.offline.routing import handler_for

        handler = handler_for(self)
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
        self.stopping.set()
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
        return [r.last_user_text for r in self.requests(seat) if r.is_model_call and (r.is_main or not main_only)]

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
            return (r.is_main or not main_only) and r.is_model_call and match in r.last_user_text

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
