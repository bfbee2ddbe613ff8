"""HTTPS hosting of the admission WSGI app: waitress's HTTP/1.1 machinery behind the TLS front.

`TLSFront` terminates TLS on the public port and runs each connection on a thread of its
own; on that thread waitress's request parser (limits, chunked bodies, pipelining) and its
WSGI tasks (environ, response framing, keep-alive) answer the decrypted requests directly
(``channel.py``, the only module that imports waitress).
There is no plaintext listener at all, and a request costs no hand-off between threads:
the app (the admission handler included) runs on that thread too, and a watchdog thread
sends a late answer (LATE_ANSWER, the route's 504) when one overruns. Connections take
`Turns` to process what they received, first come first served, so that requests do not
interleave on the GIL (a turn a blocked handler keeps past its bound is passed on). The
same listener answers the operator's health and metrics endpoints (`OperatorEndpoints`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync.admission._internal.channel import (
    CLIENT_VERIFIED,
    LATE_ANSWER,
    NO_BODY_PATHS,
    WAITRESS_INTERNALS,
    Connections,
)
from cloudcoil_sync.admission._internal.deadlines import Watchdog
from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.routes import DEFAULT_MAX_BODY_BYTES
from cloudcoil_sync.admission._internal.tls import CertificateStore, TLSFront
from cloudcoil_sync.admission._internal.turns import Turns

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "LATE_ANSWER",
    "NO_BODY_PATHS",
    "WAITRESS_INTERNALS",
    "OperatorEndpoints",
    "WebhookHost",
]

log = logging.getLogger("cloudcoil_sync.admission.server")

Check = Callable[[], bool]
# (Authorization header, path, client address) -> HTTP status for a metrics request
# (MetricsAccess.decide).
Access = Callable[[str | None, str, str], int]
_TEXT = "text/plain; charset=utf-8"
# What generate_latest writes (the classic text format), as the controller metrics serve it.
_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class OperatorEndpoints:
    """WSGI middleware answering health and metrics paths (any method); the rest goes on.

    `/healthz` → `healthy`, `/readyz` → `ready`, `/controllers/readyz` → `controllers_ready`
    (each `ok\\n` or 503 `not ready\\n`); `/metrics` → the Prometheus registry, empty if none,
    to whom `metrics_access` allows it if given (else 401/403/429/500 as it decides). With
    `client_certificates`, every other path (admission) is answered 403 unless the client
    presented a certificate the listener verified.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        healthy: Check | None = None,
        ready: Check | None = None,
        controllers_ready: Check | None = None,
        registry: CollectorRegistry | None = None,
        metrics_access: Access | None = None,
        client_certificates: bool = False,
    ) -> None:
        self.app = app
        self.metrics_access = metrics_access
        self.client_certificates = client_certificates
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
            access = self.metrics_access
            client = str(environ.get("REMOTE_ADDR", ""))
            code = (
                200 if access is None else access(environ.get("HTTP_AUTHORIZATION"), path, client)
            )
            if code != 200:
                body = _REFUSED[code][4:].encode() + b"\n"
                extra = [("Retry-After", "1")] if code == 429 else []
                return _answer(start_response, _REFUSED[code], body, extra=extra)
            return self._metrics(start_response)
        if self.client_certificates and not environ.get(CLIENT_VERIFIED):
            body = b"A client certificate signed by the webhook's client CA is required\n"
            return _answer(start_response, "403 Forbidden", body)
        return self.app(environ, start_response)

    def _metrics(self, start_response: StartResponse) -> Iterable[bytes]:
        from prometheus_client.exposition import generate_latest

        body = b"" if self.registry is None else generate_latest(self.registry)
        return _answer(start_response, "200 OK", body, _METRICS_TYPE)


_REFUSED = {
    401: "401 Unauthorized",
    403: "403 Forbidden",
    429: "429 Too Many Requests",
    500: "500 Internal Server Error",
}


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
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str = _TEXT,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
    ]
    start_response(status, headers + (extra or []))
    return [body]


class WebhookHost:
    """Serve `app` over HTTPS on (host, port) until `stop`; owns every thread it starts.

    Each connection is served on its own thread, within `limits` (`ConnectionLimits`: how
    many connections, per client and in all, and the handshake, header, body-rate and idle
    deadlines; a request past its deadline is answered 408); `threads`, if
    given, bounds how many of them run the WSGI app at once (admission handlers are bounded
    by the webhook's `max_workers` either way; a bound here makes every answer wake a
    waiter). Connections process their requests in turns (`Turns`), first come first
    served; one held for `turn_hold` seconds while others wait (a blocked handler) is
    passed on. The watchdog thread for late answers and the turns' monitor start and stop
    with the host.
    `start` raises ValueError when the TLS files are missing or do not match, OSError when
    the port cannot be bound. Certificates are reloaded when their files change. With
    `client_ca_file` (controller-runtime's ClientCAName), a client certificate that does not
    chain to those CAs fails the handshake, and admission paths need a verified one (403);
    the probes and `/metrics` (bearer tokens) do not.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        certfile: str,
        keyfile: str,
        host: str = "0.0.0.0",
        port: int = 9443,
        threads: int | None = None,
        limits: ConnectionLimits | None = None,
        turn_hold: float = 0.002,
        reload_interval: float = 2.0,
        max_request_body_size: int = DEFAULT_MAX_BODY_BYTES,
        healthy: Check | None = None,
        ready: Check | None = None,
        controllers_ready: Check | None = None,
        registry: CollectorRegistry | None = None,
        metrics_access: Access | None = None,
        client_ca_file: str | None = None,
    ) -> None:
        self.app = OperatorEndpoints(
            app,
            healthy=healthy,
            ready=ready,
            controllers_ready=controllers_ready,
            registry=registry,
            metrics_access=metrics_access,
            client_certificates=client_ca_file is not None,
        )
        self.certfile, self.keyfile = certfile, keyfile
        self.client_ca_file = client_ca_file
        self.host, self.port = host, port
        self.threads = threads
        self.limits = limits if limits is not None else ConnectionLimits()
        self.reload_interval = reload_interval
        self.max_request_body_size = max_request_body_size
        self.front: TLSFront | None = None
        self.watchdog = Watchdog()
        self.turns = Turns(turn_hold)
        self.certificates: CertificateStore | None = None
        self._started = False

    @classmethod
    def from_settings(cls, app: WSGIApplication, settings: Any, **options: Any) -> WebhookHost:
        """A host for `settings` (an application `WebhookServer`: certfile, keyfile, host,
        port, limits); `options` are the other keyword arguments (checks, registry...).
        """
        return cls(
            app,
            certfile=settings.certfile,
            keyfile=settings.keyfile,
            host=settings.host,
            port=settings.port,
            limits=settings.limits,
            client_ca_file=settings.client_ca_file,
            **options,
        )

    @property
    def address(self) -> tuple[str, int]:
        if self.front is None:
            return (self.host, self.port)
        return self.front.address

    @property
    def serving(self) -> bool:
        """True while the TLS front accepts connections."""
        return self.front is not None and self.front.accepting

    @property
    def name(self) -> str:
        return "webhook server"

    def healthy(self) -> bool:
        return self.serving

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Serving: it is ready as soon as `start` returned (nothing to wait for)."""
        return self.serving

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Bind and serve; `on_exit` is called if the accept loop ends without `stop`."""
        if self._started:
            raise RuntimeError("The webhook server can only be started once")
        self._started = True
        self.certificates = CertificateStore(
            self.certfile,
            self.keyfile,
            check_interval=self.reload_interval,
            client_ca_file=self.client_ca_file,
        )
        http = Connections(
            self.app,
            host=self.host,
            limits=self.limits,
            max_request_body_size=self.max_request_body_size,
            watchdog=self.watchdog,
            turns=self.turns,
            threads=self.threads,
        )
        front = TLSFront(
            self.certificates, http.serve, host=self.host, port=self.port, limits=self.limits
        )
        front.start(on_exit)  # OSError when the port is taken: nothing was started
        self.front = front
        self.watchdog.start()
        self.turns.start()
        http.effective_port = front.address[1]
        log.info("Serving admission webhooks on https://%s:%d", *self.address)

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Stop accepting, let in-flight requests finish within `timeout` (None: 10 s, the
        bound open connections need one); True if every thread joined."""
        if self.front is None:
            return True
        timeout = 10.0 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        joined = self.front.stop(timeout=timeout)  # turns still pass on while it drains
        joined = self.turns.stop(max(0.1, deadline - time.monotonic())) and joined
        return self.watchdog.stop(max(0.1, deadline - time.monotonic())) and joined
