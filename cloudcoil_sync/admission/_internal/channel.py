"""One TLS connection's HTTP/1.1, answered by waitress's request parser and WSGI tasks.

`Connections.serve` runs on the connection's own thread (`TLSFront` starts it): requests are
parsed and answered in order, with the header, body-rate and idle deadlines of
`ConnectionLimits`, a 413 before reading an oversized body, and the late-answer hook
(LATE_ANSWER) through which the app's slow handlers still answer on time. This is the only
module that imports waitress: what it uses beyond waitress's public API is listed in
WAITRESS_INTERNALS (setup.cfg pins the major version; a test checks the installed one).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from waitress.adjustments import Adjustments
from waitress.parser import HTTPRequestParser
from waitress.proxy_headers import proxy_headers_middleware
from waitress.task import ErrorTask, Task, WSGITask
from waitress.utilities import InternalServerError, RequestEntityTooLarge

from cloudcoil_sync._internal.endpoints import PATHS
from cloudcoil_sync.admission._internal.connections import Phase
from cloudcoil_sync.admission._internal.deadlines import LATE_ANSWER, Timer, Watchdog
from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.lograte import ClientLog
from cloudcoil_sync.admission._internal.request import CLIENT_CERTIFICATE
from cloudcoil_sync.admission._internal.tls import TLSStream
from cloudcoil_sync.admission._internal.turns import Turns

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

    class _WSGITask:
        """What `_Task` uses of waitress's (untyped) WSGITask."""

        environ: dict[str, Any] | None
        channel: _Channel

        def __init__(self, channel: _Channel, request: HTTPRequestParser) -> None: ...

        def get_environment(self) -> dict[str, Any]: ...

        def set_close_on_finish(self) -> None: ...

        def build_response_header(self) -> bytes: ...

else:
    _WSGITask = WSGITask

__all__ = ["CLIENT_VERIFIED", "LATE_ANSWER", "NO_BODY_PATHS", "WAITRESS_INTERNALS", "Connections"]

log = logging.getLogger("cloudcoil_sync.admission.server")

# The environ key of a callable `(deadline, status, headers, body, on_fire) -> Timer` that
# sends that answer at `deadline` (time.monotonic) unless the Timer is cancelled first; once
# sent, whatever the app answers later is discarded and the connection closes. It lets an app
# run slow code on the connection's own thread and still answer on time.
# The environ key telling whether the client presented a certificate the listener verified.
CLIENT_VERIFIED = "cloudcoil.client_verified"
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
    "waitress.task.Task": (
        "start",
        "finish",
        "wrote_header",
        "close_on_finish",
        "set_close_on_finish",
        "build_response_header",
    ),
    "waitress.task.WSGITask": ("execute", "get_environment", "environ"),
    "waitress.task.ErrorTask": ("execute",),
    "waitress.proxy_headers.proxy_headers_middleware": (),
    "waitress.utilities.InternalServerError": (),
    "waitress.utilities.RequestEntityTooLarge": (),
}
# Health and metrics paths take no request body (413 before reading one).
NO_BODY_PATHS = PATHS
# After a 413, what the client still sends is read and dropped for this long (and at most
# this much), so that it can read the answer instead of a reset.
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 32 << 20
_TOO_LARGE_BODY = b'{"message":"Request body too large"}'
_TOO_LARGE = (
    b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_TOO_LARGE_BODY), _TOO_LARGE_BODY)
)


def _adjustments(max_request_body_size: int) -> Adjustments:
    limit = max_request_body_size
    return Adjustments(
        url_scheme="https",
        # waitress refuses a body of this size or more: a declared Content-Length as soon as
        # the headers are in, a chunked body as it arrives. Below it, bodies stay in memory
        # (waitress would spool one over inbuf_overflow to a temp file).
        max_request_body_size=limit + 1,
        inbuf_overflow=limit + 1024,
        clear_untrusted_proxy_headers=True,
        expose_tracebacks=False,
        ident="cloudcoil",
    )


class Connections:
    """What waitress's tasks read from their server, and the per-connection loop.

    `threads`, if given, bounds how many connections run the app at once; `host` is the
    bound address (SERVER_NAME); `max_request_body_size` the largest body taken.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        host: str,
        limits: ConnectionLimits,
        max_request_body_size: int,
        watchdog: Watchdog,
        turns: Turns,
        threads: int | None = None,
        draining: threading.Event | None = None,
    ) -> None:
        adj = _adjustments(max_request_body_size)
        # Set once the server drains: every answer closes its connection.
        self.draining = draining if draining is not None else threading.Event()
        self.adj = adj
        self.limits = limits
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
        self.slow_clients = ClientLog(log)  # a line per client and 10 s for 408s
        self.effective_port = 0  # SERVER_PORT: the bound port, set once listening
        self.server_name = "localhost" if host in ("", "0.0.0.0", "::") else host

    def serve(self, stream: TLSStream) -> None:
        _Channel(self, stream).run()


def _refuse_body(request: HTTPRequestParser) -> None:
    """Answer 413 at once when a request to a path that takes no body comes with one."""
    if request.chunked or request.content_length > 0:
        request.error = RequestEntityTooLarge("This path takes no request body")
        request.completed = True


class _Task(_WSGITask):
    """waitress's WSGI task, with the channel's late-answer hook in the environ; while
    the server drains, its answer carries `Connection: close` and ends the connection."""

    def build_response_header(self) -> bytes:
        if self.channel.server.draining.is_set():
            self.set_close_on_finish()  # retires the client's pooled connection
        return super().build_response_header()

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] | None = self.environ
        if environ is None:
            environ = super().get_environment()
            environ[LATE_ANSWER] = self.channel.answer_late
            environ[CLIENT_VERIFIED] = self.channel.stream.client_verified
            environ[CLIENT_CERTIFICATE] = self.channel.stream.client_certificate
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

    def __init__(self, server: Connections, stream: TLSStream) -> None:
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
            connection = self.stream.connection
            while data := self.stream.receive(self._deadline()):
                connection.busy = True  # its silence from here on is ours, not the client's
                # Sending inside the turn too: a thread back from its send would otherwise
                # race the holder for the GIL (p99 at 8 clients 8-10 ms instead of 4-5).
                with self.server.turns.turn():
                    keep_open = self._received(data)
                    self.flush()
                connection.busy = False
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
        allowed: float = request.body_bytes_received / limits.min_body_rate
        return self._body_started + limits.body_grace + allowed

    def _timed_out(self) -> None:
        client = str(self.addr[0])
        message = "Webhook client %s was too slow to send its request; answered 408"
        self.server.slow_clients.log(logging.INFO, client, message, client)
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
                self.stream.connection.enter(Phase.RECEIVING)
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
                self.stream.connection.enter(Phase.ACTIVE)  # no longer to be evicted
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
