"""HTTPS hosting of the admission WSGI app: waitress behind the TLS front.

waitress serves on a Unix socket in a private directory (mode 0700, socket 0600), so no
plaintext listener is ever reachable; `TLSFront` terminates TLS on the public port. The same
listener answers the operator's health and metrics endpoints (`OperatorEndpoints`).
This is the only module that imports waitress.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import waitress
from waitress import wasyncore

from cloudcoil_sync.admission.tls import CertificateStore, TLSFront

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from prometheus_client.registry import CollectorRegistry

__all__ = ["OperatorEndpoints", "WebhookHost"]

log = logging.getLogger("cloudcoil_sync.admission.server")

Check = Callable[[], bool]
_TEXT = "text/plain; charset=utf-8"
# What generate_latest writes (the classic text format), as the controller metrics serve it.
_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class OperatorEndpoints:
    """WSGI middleware answering health and metrics paths (any method); the rest goes on.

    `/healthz` → `healthy`, `/readyz` → `ready`, `/controllers/readyz` → `controllers_ready`
    (each `ok\\n` or 503 `not ready\\n`); `/metrics` → the Prometheus registry, empty if none.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        healthy: Check | None = None,
        ready: Check | None = None,
        controllers_ready: Check | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.app = app
        self.checks: dict[str, Check] = {
            "/healthz": healthy or _always,
            "/readyz": ready or _always,
            "/controllers/readyz": controllers_ready or _never,
        }
        self.registry = registry

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        body = self._route(environ, start_response)
        if environ.get("REQUEST_METHOD") != "HEAD":
            return body
        # waitress sends whatever the app returns, even for HEAD; a body there would be read
        # as the next response on a kept-alive connection.
        close = getattr(body, "close", None)
        if close is not None:
            close()
        return []

    def _route(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        check = self.checks.get(path)
        if check is not None:
            ok = _safely(check, path)
            body = b"ok\n" if ok else b"not ready\n"
            return _answer(start_response, "200 OK" if ok else "503 Service Unavailable", body)
        if path == "/metrics":
            return self._metrics(start_response)
        return self.app(environ, start_response)

    def _metrics(self, start_response: StartResponse) -> Iterable[bytes]:
        from prometheus_client.exposition import generate_latest

        body = b"" if self.registry is None else generate_latest(self.registry)
        return _answer(start_response, "200 OK", body, _METRICS_TYPE)


def _always() -> bool:
    return True


def _never() -> bool:
    return False


def _safely(check: Check, path: str) -> bool:
    try:
        return bool(check())
    except Exception:
        log.exception("Health check for %s failed", path)
        return False


def _answer(
    start_response: StartResponse, status: str, body: bytes, content_type: str = _TEXT
) -> list[bytes]:
    start_response(
        status,
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [body]


class WebhookHost:
    """Serve `app` over HTTPS on (host, port) until `stop`; owns every thread it starts.

    `start` raises ValueError when the TLS files are missing or do not match, OSError when
    the port cannot be bound. Certificates are reloaded when their files change.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        certfile: str,
        keyfile: str,
        host: str = "0.0.0.0",
        port: int = 9443,
        threads: int = 4,
        max_connections: int = 64,
        handshake_timeout: float = 10.0,
        idle_timeout: float = 120.0,
        reload_interval: float = 2.0,
        max_request_body_size: int = 16 * 1024 * 1024,
        healthy: Check | None = None,
        ready: Check | None = None,
        controllers_ready: Check | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.app = OperatorEndpoints(
            app,
            healthy=healthy,
            ready=ready,
            controllers_ready=controllers_ready,
            registry=registry,
        )
        self.certfile, self.keyfile = certfile, keyfile
        self.host, self.port = host, port
        self.threads = threads
        self.max_connections = max_connections
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self.reload_interval = reload_interval
        self.max_request_body_size = max_request_body_size
        self.front: TLSFront | None = None
        self.certificates: CertificateStore | None = None
        self._directory: str | None = None
        self._map: dict[int, wasyncore.dispatcher] = {}
        self._server: waitress.server.BaseWSGIServer | None = None
        self._loop_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._shutdown_timeout = 5.0

    @classmethod
    def from_settings(cls, app: WSGIApplication, settings: Any, **options: Any) -> WebhookHost:
        """A host for `settings` (an application `WebhookServer`: certfile, keyfile, host,
        port); `options` are the other keyword arguments (checks, registry, threads...).
        """
        return cls(
            app,
            certfile=settings.certfile,
            keyfile=settings.keyfile,
            host=settings.host,
            port=settings.port,
            **options,
        )

    @property
    def address(self) -> tuple[str, int]:
        if self.front is None:
            return (self.host, self.port)
        return self.front.address

    @property
    def backend_path(self) -> str | None:
        """The private Unix socket waitress listens on (None before start / after stop)."""
        if self._directory is None:
            return None
        return os.path.join(self._directory, "webhook.sock")

    @property
    def serving(self) -> bool:
        """True while both waitress and the TLS front are running."""
        front = self.front
        loop = self._loop_thread
        return (
            front is not None
            and front.accepting
            and loop is not None
            and loop.is_alive()
            and not self._stopping.is_set()
        )

    def start(self) -> None:
        if self._loop_thread is not None:
            raise RuntimeError("The webhook server can only be started once")
        self.certificates = CertificateStore(
            self.certfile, self.keyfile, check_interval=self.reload_interval
        )
        self._directory = tempfile.mkdtemp(prefix="cloudcoil-webhook-")
        socket_path = os.path.join(self._directory, "webhook.sock")
        try:
            self._server = waitress.create_server(
                self.app,
                map=self._map,
                unix_socket=socket_path,
                unix_socket_perms="600",
                url_scheme="https",
                threads=self.threads,
                connection_limit=self.max_connections + 16,
                # Longer than the front's idle timeout, so the front decides when an idle
                # keep-alive connection ends (and closes both sides together).
                channel_timeout=self.idle_timeout + 30.0,
                max_request_body_size=self.max_request_body_size,
                clear_untrusted_proxy_headers=True,
                expose_tracebacks=False,
                asyncore_use_poll=True,
                ident="cloudcoil",
            )
            self._loop_thread = threading.Thread(
                target=self._serve, name="webhook-waitress", daemon=True
            )
            self._loop_thread.start()
            self.front = TLSFront(
                self.certificates,
                socket_path,
                host=self.host,
                port=self.port,
                max_connections=self.max_connections,
                handshake_timeout=self.handshake_timeout,
                idle_timeout=self.idle_timeout,
            )
            self.front.start()
        except BaseException:
            self.stop(timeout=1.0)
            raise
        log.info("Serving admission webhooks on https://%s:%d", *self.address)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop accepting, let in-flight requests finish within `timeout`; True if joined."""
        deadline = time.monotonic() + timeout
        joined = True
        if self.front is not None:
            joined = self.front.stop(timeout=max(0.0, deadline - time.monotonic() - 0.5))
        self._shutdown_timeout = max(0.1, deadline - time.monotonic())
        self._stopping.set()
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.pull_trigger()
        if self._loop_thread is not None:
            self._loop_thread.join(max(0.0, deadline - time.monotonic()))
            joined = joined and not self._loop_thread.is_alive()
        if joined and self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
        return joined

    def _serve(self) -> None:
        try:
            while not self._stopping.is_set():
                wasyncore.loop(timeout=1.0, map=self._map, use_poll=True, count=1)
        except Exception:
            log.exception("The admission HTTP server failed")
        finally:
            wasyncore.close_all(self._map)
            if self._server is not None:
                self._server.task_dispatcher.shutdown(timeout=self._shutdown_timeout)
