"""Plain-HTTP health and metrics server: ``/healthz``, ``/readyz``, ``/metrics``, one thread.

A single selector loop serves every connection without blocking on any one of them: an idle
or slow client only holds its own slot until its 5 s read deadline (answered 408). Requests
are tiny, so one thread is plenty; the health and readiness callables must be quick (they run
on that thread). Every answer closes its connection; nothing is cached by clients.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

from prometheus_client import CollectorRegistry, generate_latest

__all__ = ["HealthServer", "HealthServerError"]

logger = logging.getLogger(__name__)

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_HEADER_LIMIT = 8192


class HealthServerError(RuntimeError):
    """The health server could not start (typically: the address is in use)."""


@dataclass
class _Connection:
    sock: socket.socket
    deadline: float
    inbound: bytearray = field(default_factory=bytearray)
    outbound: bytes = b""
    sent: int = 0
    draining: bool = False

    @property
    def writing(self) -> bool:
        return bool(self.outbound)


class HealthServer:
    """Serve GET /healthz, /readyz and /metrics on plain HTTP, on its own thread.

    Defaults to loopback; bind host="0.0.0.0" for container probes. Port 0 picks a free port
    (see :attr:`address` after :meth:`start`). Limits: 8 KiB of request headers (431), a 5 s
    deadline to send them (408) and to read the answer, 128 connections at once.
    """

    read_timeout = 5.0
    max_connections = 128

    def __init__(self, *, host: str = "127.0.0.1", port: int = 8080) -> None:
        if not isinstance(host, str) or not host:
            raise ValueError("host must be a non-empty string")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("port must be an integer between 0 and 65535")
        self.host = host
        self.port = port
        self._listener: socket.socket | None = None
        self._address: tuple[str, int] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._health: Callable[[], bool] = lambda: True
        self._ready: Callable[[], bool] = lambda: True
        self._controllers_ready: Callable[[], bool] = lambda: False
        self._registry: CollectorRegistry | None = None
        self._used = False

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound (host, port), including a port chosen for port=0; None unless serving."""
        return self._address

    def start(
        self,
        health: Callable[[], bool],
        ready: Callable[[], bool],
        registry: CollectorRegistry | None = None,
        *,
        controllers_ready: Callable[[], bool] | None = None,
    ) -> None:
        """Bind (failure raises HealthServerError naming host:port) and serve on a thread."""
        if self._used:
            raise RuntimeError("HealthServer instances can only run once")
        self._used = True
        self._health, self._ready, self._registry = health, ready, registry
        if controllers_ready is not None:
            self._controllers_ready = controllers_ready
        self._listener = self._bind()
        host, port = self._listener.getsockname()[:2]
        self._address = (host, port)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._thread = threading.Thread(
            target=self._serve, name=f"cloudcoil-health-{port}", daemon=True
        )
        self._thread.start()
        logger.info("Health server listening on http://%s:%d", host, port)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, close every connection and join the server thread."""
        self._stopping.set()
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("Health server thread did not stop within %.1f s", timeout)
        self._address = None

    def _bind(self) -> socket.socket:
        where = f"{self.host}:{self.port}"
        try:
            infos = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            family = infos[0][0]
            listener = socket.create_server(
                (self.host, self.port), family=family, backlog=self.max_connections
            )
        except OSError as error:
            reason = error.strerror or str(error)
            raise HealthServerError(f"Health server cannot listen on {where}: {reason}") from error
        listener.setblocking(False)
        return listener

    # -- the server thread -------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._listener is not None and self._wake_r is not None
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, None)
        selector.register(self._wake_r, selectors.EVENT_READ, None)
        connections: dict[socket.socket, _Connection] = {}
        try:
            while not self._stopping.is_set():
                now = time.monotonic()
                nearest = min((c.deadline for c in connections.values()), default=now + 1.0)
                events = selector.select(max(0.0, min(nearest - now, 1.0)))
                for key, _ in events:
                    if key.fileobj is self._listener:
                        self._accept(selector, connections)
                    elif key.fileobj is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(64)
                    else:
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        connection = connections.get(sock)
                        if connection is not None:
                            self._service(selector, connections, connection)
                self._expire(selector, connections)
        except Exception:
            logger.exception("Health server failed")
        finally:
            for connection in list(connections.values()):
                self._close(selector, connections, connection)
            selector.close()
            self._listener.close()
            self._wake_r.close()
            if self._wake_w is not None:
                self._wake_w.close()

    def _accept(
        self, selector: selectors.BaseSelector, connections: dict[socket.socket, _Connection]
    ) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()  # type: ignore[union-attr]
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                logger.warning("Health server accept failed: %s", error)
                return
            if len(connections) >= self.max_connections:
                sock.close()  # over the limit: refuse rather than queue
                continue
            sock.setblocking(False)
            connection = _Connection(sock, time.monotonic() + self.read_timeout)
            connections[sock] = connection
            selector.register(sock, selectors.EVENT_READ, None)

    def _service(
        self,
        selector: selectors.BaseSelector,
        connections: dict[socket.socket, _Connection],
        connection: _Connection,
    ) -> None:
        try:
            if connection.writing and not connection.draining:
                self._flush(selector, connections, connection)
                return
            data = connection.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(selector, connections, connection)
            return
        if not data:
            self._close(selector, connections, connection)
            return
        if connection.draining:
            return  # discard what the client still sends after our answer
        connection.inbound += data
        end = connection.inbound.find(b"\r\n\r\n")
        if end < 0 and len(connection.inbound) > _HEADER_LIMIT:
            self._respond(selector, connections, connection, *_plain(431, "headers too large\n"))
        elif end >= 0:
            if end + 4 > _HEADER_LIMIT:
                answer = _plain(431, "headers too large\n")
            else:
                answer = self._answer(bytes(connection.inbound[:end]))
            self._respond(selector, connections, connection, *answer)

    def _answer(self, head: bytes) -> tuple[int, bytes, str]:
        request_line = head.split(b"\r\n", 1)[0]
        parts = request_line.split(b" ")
        if len(parts) != 3 or parts[2] not in (b"HTTP/1.0", b"HTTP/1.1") or not parts[0]:
            return _plain(400, "bad request\n")
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return _plain(405, "method not allowed\n")
        if target not in (b"/healthz", b"/readyz", b"/controllers/readyz", b"/metrics"):
            return _plain(404, "not found\n")
        if target == b"/metrics":
            body = generate_latest(self._registry) if self._registry is not None else b""
            return 200, body, METRICS_CONTENT_TYPE
        if target == b"/healthz":
            return _plain(200, "ok\n") if self._check(self._health) else _plain(503, "unhealthy\n")
        probe = self._ready if target == b"/readyz" else self._controllers_ready
        return _plain(200, "ok\n") if self._check(probe) else _plain(503, "not ready\n")

    @staticmethod
    def _check(probe: Callable[[], bool]) -> bool:
        try:
            return bool(probe())
        except Exception:
            logger.exception("Health probe failed")
            return False

    def _respond(
        self,
        selector: selectors.BaseSelector,
        connections: dict[socket.socket, _Connection],
        connection: _Connection,
        code: int,
        body: bytes,
        content_type: str,
    ) -> None:
        status = HTTPStatus(code)
        head = (
            f"HTTP/1.1 {code} {status.phrase}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n"
            "Cache-Control: no-store\r\n" + ("Allow: GET\r\n" if code == 405 else "") + "\r\n"
        )
        connection.outbound = head.encode("ascii") + body
        connection.deadline = time.monotonic() + self.read_timeout
        selector.modify(connection.sock, selectors.EVENT_WRITE, None)
        self._flush(selector, connections, connection)

    def _flush(
        self,
        selector: selectors.BaseSelector,
        connections: dict[socket.socket, _Connection],
        connection: _Connection,
    ) -> None:
        try:
            while connection.sent < len(connection.outbound):
                connection.sent += connection.sock.send(connection.outbound[connection.sent :])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(selector, connections, connection)
            return
        # Half-close, then read until the client closes (bounded by the deadline): closing
        # with unread input would reset the connection and could destroy our answer.
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_WR)
        connection.draining = True
        connection.deadline = min(connection.deadline, time.monotonic() + 1.0)
        selector.modify(connection.sock, selectors.EVENT_READ, None)

    def _expire(
        self, selector: selectors.BaseSelector, connections: dict[socket.socket, _Connection]
    ) -> None:
        now = time.monotonic()
        for connection in [c for c in connections.values() if c.deadline <= now]:
            if connection.writing or connection.draining:
                self._close(selector, connections, connection)
            else:
                self._respond(selector, connections, connection, *_plain(408, "request timeout\n"))

    @staticmethod
    def _close(
        selector: selectors.BaseSelector,
        connections: dict[socket.socket, _Connection],
        connection: _Connection,
    ) -> None:
        connections.pop(connection.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(connection.sock)
        connection.sock.close()


def _plain(code: int, text: str) -> tuple[int, bytes, str]:
    return code, text.encode("utf-8"), _TEXT
