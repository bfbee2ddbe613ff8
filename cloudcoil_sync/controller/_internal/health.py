"""Plain-HTTP health and metrics server (``/healthz``, ``/readyz``, ``/controllers/readyz``,
``/metrics``) served by waitress through its public API.

`waitress.create_server` serves the operator endpoints' WSGI app (`_internal/endpoints.py`,
which the webhook host serves too, so both answer alike) on a socket bound here (its `sockets`
adjustment), its loop on a thread of ours and its task threads (two) joined on stop. The
health and readiness callables must be quick. Where waitress decides, this differs from the
hand-written server it replaced: HTTP/1.1 connections are kept alive (a WSGI app cannot ask
for `Connection: close`; kubelet probes close their own) and closed once idle for
`read_timeout` (rounded up to whole seconds: waitress counts in seconds); a client that
sends no complete request within `read_timeout` is closed
without an answer (it was answered 408); over `max_connections` waitress stops accepting
until a connection ends (new ones wait in the listen backlog instead of being closed); a
malformed request line is answered 400 by waitress's parser.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from cloudcoil_sync._internal.endpoints import Check, OperatorEndpoints
from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync.controller._internal.checks import HealthChecks

__all__ = ["HealthServer", "HealthServerError"]

logger = logging.getLogger("cloudcoil_sync.controller.health")

_HEADER_LIMIT = 8192


class HealthServerError(RuntimeError):
    """The health server could not start (typically: the address is in use)."""


Probe = Check


class HealthServer:
    """Serve GET /healthz, /readyz, /controllers/readyz and /metrics on plain HTTP.

    Defaults to loopback; bind host="0.0.0.0" for container probes. Port 0 picks a free port
    (see :attr:`address` after :meth:`start`). Limits: 8 KiB of request headers (431), no
    request body (413), `read_timeout` (5 s) to send a request, `max_connections` (128).
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
        self._address: tuple[str, int] | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._map: dict[int, Any] = {}
        self._app: OperatorEndpoints | None = None
        self._used = False
        self.checks: HealthChecks | None = None  # named checks (`?verbose`, `/readyz/<name>`)

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound (host, port), including a port chosen for port=0; None unless serving."""
        return self._address

    @property
    def name(self) -> str:
        return "health server"

    def probe(
        self,
        health: Probe,
        ready: Probe,
        registry: CollectorRegistry | None = None,
        *,
        controllers_ready: Probe | None = None,
    ) -> HealthServer:
        """Set what /healthz, /readyz, /controllers/readyz and /metrics answer (before `start`):
        the operator endpoints the webhook host serves too (`_internal/endpoints.py`)."""
        self._app = OperatorEndpoints(
            healthy=health,
            ready=ready,
            controllers_ready=controllers_ready or _never,
            registry=registry,
            named=self._named,
        )
        return self

    def _named(self, path: str, query: str, base: Mapping[str, Check]) -> tuple[int, bytes] | None:
        """The named checks' answer (`?verbose`, `/readyz/<name>`), once the run set them."""
        return None if self.checks is None else self.checks.answer(path, query, base)

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Bind (failure raises HealthServerError naming host:port) and serve on a thread.

        `on_exit` is called if the serving loop ends without `stop` (with its error).
        """
        import waitress

        if self._used:
            raise RuntimeError("HealthServer instances can only run once")
        if self._app is None:
            raise RuntimeError("Set the health server's probes (probe(...)) before start()")
        self._used = True
        listener = self._bind()
        host, port = listener.getsockname()[:2]
        self._server = waitress.create_server(
            self._app,
            map=self._map,
            sockets=[listener],
            threads=2,
            connection_limit=self.max_connections + 2,  # it counts its listener and trigger
            # Whole seconds (waitress's adjustments are integers), checked every second.
            channel_timeout=max(1, math.ceil(self.read_timeout)),
            cleanup_interval=1,
            max_request_header_size=_HEADER_LIMIT,
            max_request_body_size=1,  # any body at all is refused (413)
            asyncore_use_poll=True,
            expose_tracebacks=False,
            clear_untrusted_proxy_headers=True,
            ident="cloudcoil",
        )
        self._address = (host, port)
        self._thread = threading.Thread(
            target=self._serve, args=(on_exit,), name=f"cloudcoil-health-{port}", daemon=True
        )
        self._thread.start()
        logger.info("Health server listening on http://%s:%d", host, port)

    def _serve(self, on_exit: ExitCallback | None) -> None:
        error: BaseException | None = None
        try:
            self._server.run()
        except BaseException as failure:
            error = failure
            raise
        finally:
            if on_exit is not None and self._address is not None:  # not stopped
                on_exit(error)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Listening: ready as soon as `start` returned (nothing to wait for)."""
        return self.healthy()

    def healthy(self) -> bool:
        thread = self._thread
        return self._address is not None and thread is not None and thread.is_alive()

    def stop(self, timeout: float | None = 5.0) -> bool:
        """Stop serving: close the listener, let requests in flight finish (open connections
        are closed after a second), join the loop and task threads; True once they ended.

        ``None`` waits 5 s (waitress's task threads are joined within a bound).
        """
        server, thread = self._server, self._thread
        self._address = None
        if self.checks is not None:
            self.checks.close()
        if server is None or thread is None:
            return True
        timeout = 5.0 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        server.close()  # the listener; the loop ends once no connection is left
        thread.join(min(1.0, timeout))
        for dispatcher in list(self._map.values()):  # connections still open
            dispatcher.close()
        thread.join(max(0.0, deadline - time.monotonic()))
        server.task_dispatcher.shutdown(timeout=max(0.1, deadline - time.monotonic()))
        if thread.is_alive():
            logger.warning("Health server thread did not stop within %.1f s", timeout)
            return False
        return True

    def _bind(self) -> socket.socket:
        where = f"{self.host}:{self.port}"
        try:
            infos = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            return socket.create_server(
                (self.host, self.port), family=infos[0][0], backlog=self.max_connections
            )
        except OSError as error:
            reason = error.strerror or str(error)
            raise HealthServerError(f"Health server cannot listen on {where}: {reason}") from error


def _never() -> bool:
    return False
