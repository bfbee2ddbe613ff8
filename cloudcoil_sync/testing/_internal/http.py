"""The HTTP/1.1 server: one accept thread, one thread per connection, TLS on that thread.

Keep-alive works (requests are answered with Content-Length, or chunked for watches).
``stop()`` shuts down the listening socket and every open connection, then joins all threads.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["MAX_BODY_BYTES", "BodyTooLarge", "Exchange", "HTTPServer"]

# kube-apiserver's limit on a request body (MaxRequestBodyBytes); checked before reading.
MAX_BODY_BYTES = 3 * 1024 * 1024
# What an unread body may be drained before the next request, as Go's net/http does (256 KiB);
# past it the connection is closed instead.
_DRAIN_BYTES = 256 * 1024


class BodyTooLarge(ValueError):
    """The request body is over MAX_BODY_BYTES (the connection closes after the answer)."""


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
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class Headers(dict[str, str]):
    """Request headers with case-insensitive ``get`` (keys are stored lower-cased)."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


class Exchange:
    """One request as the application sees it, with ways to answer it."""

    def __init__(
        self, method: str, target: str, headers: Headers, rfile: Any, send: Callable[[bytes], Any]
    ) -> None:
        self.method = method
        self.target = target
        self.headers = headers
        self.status = 0
        self.streaming = False
        self.close_connection = headers.get("connection", "").lower() == "close"
        self._rfile = rfile
        self._send = send
        self._sock: socket.socket | None = None
        self.before_send: Callable[[int], None] = lambda status: None
        self._body_read = False

    def body(self) -> bytes:
        """The request body; BodyTooLarge (nothing more read) when it is over MAX_BODY_BYTES."""
        if self._body_read:
            return b""
        length = self._declared_length()
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the rest is never read
            raise BodyTooLarge(f"limit is {MAX_BODY_BYTES}")
        self._body_read = True
        if self.headers.get("expect", "").lower() == "100-continue":
            self._send(b"HTTP/1.1 100 Continue\r\n\r\n")
        if length:
            data: bytes = self._rfile.read(length)
            return data
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            return self._read_chunked()
        return b""

    def discard_body(self) -> None:
        """Drop an unread body before the next request; a large or chunked one closes the
        connection instead of being read."""
        if self._body_read:
            return
        if self._too_large_to_drain():
            self.close_connection = True
            return
        self.body()

    def _too_large_to_drain(self) -> bool:
        if self._body_read:
            return False
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            return True
        try:
            return self._declared_length() > _DRAIN_BYTES
        except ValueError:
            return True

    def _declared_length(self) -> int:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            raise ValueError("malformed Content-Length") from None
        if length < 0:
            raise ValueError("malformed Content-Length")
        return length

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size = int(self._rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self._rfile.readline(1024)
                return b"".join(parts)
            total += size
            if total > MAX_BODY_BYTES:
                self.close_connection = True
                raise BodyTooLarge(f"limit is {MAX_BODY_BYTES}")
            parts.append(self._rfile.read(size))
            self._rfile.readline(1024)

    def respond(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        self.status = status
        self.before_send(status)
        if self._too_large_to_drain():  # answered without its body: say the connection ends
            self.close_connection = True
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        for key, value in (headers or {}).items():
            lines.append(f"{key}: {value}")
        lines.extend(f"Warning: {warning}" for warning in warnings)  # one header each
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._send(head + body)

    def start_stream(
        self, content_type: str = "application/json", warnings: Sequence[str] = ()
    ) -> Callable[[bytes], None]:
        """Send 200 headers for a chunked stream; returns the chunk writer."""
        self.status = 200
        self.before_send(200)
        self.streaming = True
        warned = "".join(f"Warning: {warning}\r\n" for warning in warnings)
        self._send(
            (
                "HTTP/1.1 200 OK\r\n"
                f"Content-Type: {content_type}\r\n"
                "Transfer-Encoding: chunked\r\n"
                f"{warned}Cache-Control: no-cache, private\r\n\r\n"
            ).encode("latin-1")
        )
        send = self._send

        def write(data: bytes) -> None:
            if data:
                send(b"%x\r\n%s\r\n" % (len(data), data))

        return write

    def peer_gone(self) -> bool:
        """During a stream the client sends nothing: a readable socket means it closed."""
        if self._sock is None:
            return False
        # poll, not select.select: select fails on descriptors numbered past 1024, which
        # would have ended every watch of a process holding that many.
        poller = select.poll()
        try:
            poller.register(self._sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def end_stream(self, abort: bool = False) -> None:
        if abort:
            self.close_connection = True
            return
        self._send(b"0\r\n\r\n")


def _read_request(rfile: Any) -> tuple[str, str, str, Headers] | None:
    """Request line and headers, or None at end of connection."""
    line = rfile.readline(65537)
    while line in (b"\r\n", b"\n"):  # tolerate stray newlines between requests
        line = rfile.readline(65537)
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        raise ValueError(f"malformed request line {line[:80]!r}")
    headers = Headers()
    for _ in range(200):
        raw = rfile.readline(65537)
        if raw in (b"\r\n", b"\n", b""):
            break
        key, _, value = raw.decode("latin-1").partition(":")
        name, value = key.strip().lower(), value.strip()
        # A repeated header is one comma-separated list (RFC 9110), e.g. Impersonate-Group.
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return parts[0], parts[1], parts[2], headers


def serve_connection(sock: socket.socket, app: Callable[[Exchange], None]) -> None:
    """Answer requests on one keep-alive connection until it closes."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rfile = sock.makefile("rb", buffering=65536)
    try:
        while True:
            request = _read_request(rfile)
            if request is None:
                return
            method, target, version, headers = request
            exchange = Exchange(method, target, headers, rfile, sock.sendall)
            exchange._sock = sock
            if version == "HTTP/1.0":
                exchange.close_connection = True
            app(exchange)
            if not exchange.close_connection:
                exchange.discard_body()  # before the next request (or close instead)
            if exchange.close_connection:
                return
    finally:
        rfile.close()


class HTTPServer:
    def __init__(
        self,
        app: Callable[[Exchange], None],
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._app = app
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
            serve_connection(sock, self._app)
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
