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
same listener answers the operator's health and metrics endpoints (`OperatorEndpoints`, the
app the plain-HTTP `HealthServer` serves too: `_internal/endpoints.py`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cloudcoil_sync._internal.endpoints import Access, Check, OperatorEndpoints, answer
from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync._internal.signals import wait_event
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
    "ClientCertificates",
    "WebhookHost",
]

log = logging.getLogger("cloudcoil_sync.admission.server")


class ClientCertificates:
    """WSGI middleware: admission paths need a client certificate the listener verified
    (403 otherwise); the operator endpoints (probes, bearer-token `/metrics`) do not."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get(CLIENT_VERIFIED):
            return self.app(environ, start_response)
        body = b"A client certificate signed by the webhook's client CA is required\n"
        return answer(start_response, 403, body)


def _always() -> bool:
    return True


def _never() -> bool:
    return False


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

    Stopping is a lame-duck drain (`drain`, then `stop`): from `drain` on, every answer
    carries `Connection: close` (a client's pooled connection is retired on its next use and
    it dials anew, reaching a replica its Endpoints still list) and `/readyz` is 503, while
    the listener keeps accepting; `stop` then waits for what is left of `drain_delay` since
    `drain` before it stops accepting. The delay only applies once a client from outside
    loopback connected (`drain_loopback=True`: always): Endpoints lag only for clients that
    reach us through a Service, not for a local API server or emulator.
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
        drain_delay: float = 0.0,
        drain_loopback: bool = False,
    ) -> None:
        #: Set by `drain`: answers close their connections, /readyz is 503.
        self.draining = threading.Event()
        self._drain_began = 0.0
        self._drain_ended = threading.Event()  # `end_drain`: the delay is over
        self.drain_delay, self.drain_loopback = drain_delay, drain_loopback
        ready = ready or _always
        self.app = OperatorEndpoints(
            healthy=healthy or _always,
            ready=lambda: not self.draining.is_set() and ready(),
            controllers_ready=controllers_ready or _never,
            registry=registry,
            metrics_access=metrics_access,  # MetricsAccess.decide
            fallback=app if client_ca_file is None else ClientCertificates(app),
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
            drain_delay=settings.drain_delay,
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
            draining=self.draining,
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

    def drain(self) -> None:
        """Begin the lame-duck drain (the stop's first step; `stop` calls it too): keep
        serving, but close each connection after its answer, and report not ready."""
        if not self.draining.is_set():
            self._drain_began = time.monotonic()
            self.draining.set()
            log.info("Webhook server draining: answers close their connections")

    def end_drain(self) -> None:
        """End the drain delay now (a stop waiting for it goes on at once)."""
        self._drain_ended.set()

    def _drain_wait(self) -> float:
        """What is left of the drain delay, 0 if it does not apply (see the class)."""
        front = self.front
        if front is None or not (self.drain_loopback or front.remote_clients):
            return 0.0
        return max(0.0, self._drain_began + self.drain_delay - time.monotonic())

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Drain, wait for what is left of the drain delay, then stop accepting and let
        in-flight requests finish within `timeout` (None: 10 s, the bound open connections
        need one); True if every thread joined."""
        if self.front is None:
            return True
        self.drain()
        wait = self._drain_wait()
        if wait > 0 and not wait_event(self._drain_ended, wait):
            log.info("Webhook server drain delay over; closing the listener")
        timeout = 10.0 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        joined = self.front.stop(timeout=timeout)  # turns still pass on while it drains
        joined = self.turns.stop(max(0.1, deadline - time.monotonic())) and joined
        return self.watchdog.stop(max(0.1, deadline - time.monotonic())) and joined
