"""The stand-in's HTTP side: one exchange and the helpers every API's answer uses.

A POST is routed to its API by :mod:`~fabrikito.offline.routing`, above this
module and the APIs.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from fabrikito import TYPE_CHECKING
from fabrikito.offline.replies import PING_INTERVAL, Request, split_seat

if TYPE_CHECKING:
    from fabrikito.offline.answers import Answers


class Exchange(BaseHTTPRequestHandler):
    """One HTTP exchange with the stand-in: the helpers every API's answer uses."""

    protocol_version = "HTTP/1.1"
    server_version = "fabrikito-standin"
    standin: Answers  # set on the class :func:`fabrikito.offline.routing.handler_for` makes for one server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the records are the log

    # -- helpers --------------------------------------------------------

    def read_body(self) -> bytes:
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

    def send_json(self, status: int, data: Any, *, head: bool = False) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", f"req_standin_{self.standin.next_id()}")
        self.end_headers()
        if not head:
            self.wfile.write(payload)

    def open_stream(self, request_id: str) -> None:
        """Start a chunked ``text/event-stream`` answer."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", request_id)
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def hold(self, seconds: float, keepalive: bytes | None = None) -> None:
        """Wait ``seconds`` (less if the stand-in stops), sending ``keepalive`` now and every half second."""
        deadline = time.monotonic() + seconds
        while not self.standin.stopping.is_set():
            if keepalive is not None:
                self.chunk(keepalive)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.standin.stopping.wait(min(PING_INTERVAL, left))

    def record_plain(self, body: Any = None) -> None:
        seat, _ = split_seat(urlsplit(self.path).path)
        self.standin.record(
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

    def not_found(self, body: Any, rest: str) -> None:
        self.record_plain(body)
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"stand-in: no {rest}"}})

    # -- verbs ----------------------------------------------------------

    def do_HEAD(self) -> None:
        self.record_plain()
        self.send_json(200, {}, head=True)

    def do_GET(self) -> None:
        self.record_plain()
        self.send_json(200, {})
