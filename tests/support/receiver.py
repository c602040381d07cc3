"""A real HTTP endpoint on loopback that the gateway POSTs to (Chorus callbacks, completion
webhooks): it keeps every POST as it came (headers, raw body) and answers 503 to the first
`fail_first` of them, 200 after."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    status: int  # what the receiver answered


class PostReceiver:
    def __init__(self) -> None:
        self.received: list[Post] = []
        self.fail_first = 0
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["content-length"]))
                with lock:
                    status = 503 if len(receiver.received) < receiver.fail_first else 200
                    receiver.received.append(Post(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                        status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def delivered(self) -> list[Post]:
        """The POSTs answered 200."""
        return [post for post in self.received if post.status == 200]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
