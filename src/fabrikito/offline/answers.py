"""What the stand-in answers and records, apart from its HTTP server.

:class:`Answers` holds the script (its rules) and the records, and picks the reply to each model call;
the APIs (:mod:`~fabrikito.offline.api_messages`, :mod:`~fabrikito.offline.api_openai`,
:mod:`~fabrikito.offline.api_gemini`) and the exchange's helpers (:mod:`~fabrikito.offline.exchange`)
call it from the handler threads.  :class:`~fabrikito.offline.standin.StandIn` is an :class:`Answers`
that also serves HTTP, its script and its waits.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fabrikito.base.values import replace
from fabrikito.offline.replies import Reply, Request, Rule, RuleKind, ToolResult


class Answers:
    """The stand-in's script, records and replies (thread-safe: one condition guards them)."""

    def __init__(
        self,
        *,
        default_text: str,
        side_text: str,
        suggestion_text: str,
        rules: Sequence[Rule],
        log: Callable[[str], None] | None,
    ) -> None:
        self.default_text = default_text
        self.side_text = side_text
        self.suggestion_text = suggestion_text
        self._log = log
        self._rules: list[Rule] = list(rules)
        self._records: list[Request] = []
        self._calls: dict[str, tuple[str, str, Mapping[str, Any], Reply | None]] = {}
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self.stopping = threading.Event()

    # -- answering (called from handler threads) ------------------------------

    def record(self, request: Request) -> None:
        with self._cond:
            request = replace(request, index=len(self._records))
            self._records.append(request)
            self._cond.notify_all()
        if self._log is not None:
            kind = request.kind
            text = request.last_user_text[-100:].replace("\n", "\\n")
            self._log(f"#{request.index} {request.seat or '-'} {request.method} {request.path} {kind} {text!r}")

    def pick(
        self,
        seat: str,
        text: str,
        calls: Sequence[tuple[str, str, bool]],
        *,
        main: bool,
        fixed: Reply | None = None,
    ) -> tuple[Reply, list[ToolResult]]:
        """The reply to a model call of any API, and the tool results it carries.

        ``text`` is the call's prompt text, ``calls`` its tool results as (call id, content,
        is_error), ``main`` whether it is a main-loop turn (rules with ``main_only`` see only
        those).  ``fixed`` answers it regardless of the rules (the tool results are still read).
        """
        results: list[ToolResult] = []
        follow_up: Reply | None = None
        answered_ours = False
        with self._cond:
            for use_id, content, is_error in calls:
                call = self._calls.get(use_id)
                results.append(
                    ToolResult(
                        seat=seat,
                        tool_use_id=use_id,
                        tool=call[1] if call else None,
                        input=call[2] if call else None,
                        content=content,
                        is_error=is_error,
                    )
                )
                if call is not None and call[0] == seat:
                    answered_ours = True
                    if call[3] is not None:
                        follow_up = call[3]
            if fixed is not None:
                return fixed, results
            kind: RuleKind = "tool_result" if calls else "prompt"
            subject = "\n".join(r.content for r in results) if calls else text
            for rule in self._rules:
                if rule.seat is not None and rule.seat != seat:
                    continue
                if rule.on != kind or (rule.main_only and not main):
                    continue
                if rule.matches(subject):
                    if rule.once:
                        self._rules.remove(rule)
                    return rule.reply, results
        if follow_up is not None:
            return follow_up, results
        if answered_ours:
            return Reply(text="done"), results
        return Reply(text=self.default_text), results

    def call_of(self, seat: str, tool: str) -> str | None:
        """The id of the latest call of ``tool`` the stand-in made to ``seat`` (for an API that
        may answer a call by its tool's name only)."""
        with self._cond:
            for use_id, call in reversed(self._calls.items()):
                if call[0] == seat and call[1] == tool:
                    return use_id
        return None

    def record_call(
        self,
        seat: str,
        path: str,
        body: Any,
        reply: Reply,
        call_id: str,
        *,
        streamed: bool,
        text: str,
        results: Sequence[ToolResult],
        api: str = "",
        turn: bool = False,
    ) -> None:
        """A model call answered with ``reply``: its tool call (if any) noted under ``call_id``, the call recorded."""
        self.note_call(seat, call_id, reply)
        self.record(
            Request(
                index=-1,
                seat=seat,
                method="POST",
                path=path,
                body=body,
                streamed=streamed,
                last_user_text=text,
                tool_results=tuple(results),
                at=time.monotonic(),
                reply=reply,
                api=api,
                turn=turn,
            )
        )

    def note_call(self, seat: str, tool_use_id: str, reply: Reply) -> None:
        if reply.tool is None:
            return
        with self._cond:
            self._calls[tool_use_id] = (seat, reply.tool, dict(reply.input), reply.then)

    def next_id(self) -> int:
        with self._cond:
            return next(self._ids)
