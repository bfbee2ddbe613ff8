"""The HTTP/1.1 server: one accept thread, one thread per connection, TLS on that thread.

Keep-alive works (requests are answered with Content-Length, or chunked for watches).
``stop()`` shuts down the listening socket and every open connection, then joins all threads.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["Exchange", "HTTPServer"]

_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class Exchange:
    """One request as the application sees it, with ways to answer it."""

    def __init__(self, handler: _Handler) -> None:
        self._h = handler
        self.method: str = handler.command
        self.target: str = handler.path
        self.headers = handler.headers
        self.status = 0
        self.streaming = False

    def body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self._h.rfile.read(length)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        return b""

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self._h.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self._h.rfile.readline()
                return b"".join(parts)
            parts.append(self._h.rfile.read(size))
            self._h.rfile.readline()

    def respond(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        for key, value in (headers or {}).items():
            lines.append(f"{key}: {value}")
        if self._h.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._h.wfile.write(head + body)

    def start_stream(self, content_type: str = "application/json") -> Callable[[bytes], None]:
        """Send 200 headers for a chunked stream; returns the chunk writer."""
        self.status = 200
        self.streaming = True
        head = (
            "HTTP/1.1 200 OK\r\n"
            f"Content-Type: {content_type}\r\n"
            "Transfer-Encoding: chunked\r\n"
            "Cache-Control: no-cache, private\r\n\r\n"
        ).encode("latin-1")
        self._h.wfile.write(head)
        wfile = self._h.wfile

        def write(data: bytes) -> None:
            if data:
                wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        return write

    def end_stream(self, abort: bool = False) -> None:
        if abort:
            self._h.close_connection = True
            return
        self._h.wfile.write(b"0\r\n\r\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "cloudcoil-sync-emulator"
    app: Callable[[Exchange], None]

    def handle_one_request(self) -> None:
        try:
            self.raw_requestline = self.rfile.readline(65537)
        except (OSError, ValueError):
            self.close_connection = True
            return
        if not self.raw_requestline:
            self.close_connection = True
            return
        if not self.parse_request():
            return
        exchange = Exchange(self)
        self.app(exchange)
        with contextlib.suppress(OSError, ValueError):
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HTTPServer:
    def __init__(
        self,
        app: Callable[[Exchange], None],
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._handler = type("Handler", (_Handler,), {"app": staticmethod(app)})
        self._ssl = ssl_context
        self._sock = socket.create_server((host, port), backlog=512)
        self.port: int = self._sock.getsockname()[1]
        self.host = host
        self.accepted = 0
        self._lock = threading.Lock()
        self._conns: dict[int, socket.socket] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self) -> None:
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"emulator-accept-{self.port}", daemon=True
        )
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, addr = self._sock.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                continue
            with self._lock:
                if self._stopping.is_set():
                    conn.close()
                    return
                self.accepted += 1
                ident = id(conn)
                self._conns[ident] = conn
                thread = threading.Thread(
                    target=self._serve, args=(conn, addr, ident), name="emulator-conn", daemon=True
                )
                self._threads[ident] = thread
            thread.start()

    def _serve(self, conn: socket.socket, addr: Any, ident: int) -> None:
        sock: socket.socket = conn
        try:
            if self._ssl is not None:
                conn.settimeout(10)
                sock = self._ssl.wrap_socket(conn, server_side=True)
                sock.settimeout(None)
                with self._lock:
                    self._conns[ident] = sock
            self._handler(sock, addr, self)
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            with self._lock:
                self._conns.pop(ident, None)
                self._threads.pop(ident, None)

    def close_connections(self) -> None:
        """Cut every open connection (clients see a reset or EOF)."""
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        self.close_connections()
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)
