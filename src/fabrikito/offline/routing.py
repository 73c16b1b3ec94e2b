"""The routing of a stand-in's POST by path to the API that serves it.

Each model API the stand-in speaks is a module with ``serves(path)`` and
``answer(exchange, seat, path, body, raw)``: :mod:`~fabrikito.offline.api_messages`
(Anthropic), :mod:`~fabrikito.offline.api_openai` (OpenAI Responses) and
:mod:`~fabrikito.offline.api_gemini` (Gemini).  ``path`` is the request's path
with the ``/seat/<role>`` prefix taken off, ``seat`` that role.  This module sits
above them and the exchange's helpers, so that none of them imports another in a circle.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from fabrikito import TYPE_CHECKING
from fabrikito.offline import api_gemini, api_messages, api_openai
from fabrikito.offline.exchange import Exchange
from fabrikito.offline.replies import split_seat

if TYPE_CHECKING:
    from fabrikito.offline.answers import Answers

#: Tried in this order; the first whose ``serves`` accepts the path answers.
APIS = (api_messages, api_openai, api_gemini)


class RoutedExchange(Exchange):
    """An exchange whose POST goes to the first API that serves its path."""

    def do_POST(self) -> None:  # noqa: N802 (http.server calls it by this name)
        raw = self.read_body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        seat, rest = split_seat(urlsplit(self.path).path)
        try:
            for api in APIS:
                if api.serves(rest):
                    api.answer(self, seat, rest, body, raw)
                    break
            else:
                self.not_found(body, rest)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def handler_for(standin: Answers) -> type[Exchange]:
    """The request handler class of one stand-in server."""
    return type("StandInExchange", (RoutedExchange,), {"standin": standin})
