"""controller-runtime's webhook metrics around the admission WSGI app.

Requests are labelled by their registered route path (``webhook``) and, for the counter, the
HTTP status code; any other path is labelled ``unknown`` so that clients cannot grow the label
set. No object names ever become label values.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["InstrumentedAdmission", "WebhookCollectors"]

UNKNOWN = "unknown"


class WebhookCollectors(Protocol):
    """The three collectors `OperatorMetrics` defines for webhooks."""

    webhook_latency: Any
    webhook_requests: Any
    webhook_in_flight: Any


class InstrumentedAdmission:
    """Count, time and track in-flight admission requests per route path."""

    def __init__(
        self,
        app: WSGIApplication,
        paths: Collection[str],
        metrics: WebhookCollectors,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.app = app
        self.paths = paths
        self.metrics = metrics
        self.clock = clock

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        label = path if path in self.paths else UNKNOWN
        code = ["500"]

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            code[0] = status.split(" ", 1)[0]
            if exc_info is None:
                return start_response(status, headers)
            return start_response(status, headers, exc_info)

        in_flight = self.metrics.webhook_in_flight.labels(label)
        in_flight.inc()
        started = self.clock()
        try:
            # The body is materialised here so that the latency covers the whole answer.
            return list(self.app(environ, capture))
        finally:
            self.metrics.webhook_latency.labels(label).observe(self.clock() - started)
            self.metrics.webhook_requests.labels(label, code[0]).inc()
            in_flight.dec()
