"""A loopback HTTP server whose streamed answers stay open until the client goes away."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.connection.settimeout(30)  # a client that never goes away cannot hold the test
        if self.path == "/ok":
            self._answer({"Content-Length": "3"}, b"ok\n")
        elif self.path == "/stream":  # chunked, keep-alive: the connection keeps the socket
            self._answer({"Transfer-Encoding": "chunked"}, b"6\r\nhello\n\r\n")
            self._until_the_client_leaves()
        else:  # Connection: close: http.client hands the socket to the response
            self._answer({"Connection": "close"}, b"hello\n")
            self._until_the_client_leaves()

    def _answer(self, headers: dict[str, str], body: bytes) -> None:
        self.send_response(200)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _until_the_client_leaves(self) -> None:
        with contextlib.suppress(OSError):
            self.rfile.read(1)
        self.close_connection = True


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads
    block_on_close = True

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    httpd = LoopbackServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, name="compat-server")
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        thread.join(timeout=10)
        httpd.server_close()
