"""Optional OpenTelemetry spans: a pass, the API requests under it, admission requests.

Off until `enable()` is called (`cloudcoil_sync.enable_tracing`); OpenTelemetry (the
`otel` extra) is imported only then, so without it nothing here costs more than one
attribute read. Spans use the global tracer provider unless one is passed.
"""

from __future__ import annotations

import contextvars
import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = [
    "Span",
    "carried",
    "client_span",
    "current_span",
    "disable",
    "enable",
    "enabled",
    "served",
    "server_span",
    "set_error",
    "span",
    "traced",
]

R = TypeVar("R")
TRACER_NAME = "cloudcoil_sync"
Span = Any  # opentelemetry.trace.Span when tracing is on

_state: dict[str, Any] = {"tracer": None}


def enable(tracer_provider: Any = None) -> None:
    """Trace from now on (with `tracer_provider`, else OpenTelemetry's global one).

    Raises ImportError with the fix when the `otel` extra is not installed.
    """
    try:
        trace = importlib.import_module("opentelemetry.trace")
    except ImportError as error:
        raise ImportError(
            "Tracing needs OpenTelemetry: pip install 'cloudcoil_sync[otel]' (and an SDK)"
        ) from error
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    _state["tracer"] = provider.get_tracer(TRACER_NAME)
    _state["trace"] = trace
    _state["propagate"] = importlib.import_module("opentelemetry.propagate")


def disable() -> None:
    _state["tracer"] = None


def enabled() -> bool:
    return _state["tracer"] is not None


@contextmanager
def span(name: str, attributes: Mapping[str, Any], *, kind: str = "INTERNAL") -> Iterator[Span]:
    """A span (None when tracing is off); an exception escaping it marks it as an error."""
    tracer = _state["tracer"]
    if tracer is None:
        yield None
        return
    trace = _state["trace"]
    with tracer.start_as_current_span(
        name, kind=getattr(trace.SpanKind, kind), attributes=dict(attributes)
    ) as current:
        yield current


@contextmanager
def client_span(method: str, path: str) -> Iterator[Span]:
    """One API request (a child of the pass's span when a pass runs on this thread)."""
    with span(
        f"{method} {path.split('?', 1)[0]}",
        {"http.request.method": method, "url.path": path},
        kind="CLIENT",
    ) as current:
        yield current


@contextmanager
def server_span(
    name: str, headers: Mapping[str, str], attributes: Mapping[str, Any]
) -> Iterator[Span]:
    """A served request, continuing the caller's trace (W3C `traceparent`) where given."""
    tracer = _state["tracer"]
    if tracer is None:
        yield None
        return
    trace = _state["trace"]
    parent = _state["propagate"].extract(dict(headers))
    with tracer.start_as_current_span(
        name, context=parent, kind=trace.SpanKind.SERVER, attributes=dict(attributes)
    ) as current:
        yield current


def traced(method: str, path: str, send: Callable[[], R]) -> R:
    """`send()` (an API request returning a response) inside its client span."""
    with client_span(method, path) as current:
        try:
            response = send()
        except BaseException as error:
            code = getattr(error, "status_code", None)  # an APIError's answer
            if code is not None:
                current.set_attribute("http.response.status_code", code)
            set_error(current, error)
            raise
        current.set_attribute("http.response.status_code", getattr(response, "status_code", 0))
        return response


def served(environ: Mapping[str, Any], handle: Callable[[Any], tuple[int, R]]) -> tuple[int, R]:
    """`handle(environ)` (an admission request: `(status, document)`) in its server span."""
    headers = {
        name: str(environ[key])
        for name, key in (("traceparent", "HTTP_TRACEPARENT"), ("tracestate", "HTTP_TRACESTATE"))
        if key in environ
    }
    path = str(environ.get("PATH_INFO", ""))
    attributes = {"http.request.method": str(environ.get("REQUEST_METHOD", "")), "url.path": path}
    with server_span(f"admission {path}", headers, attributes) as current:
        try:
            status, document = handle(environ)
        except BaseException as error:
            set_error(current, error)
            raise
        current.set_attribute("http.response.status_code", status)
        if isinstance(document, dict):
            allowed = (document.get("response") or {}).get("allowed")
            if allowed is not None:
                current.set_attribute("cloudcoil.admission.allowed", bool(allowed))
        return status, document


def carried(function: Callable[[], R]) -> Callable[[], R]:
    """`function` to run on another thread under this thread's current span (as is when
    tracing is off)."""
    if _state["tracer"] is None:
        return function
    context = contextvars.copy_context()
    return lambda: context.run(function)


def current_span() -> Span:
    """The span current on this thread (OpenTelemetry's invalid span when none)."""
    return _state["trace"].get_current_span()


def set_error(current: Span, error: BaseException) -> None:
    """Mark `current` (a span, or None) as failed with `error`."""
    if current is None:
        return
    trace = _state["trace"]
    current.record_exception(error)
    current.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"))
