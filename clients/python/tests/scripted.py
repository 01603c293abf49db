"""A scripted HTTP server on loopback: answers each request with the next scripted answer and
records what it received. Real sockets and a real HTTP exchange, for the retry rules; the
interop suite checks the same rules against a real wharf."""

from __future__ import annotations

import http.server
import json
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Close the connection without answering (a reset after the request was sent).
    drop: bool = False


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class ScriptedServer:
    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.received: list[Received] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("Content-Length", "0"))
                outer.received.append(Received(self.path, dict(self.headers), self.rfile.read(length)))
                reply = outer.replies.pop(0) if outer.replies else Reply(500, {"code": "script-ended"})
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def decided(outcome: str, reason: str, ack: int, status: int = 200, **extra: Any) -> Reply:
    return Reply(status, {"outcome": outcome, "reason": reason, "correlation_id": "c-1", "acknowledged_sequence": ack, **extra})


def error(status: int, code: str, reason: str, **headers: str) -> Reply:
    return Reply(status, {"code": code, "reason": reason, "correlation_id": "c-1"}, {k.replace("_", "-"): v for k, v in headers.items()})
