"""HTTPS hosting of the admission WSGI app: waitress's HTTP/1.1 machinery behind the TLS front.

`TLSFront` terminates TLS on the public port and runs each connection on a thread of its
own; on that thread waitress's request parser (limits, chunked bodies, pipelining) and its
WSGI tasks (environ, response framing, keep-alive) answer the decrypted requests directly.
There is no plaintext listener at all, and a request costs no hand-off between threads:
the app (the admission handler included) runs on that thread too, and a watchdog thread
sends a late answer (LATE_ANSWER, the route's 504) when one overruns. Connections take
`Turns` to process what they received, first come first served, so that requests do not
interleave on the GIL (a turn a blocked handler keeps past its bound is passed on). The
same listener answers the operator's health and metrics endpoints (`OperatorEndpoints`).
This is the only module that imports waitress.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from waitress.adjustments import Adjustments
from waitress.parser import HTTPRequestParser
from waitress.proxy_headers import proxy_headers_middleware
from waitress.task import ErrorTask, Task, WSGITask
from waitress.utilities import InternalServerError, RequestEntityTooLarge

from cloudcoil_sync.admission._internal.connections import Phase
from cloudcoil_sync.admission._internal.deadlines import Timer, Watchdog
from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.routes import DEFAULT_MAX_BODY_BYTES
from cloudcoil_sync.admission._internal.tls import CertificateStore, TLSFront, TLSStream
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
# (Authorization header, path) -> HTTP status for a metrics request (MetricsAccess.decide).
Access = Callable[[str | None, str], int]
_TEXT = "text/plain; charset=utf-8"
# The environ key of a callable `(deadline, status, headers, body, on_fire) -> Timer` that
# sends that answer at `deadline` (time.monotonic) unless the Timer is cancelled first; once
# sent, whatever the app answers later is discarded and the connection closes. It lets an app
# run slow code on the connection's own thread and still answer on time.
LATE_ANSWER = "cloudcoil.late_answer"
# How long a late answer may wait for the client to take it (it is small: the socket buffer).
_LATE_SEND_TIMEOUT = 1.0
# Everything this module uses of waitress beyond its public API (`create_server`), by
# dotted name: the attributes used of it, or an Adjustments keyword. setup.cfg pins the major
# version; tests/admission/test_waitress_contract.py checks the installed one offers these.
WAITRESS_INTERNALS: dict[str, tuple[str, ...]] = {
    "waitress.adjustments.Adjustments": (
        "url_scheme",
        "max_request_body_size",
        "inbuf_overflow",
        "clear_untrusted_proxy_headers",
        "expose_tracebacks",
        "ident",
    ),
    "waitress.parser.HTTPRequestParser": (
        "received",
        "close",
        "completed",
        "empty",
        "error",
        "expect_continue",
        "headers_finished",
        "chunked",
        "content_length",
        "body_bytes_received",
        "path",
        "version",
    ),
    "waitress.task.Task": ("start", "finish", "wrote_header", "close_on_finish"),
    "waitress.task.WSGITask": ("execute", "get_environment", "environ"),
    "waitress.task.ErrorTask": ("execute",),
    "waitress.proxy_headers.proxy_headers_middleware": (),
    "waitress.utilities.InternalServerError": (),
    "waitress.utilities.RequestEntityTooLarge": (),
}
# What generate_latest writes (the classic text format), as the controller metrics serve it.
_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Health and metrics paths take no request body (413 before reading one).
NO_BODY_PATHS = frozenset({"/healthz", "/readyz", "/controllers/readyz", "/metrics"})
# After a 413, what the client still sends is read and dropped for this long (and at most
# this much), so that it can read the answer instead of a reset.
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 32 << 20
_TOO_LARGE_BODY = b'{"message":"Request body too large"}'
_TOO_LARGE = (
    b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_TOO_LARGE_BODY), _TOO_LARGE_BODY)
)


class OperatorEndpoints:
    """WSGI middleware answering health and metrics paths (any method); the rest goes on.

    `/healthz` → `healthy`, `/readyz` → `ready`, `/controllers/readyz` → `controllers_ready`
    (each `ok\\n` or 503 `not ready\\n`); `/metrics` → the Prometheus registry, empty if none,
    to whom `metrics_access` allows it if given (else 401/403/500 as it decides).
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
    ) -> None:
        self.app = app
        self.metrics_access = metrics_access
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
            code = 200 if access is None else access(environ.get("HTTP_AUTHORIZATION"), path)
            if code != 200:
                return _answer(start_response, _REFUSED[code], _REFUSED[code][4:].encode() + b"\n")
            return self._metrics(start_response)
        return self.app(environ, start_response)

    def _metrics(self, start_response: StartResponse) -> Iterable[bytes]:
        from prometheus_client.exposition import generate_latest

        body = b"" if self.registry is None else generate_latest(self.registry)
        return _answer(start_response, "200 OK", body, _METRICS_TYPE)


_REFUSED = {
    401: "401 Unauthorized",
    403: "403 Forbidden",
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
    ) -> None:
        self.app = OperatorEndpoints(
            app,
            healthy=healthy,
            ready=ready,
            controllers_ready=controllers_ready,
            registry=registry,
            metrics_access=metrics_access,
        )
        self.certfile, self.keyfile = certfile, keyfile
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

    def start(self) -> None:
        if self._started:
            raise RuntimeError("The webhook server can only be started once")
        self._started = True
        self.certificates = CertificateStore(
            self.certfile, self.keyfile, check_interval=self.reload_interval
        )
        limit = self.max_request_body_size
        adjustments = Adjustments(
            url_scheme="https",
            # waitress refuses a body of this size or more: a declared Content-Length as
            # soon as the headers are in, a chunked body as it arrives. Below it, bodies
            # stay in memory (waitress would spool one over inbuf_overflow to a temp file).
            max_request_body_size=limit + 1,
            inbuf_overflow=limit + 1024,
            clear_untrusted_proxy_headers=True,
            expose_tracebacks=False,
            ident="cloudcoil",
        )
        http = _HTTP(self.app, adjustments, self, self.watchdog, self.turns)
        front = TLSFront(
            self.certificates, http.serve, host=self.host, port=self.port, limits=self.limits
        )
        front.start()  # OSError when the port is taken: nothing was started
        self.front = front
        self.watchdog.start()
        self.turns.start()
        http.effective_port = front.address[1]
        log.info("Serving admission webhooks on https://%s:%d", *self.address)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop accepting, let in-flight requests finish within `timeout`; True if joined."""
        if self.front is None:
            return True
        deadline = time.monotonic() + timeout
        joined = self.front.stop(timeout=timeout)  # turns still pass on while it drains
        joined = self.turns.stop(max(0.1, deadline - time.monotonic())) and joined
        return self.watchdog.stop(max(0.1, deadline - time.monotonic())) and joined


class _HTTP:
    """What waitress's tasks read from their server, and the per-connection loop."""

    def __init__(
        self,
        app: WSGIApplication,
        adj: Adjustments,
        owner: WebhookHost,
        watchdog: Watchdog,
        turns: Turns,
    ) -> None:
        threads, host = owner.threads, owner.host
        self.adj = adj
        self.limits = owner.limits
        self.watchdog = watchdog
        self.turns = turns
        # As waitress.create_server does: Forwarded/X-Forwarded-* from untrusted peers
        # (every peer: no proxy is trusted) are removed before the app sees them.
        self.application = proxy_headers_middleware(
            app, clear_untrusted=adj.clear_untrusted_proxy_headers, log_untrusted=False
        )
        self.calls: AbstractContextManager[Any] = (
            contextlib.nullcontext() if threads is None else threading.BoundedSemaphore(threads)
        )
        self.effective_port = 0  # SERVER_PORT: the bound port, set once listening
        self.server_name = "localhost" if host in ("", "0.0.0.0", "::") else host

    def serve(self, stream: TLSStream) -> None:
        _Channel(self, stream).run()


def _refuse_body(request: HTTPRequestParser) -> None:
    """Answer 413 at once when a request to a path that takes no body comes with one."""
    if request.chunked or request.content_length > 0:
        request.error = RequestEntityTooLarge("This path takes no request body")
        request.completed = True


class _Task(WSGITask):
    """waitress's WSGI task, with the channel's late-answer hook in the environ."""

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] | None = self.environ
        if environ is None:
            environ = super().get_environment()
            environ[LATE_ANSWER] = self.channel.answer_late
        return environ


class _ClientGone(Exception):
    """The client did not take an answer; the connection ends without another one."""


class _Channel:
    """One connection's requests, parsed and answered in order by waitress's parser and
    tasks (the attributes below are those the tasks read from their channel).
    """

    # Answers are sent once complete (one TLS write for headers and body), or as soon as
    # this much is pending for large ones.
    _SEND_BYTES = 256 * 1024

    def __init__(self, server: _HTTP, stream: TLSStream) -> None:
        self.server = server
        self.adj = server.adj
        self.stream = stream
        self.addr = stream.peer
        self._out: list[bytes] = []
        self._pending = 0
        self._version = "1.1"
        self._request: HTTPRequestParser | None = None  # the one being received
        self._idle_since = time.monotonic()  # since the last answer (or the handshake)
        self._started = self._body_started = 0.0  # first byte of the request, of its body
        # Set (by the watchdog) once a late answer went out: the app's own answer is then
        # dropped and the connection closes after it.
        self._answered_late = False
        self._linger = False  # a body was refused: drain what follows before closing

    def check_client_disconnected(self) -> bool:
        return False  # requests are read only between answers (no lookahead)

    def answer_late(
        self,
        deadline: float,
        status: str,
        headers: list[tuple[str, str]],
        body: bytes,
        on_fire: Callable[[], None],
    ) -> Timer:
        """Send this answer at `deadline` unless the timer is cancelled first (LATE_ANSWER)."""

        def fire() -> None:
            # The connection's thread is still in the app: it touches the stream again only
            # after cancelling, which waits for this to return.
            self._answered_late = True
            on_fire()
            lines = [f"HTTP/{self._version} {status}"]
            lines += [f"{name}: {value}" for name, value in headers]
            lines.append("Connection: close")
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
            try:
                self.stream.send(head + body, timeout=_LATE_SEND_TIMEOUT)
            except OSError as error:
                log.debug("A late webhook answer was not sent: %s", error)

        return self.server.watchdog.schedule(deadline, fire)

    def write_soon(self, data: bytes) -> int:
        if self._answered_late:
            return len(data)  # superseded by the late answer: never written
        if data:
            self._out.append(data)
            self._pending += len(data)
            if self._pending >= self._SEND_BYTES:
                self.flush()
        return len(data)

    def flush(self) -> None:
        if not self._out or self._answered_late:
            self._out.clear()
            self._pending = 0
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._pending = 0
        try:
            self.stream.send(data)
        except OSError as error:
            raise _ClientGone(str(error)) from error

    def run(self) -> None:
        try:
            while data := self.stream.receive(self._deadline()):
                # Sending inside the turn too: a thread back from its send would otherwise
                # race the holder for the GIL (p99 at 8 clients 8-10 ms instead of 4-5).
                with self.server.turns.turn():
                    keep_open = self._received(data)
                    self.flush()
                if not keep_open:
                    if self._linger:
                        self.stream.discard(time.monotonic() + _LINGER_SECONDS, _LINGER_BYTES)
                    return
                if self._request is None:
                    self._idle_since = time.monotonic()
                    self.stream.connection.enter(Phase.IDLE)
        except TimeoutError:
            if self._request is not None:  # a request too slow to arrive: answer, close
                self._timed_out()
        except _ClientGone as error:
            log.debug("Webhook client went away: %s", error)
        finally:
            if self._request is not None:
                self._request.close()

    def _deadline(self) -> float:
        """When the next bytes are due: the idle timeout between requests, the header
        deadline while headers arrive, then the minimum body rate."""
        limits = self.server.limits
        request = self._request
        if request is None:
            return self._idle_since + limits.idle_timeout
        if not request.headers_finished:
            return self._started + limits.header_timeout
        if self._body_started == 0.0:
            self._body_started = time.monotonic()
        allowed = request.body_bytes_received / limits.min_body_rate
        return self._body_started + limits.body_grace + allowed

    def _timed_out(self) -> None:
        log.info("Webhook client %s was too slow to send its request; answered 408", self.addr[0])
        body = b"Request timeout\n"
        head = (
            f"HTTP/{self._version} 408 Request Timeout\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            self.stream.send(head.encode() + body, timeout=_LATE_SEND_TIMEOUT)

    def _received(self, data: bytes) -> bool:
        """Parse `data`, answering each request it completes (the answers are buffered);
        whether the connection stays open."""
        while data:
            if self._request is None:
                self._request = HTTPRequestParser(self.adj)
                self._started, self._body_started = time.monotonic(), 0.0
                self.stream.connection.enter(Phase.ACTIVE)
            request = self._request
            used = request.received(data)
            if request.headers_finished and not request.error and request.path in NO_BODY_PATHS:
                _refuse_body(request)
            if request.expect_continue and request.headers_finished:
                request.expect_continue = False
                if not request.completed:
                    self.write_soon(b"HTTP/1.1 100 Continue\r\n\r\n")
                    self.flush()
            if request.completed:
                self._request = None
                if not request.empty and not self._service(request):
                    return False
            data = data[used:] if used < len(data) else b""
        return True

    def _service(self, request: HTTPRequestParser) -> bool:
        """Answer one request; whether the connection stays open for the next."""
        if isinstance(request.error, RequestEntityTooLarge):
            # Answered as the webhook answers it; the rest of the body is read and
            # dropped, never kept.
            self._linger = True
            self.write_soon(_TOO_LARGE)
            request.close()
            return False
        self._version = request.version if request.version in ("1.0", "1.1") else "1.1"
        task: Task = ErrorTask(self, request) if request.error else _Task(self, request)
        try:
            with self.server.calls:
                self._execute(task)
        except _ClientGone:
            raise
        except Exception:
            log.exception("Exception while serving %s", request.path)
            if task.wrote_header:
                return False  # a partial answer was sent: only closing can end it
            self._out.clear()
            self._pending = 0
            failed = HTTPRequestParser(self.adj)
            failed.error = InternalServerError(
                "The server encountered an unexpected internal server error"
            )
            failed.version = request.version
            task = ErrorTask(self, failed)
            self._execute(task)
        finally:
            request.close()
        return not (task.close_on_finish or self._answered_late)

    @staticmethod
    def _execute(task: Task) -> None:
        # Task.service without its OSError handling: an app's OSError is the app's failure
        # (answered 500); the client's own socket errors arrive as _ClientGone.
        task.start()
        task.execute()
        task.finish()
