"""The operator's health and metrics endpoints: one WSGI app for both of its hosts.

`HealthServer` (plain HTTP, ``controller/_internal/health.py``) and the webhook host (HTTPS,
``admission/_internal/server.py``) serve this same app, so a probe, a scrape or a person with
curl gets the same answer from either: ``GET``/``HEAD`` ``/healthz`` (``ok``, or 503
``unhealthy``), ``/readyz`` and ``/controllers/readyz`` (``ok``, or 503 ``not ready``),
``/metrics`` (the Prometheus text format, empty without a registry; refused 401/403/429/500
when a `metrics_access` decision says so), another method 405 with ``Allow: GET, HEAD``.
What the checks report is the host owner's choice (SPEC §5/§6: the probed `/healthz` and
`/readyz` are true on a healthy standby; leadership shows only on `/controllers/readyz`).
Any other path goes to `fallback` (the admission app), or is answered 404.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from prometheus_client import CollectorRegistry

__all__ = [
    "CONTROLLERS_READYZ",
    "HEALTHZ",
    "METRICS",
    "METRICS_CONTENT_TYPE",
    "PATHS",
    "READYZ",
    "Access",
    "Check",
    "Named",
    "OperatorEndpoints",
]

log = logging.getLogger("cloudcoil_sync.endpoints")

HEALTHZ = "/healthz"
READYZ = "/readyz"
CONTROLLERS_READYZ = "/controllers/readyz"
METRICS = "/metrics"
#: Every path the app answers itself: no admission route may take one, none takes a body.
PATHS = frozenset({HEALTHZ, READYZ, CONTROLLERS_READYZ, METRICS})
#: What `generate_latest` writes (the classic text format).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_METHODS = ("GET", "HEAD")

Check = Callable[[], bool]
#: (path, query string, the checks by path) -> (status, body), or None to answer as usual: the
#: named checks (`?verbose`, `/readyz/<name>`) a run adds (controller/_internal/checks.py).
Named = Callable[[str, str, Mapping[str, Check]], "tuple[int, bytes] | None"]
#: (Authorization header, path, client address) -> HTTP status for a metrics request.
Access = Callable[[str | None, str, str], int]

_STATUS = {
    200: "200 OK",
    401: "401 Unauthorized",
    403: "403 Forbidden",
    404: "404 Not Found",
    405: "405 Method Not Allowed",
    429: "429 Too Many Requests",
    500: "500 Internal Server Error",
    503: "503 Service Unavailable",
}


class OperatorEndpoints:
    """WSGI app answering the health and metrics paths; other paths go to `fallback`.

    `healthy` answers `/healthz`, `ready` `/readyz`, `controllers_ready` `/controllers/readyz`
    (a check that raises counts as false, logged), unless `named` answers first (the named
    checks); `registry` is what `/metrics` exposes, to whom `metrics_access` allows it.
    """

    def __init__(
        self,
        *,
        healthy: Check,
        ready: Check,
        controllers_ready: Check,
        registry: CollectorRegistry | None = None,
        metrics_access: Access | None = None,
        fallback: WSGIApplication | None = None,
        named: Named | None = None,
    ) -> None:
        self.checks: dict[str, Check] = {
            HEALTHZ: healthy,
            READYZ: ready,
            CONTROLLERS_READYZ: controllers_ready,
        }
        self.registry = registry
        self.metrics_access = metrics_access
        self.fallback = fallback
        self.named = named

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        body = self._route(environ, start_response)
        if environ.get("REQUEST_METHOD") != "HEAD":
            return body
        # A server may send whatever the app returns, even for HEAD; a body there would be
        # read as the next response on a kept-alive connection.
        close = getattr(body, "close", None)
        if close is not None:
            close()
        return []

    def _route(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if self.named is not None and environ.get("REQUEST_METHOD") in _METHODS:
            found = self.named(path, environ.get("QUERY_STRING", ""), self.checks)
            if found is not None:
                return answer(start_response, found[0], found[1])
        if path not in PATHS:
            if self.fallback is not None:
                return self.fallback(environ, start_response)
            return answer(start_response, 404, b"not found\n")
        if environ.get("REQUEST_METHOD") not in _METHODS:
            allow = [("Allow", ", ".join(_METHODS))]
            return answer(start_response, 405, b"method not allowed\n", extra=allow)
        if path == METRICS:
            return self._metrics(environ, start_response)
        if _safely(self.checks[path], path):
            return answer(start_response, 200, b"ok\n")
        return answer(start_response, 503, b"unhealthy\n" if path == HEALTHZ else b"not ready\n")

    def _metrics(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        access = self.metrics_access
        if access is not None:
            client = str(environ.get("REMOTE_ADDR", ""))
            code = access(environ.get("HTTP_AUTHORIZATION"), METRICS, client)
            if code != 200:
                extra = [("Retry-After", "1")] if code == 429 else []
                return answer(start_response, code, _STATUS[code][4:].encode() + b"\n", extra=extra)
        from prometheus_client.exposition import generate_latest

        body = b"" if self.registry is None else generate_latest(self.registry)
        return answer(start_response, 200, body, content_type=METRICS_CONTENT_TYPE)


def _safely(check: Check, path: str) -> bool:
    try:
        return bool(check())
    except Exception:
        log.exception("Health check for %s failed", path)
        return False


def answer(
    start_response: StartResponse,
    code: int,
    body: bytes,
    *,
    content_type: str = _TEXT,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    """Send a complete answer: `body` with its length, never cached."""
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
        *(extra or []),
    ]
    start_response(_STATUS[code], headers)
    return [body]
