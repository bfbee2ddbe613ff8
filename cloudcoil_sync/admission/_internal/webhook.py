"""`AdmissionWebhook`: the WSGI application that answers AdmissionReview v1 requests.

Each path serves one route. Reviews are parsed strictly and checked against the route
before any handler runs; handlers are plain functions run under the route's deadline, at
most the route's own number at once (`RouteSlots`: a stuck route answers 504 for itself
only; a handler past its deadline is abandoned, never killed, and its late result
discarded). Served by `WebhookHost`, a handler runs on the request's own thread and
the host's watchdog answers 504 at the deadline (no thread hand-off per request); under
any other WSGI server it runs on a pool thread the request waits for. Answers follow
cloudcoil 0.8: 404 unknown path, 405 not POST, 415 not JSON, 413 too large, 400 malformed
or mismatched review, 504 deadline, 500 handler defect; otherwise 200 with the review's
response. Under another WSGI server `/healthz` is answered as the operator hosts do.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from cloudcoil_sync._internal import tracing
from cloudcoil_sync._internal.endpoints import HEALTHZ, OperatorEndpoints
from cloudcoil_sync._internal.patches import MutationBase, json_copy, mutation_patch
from cloudcoil_sync.admission._internal.concurrency import RouteSlots
from cloudcoil_sync.admission._internal.conversion import serve_conversion
from cloudcoil_sync.admission._internal.deadlines import LATE_ANSWER
from cloudcoil_sync.admission._internal.handlers import HandlerPool, HandlerTimeout, PoolClosed
from cloudcoil_sync.admission._internal.lograte import ClientLog
from cloudcoil_sync.admission._internal.request import (
    AdmissionDenied,
    AdmissionRequest,
    CachedReader,
)
from cloudcoil_sync.admission._internal.review import (
    REVIEW_API_VERSION,
    InvalidReview,
    parse_review,
)
from cloudcoil_sync.admission._internal.routes import DEFAULT_MAX_BODY_BYTES, AdmissionRoutes, Route
from cloudcoil_sync.client import InvalidObject

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

    from cloudcoil.resources import Resource

    from cloudcoil_sync.client import Config

# HandlerPool and the review parsing live in `handlers` and `review`; re-exported here.
__all__ = [
    "AdmissionWebhook",
    "HandlerPool",
    "HandlerTimeout",
    "InvalidReview",
    "PoolClosed",
    "parse_review",
]

log = logging.getLogger("cloudcoil_sync.admission")

_INVALID = "Invalid or mismatched admission.k8s.io/v1 AdmissionReview"
_FAILED = "Admission webhook failed"


class AdmissionWebhook(AdmissionRoutes):
    """The WSGI application answering AdmissionReview v1 requests for its routes.

    As in cloudcoil 0.8 it is also a route table: `AdmissionWebhook(config=...)` then
    `@webhook.validating(...)` / `@webhook.mutating(...)` / `webhook.register(...)`. Given
    `routes` (an `AdmissionRoutes`, whose table it then serves live, or routes by path or
    an iterable of routes) it serves those. `config` backs `request.client(...)`, `cache`
    backs `request.cached(...)`, `max_workers` bounds each route's concurrent handlers (a
    route's `max_concurrency` overrides it; see `concurrency`); `close()` joins the
    handler threads.
    """

    def __init__(
        self,
        routes: AdmissionRoutes | Mapping[str, Route] | Iterable[Route] | None = None,
        *,
        config: Config | None = None,
        cache: CachedReader | None = None,
        max_body_bytes: int | None = None,
        max_workers: int = 16,
    ) -> None:
        if isinstance(routes, AdmissionRoutes):
            super().__init__(
                config=config if config is not None else routes.config,
                max_body_bytes=max_body_bytes or routes.max_body_bytes,
            )
            self.routes = routes.routes  # served live: routes added to `routes` are served
            self.conversions = routes.conversions
        else:
            super().__init__(config=config, max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES)
            if isinstance(routes, Mapping):
                self.routes = dict(routes)
            elif routes is not None:
                self.routes = {route.path: route for route in routes}
        self.cache = cache
        self.pool = HandlerPool(max_workers)
        # Each route runs at most its own max_concurrency (default max_workers) handlers,
        # and parses at most as many bodies at once.
        self.slots = RouteSlots(max_workers)
        self.malformed = ClientLog(log)  # a line per client and 10 s

    def close(self, timeout: float = 5.0) -> bool:
        return self.pool.close(timeout)

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == HEALTHZ and HEALTHZ not in self.routes:
            # Standalone (under another WSGI server): the operator endpoints' /healthz. The
            # webhook host answers every operator endpoint before this app is reached.
            return _STANDALONE(environ, start_response)
        if tracing.enabled():  # a server span, continuing the API server's trace if sent
            status, document = tracing.served(environ, self.handle)
        else:
            status, document = self.handle(environ)
        body = json.dumps(document, separators=(",", ":")).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        if status == 405:
            headers.append(("Allow", "POST"))
        start_response(_STATUS[status], headers)
        return [body]

    def handle(self, environ: WSGIEnvironment) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON document) for one WSGI request."""
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        route = self.routes.get(path)
        if route is None and path in self.conversions:
            return serve_conversion(self, self.conversions[path], environ)
        if route is None:
            return 404, {"message": "Unknown webhook path"}
        if method != "POST":
            return 405, {"message": "Method not allowed"}
        media_type = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            return 415, {"message": "Expected application/json"}
        deadline = time.monotonic() + route.timeout_seconds
        body = self._read_body(environ)
        if body is None:
            return 413, {"message": "Request body too large"}
        # Decoding costs memory and CPU in proportion to the body: within the route's slots.
        if not self.slots.acquire(path, route.max_concurrency, deadline - time.monotonic()):
            return 504, {"message": "Admission webhook timed out"}
        try:
            review = parse_review(body, route)
        except InvalidReview as error:
            client = str(environ.get("REMOTE_ADDR", ""))
            message = "Rejected an AdmissionReview on %s from %s: %s"
            self.malformed.log(logging.INFO, client, message, path, client, error)
            return 400, {"message": _INVALID}
        finally:
            self.slots.release(path)
        return self._admit(route, review, deadline, environ)

    def _read_body(self, environ: WSGIEnvironment) -> bytes | None:
        try:
            declared = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        declared = max(declared, 0)
        if declared > self.max_body_bytes:
            return None
        stream = environ["wsgi.input"]
        body: bytes = stream.read(declared) if declared else stream.read(self.max_body_bytes + 1)
        return None if len(body) > self.max_body_bytes else body

    # -- admission -------------------------------------------------------------------------

    def _admit(
        self, route: Route, review: dict[str, Any], deadline: float, environ: WSGIEnvironment
    ) -> tuple[int, dict[str, Any]]:
        uid = review["uid"]
        try:  # a `patches` route reads the raw JSON: no model to build
            resource = None if route.patches else _typed(route, review.get("object"))
            old_resource = None if route.patches else _old(route, review)
        except ValidationError as error:
            if _deleting(review):  # e.g. removing the finalizer of an object that never fit
                log.info("Allowed %s of a deleting object the model rejects", route.path)
                return 200, _response(uid, True)
            return 200, _response(uid, False, status=_invalid_status(error, route, review))
        request: AdmissionRequest[Any] = AdmissionRequest.from_review(
            review, resource, old_resource, environ, config=self.config, cache=self.cache
        )
        # What the patch is computed against: the object as received and the typed one's
        # dumps, taken before the handler can change the request's copies. Validating
        # routes need neither.
        received = before = None
        if route.mutation and resource is not None:
            received = json_copy(review["object"])
            before = MutationBase(resource)
        outcome = self._run(route, request, deadline, environ.get(LATE_ANSWER))
        if isinstance(outcome, tuple):
            return outcome
        if isinstance(outcome, AdmissionDenied):
            return 200, _denial(route, request, outcome)
        try:
            patch = _patch(route, received, before, outcome)
        except Exception:
            log.exception(
                "Admission handler %s returned an unusable result for %s",
                _name(route),
                _subject(route, request),
            )
            return 500, {"message": _FAILED}
        log.debug(
            "%s allowed %s (%d patch operations)",
            route.path,
            _subject(route, request),
            len(patch or ()),
        )
        warned = _warned(request.warnings)
        if not patch:
            return 200, _response(uid, True, **warned)
        encoded = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
        return 200, _response(uid, True, patchType="JSONPatch", patch=encoded, **warned)

    def _run(
        self,
        route: Route,
        request: AdmissionRequest[Any],
        deadline: float,
        late: LateAnswer | None,
    ) -> Any | AdmissionDenied | tuple[int, dict[str, Any]]:
        """The handler's result, its AdmissionDenied, or a ready (status, document) error."""
        try:
            if late is not None:
                return self._run_here(route, request, deadline, late)
            return self._run_on_pool(route, request, deadline)
        except PoolClosed:
            return 503, {"message": "Admission webhook is shutting down"}
        except HandlerTimeout as timeout:
            if timeout.abandoned and late is None:  # else logged when the 504 went out
                log.warning(
                    "Admission handler %s exceeded its %ss deadline; abandoned (%s)",
                    _name(route),
                    route.timeout_seconds,
                    _subject(route, request),
                )
            return 504, {"message": "Admission webhook timed out"}
        except AdmissionDenied as denied:
            return denied
        except BaseException:  # even SystemExit from a handler is the handler's defect
            log.exception(
                "Admission handler %s failed on %s", _name(route), _subject(route, request)
            )
            return 500, {"message": _FAILED}

    def _run_here(
        self, route: Route, request: AdmissionRequest[Any], deadline: float, late: LateAnswer
    ) -> Any:
        """Run the handler on this (the request's) thread; the host answers 504 at the
        deadline if it is still running, and its late result is then discarded."""
        if self.pool.closed:
            raise PoolClosed("The admission webhook is closing")
        path = route.path
        if not self.slots.acquire(path, route.max_concurrency, deadline - time.monotonic()):
            raise HandlerTimeout(abandoned=False)  # never started

        def fired() -> None:
            log.warning(
                "Admission handler %s exceeded its %ss deadline; abandoned (%s)",
                _name(route),
                route.timeout_seconds,
                _subject(route, request),
            )

        timer = late(deadline, _STATUS[504], _TIMED_OUT_HEADERS, _TIMED_OUT_BODY, fired)
        error: BaseException | None = None
        try:
            value = route.handler(request)
        except BaseException as failure:
            value, error = None, failure
        finally:
            self.slots.release(path)
        if not timer.cancel():
            if error is not None:
                log.info("An abandoned admission handler later failed: %r", error)
            raise HandlerTimeout(abandoned=True)
        if error is not None:
            raise error
        return value

    def _run_on_pool(self, route: Route, request: AdmissionRequest[Any], deadline: float) -> Any:
        """Run the handler on a pool thread (other WSGI servers), within the route's slots;
        an abandoned handler keeps its slot until it returns."""
        path, handler = route.path, route.handler
        if not self.slots.acquire(path, route.max_concurrency, deadline - time.monotonic()):
            raise HandlerTimeout(abandoned=False)

        def call() -> Any:
            try:
                return handler(request)
            finally:
                self.slots.release(path)

        try:
            return self.pool.run(call, deadline - time.monotonic())
        except HandlerTimeout as timeout:
            if not timeout.abandoned:
                self.slots.release(path)  # never started: call() will not release it
            raise
        except PoolClosed:
            self.slots.release(path)
            raise


class _Cancellable(Protocol):
    def cancel(self) -> bool: ...


# (deadline, status, headers, body, on_fire) -> a timer whose cancel() is False once the
# answer was sent (see the host's LATE_ANSWER).
LateAnswer = Callable[[float, str, list[tuple[str, str]], bytes, Callable[[], None]], _Cancellable]


def _name(route: Route) -> str:
    handler = route.handler
    return f"{getattr(handler, '__qualname__', handler)!s} ({route.path})"


def _old(route: Route, review: dict[str, Any]) -> Resource | None:
    """The stored object, typed; None on an UPDATE when it never fit the model, so that the
    update that fixes it is judged on the new object alone (a DELETE of it is let through:
    see `_deleting`)."""
    try:
        return _typed(route, review.get("oldObject"))
    except ValidationError:
        if review.get("operation") != "UPDATE":
            raise
        log.info("%s: the stored object does not fit the model; old_resource is None", route.path)
        return None


def _deleting(review: dict[str, Any]) -> bool:
    """A DELETE, or an UPDATE of an object already being deleted (only its finalizers can
    still change): an object that never fit the model must still be removable."""
    if review.get("operation") == "DELETE":
        return True
    obj = review.get("object")
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    return (
        review.get("operation") == "UPDATE"
        and isinstance(metadata, dict)
        and bool(metadata.get("deletionTimestamp"))
    )


def _denial(
    route: Route, request: AdmissionRequest[Any], denied: AdmissionDenied
) -> dict[str, Any]:
    """The response denying `request`, logged: a denial is what a kubectl user sees, so its
    line is in `kubectl logs` at the default level (allowed requests log at DEBUG)."""
    log.info("%s denied %s: %s", route.path, _subject(route, request), denied.message)
    status = {"code": denied.code, "reason": denied.reason, "message": denied.message}
    return _response(
        request.uid, False, status=status, **_warned(request.warnings + denied.warnings)
    )


def _warned(warnings: list[str]) -> dict[str, Any]:
    """The response's `warnings` field when there are any (at most 32)."""
    return {"warnings": warnings[:32]} if warnings else {}


def _subject(route: Route, request: AdmissionRequest[Any]) -> str:
    """What a log line is about: `CREATE Kind namespace/name`."""
    where = f"{request.namespace}/{request.name}" if request.namespace else request.name
    return f"{request.operation} {route.model.__name__} {where or '<unnamed>'}"


def _typed(route: Route, raw: dict[str, Any] | None) -> Resource | None:
    return None if raw is None else route.model.model_validate(raw)


def _patch(
    route: Route, received: dict[str, Any] | None, before: MutationBase | None, after: Any
) -> list[dict[str, Any]]:
    if not route.mutation:
        if after is not None:
            raise TypeError("Validating handlers return None, or raise AdmissionDenied")
        return []
    if after is None:
        return []
    if route.patches:
        return _operations(after)
    if before is None or received is None:
        raise TypeError("A mutating handler cannot return an object for a DELETE")
    if not isinstance(after, route.model):
        raise TypeError(
            f"Mutating handlers return their {route.model.__name__} or None, "
            f"not {type(after).__name__}"
        )
    return mutation_patch(received, before, after)


def _operations(patch: Any) -> list[dict[str, Any]]:
    """A `patches` route's answer: JSON Patch operations, checked for shape."""
    if not isinstance(patch, list) or not all(
        isinstance(op, dict) and isinstance(op.get("op"), str) and isinstance(op.get("path"), str)
        for op in patch
    ):
        raise TypeError("A patches route's handler returns a list of JSON Patch operations")
    return patch


def _response(uid: str, allowed: bool, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": REVIEW_API_VERSION,
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": allowed, **fields},
    }


def _invalid_status(error: ValidationError, route: Route, review: dict[str, Any]) -> dict[str, Any]:
    """A denial naming the fields the operator's model rejects, and that the handler of this
    route therefore did not run (so the message is not mistaken for the handler's verdict)."""
    kind = (review.get("kind") or {}).get("kind") or route.model.__name__
    name = review.get("name") or "<unnamed>"
    invalid = InvalidObject.from_error(error, kind, review.get("namespace"), name)
    subject, summary = invalid.describe(), invalid.summary
    role = "mutating" if route.mutation else "validating"
    log.info(
        "Denied %s %s on %s: it does not fit the %s model (%s); handler not run",
        review.get("operation"),
        subject,
        route.path,
        route.model.__name__,
        summary,
    )
    message = (
        f"{subject} does not fit the operator's {route.model.__name__} model, so its "
        f"{role} admission handler {_name(route)} did not run: {summary}"
    )
    causes = [
        {"reason": "FieldValueInvalid", "field": where[:256], "message": message[:256]}
        for where, message in invalid.problems
    ]
    return {
        "code": 422,
        "reason": "Invalid",
        "message": message,
        "details": {"causes": causes},
    }


# -- strict AdmissionReview parsing ----------------------------------------------------------


_TIMED_OUT_BODY = json.dumps(
    {"message": "Admission webhook timed out"}, separators=(",", ":")
).encode()
_TIMED_OUT_HEADERS = [
    ("Content-Type", "application/json"),
    ("Content-Length", str(len(_TIMED_OUT_BODY))),
]

#: Standalone, `/healthz` (only) is answered as the hosts answer it: `ok`, GET or HEAD.
_STANDALONE = OperatorEndpoints(
    healthy=lambda: True, ready=lambda: False, controllers_ready=lambda: False
)

_STATUS = {
    200: "200 OK",
    400: "400 Bad Request",
    404: "404 Not Found",
    405: "405 Method Not Allowed",
    413: "413 Payload Too Large",
    415: "415 Unsupported Media Type",
    500: "500 Internal Server Error",
    503: "503 Service Unavailable",
    504: "504 Gateway Timeout",
}
