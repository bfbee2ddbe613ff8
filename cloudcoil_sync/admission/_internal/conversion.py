"""The conversion webhook: ConversionReview v1 for the multi-version kinds of an operator.

Served by the same `AdmissionWebhook` (and so the same TLS `WebhookServer`) as admission, on
its own path per CRD (``/convert/<plural>.<group>``), with its own concurrency slots and
deadline and the same hardening: 404/405/415/413 as admission routes, 400 for a body that is
not a ConversionReview v1 (strict: bounded JSON, the envelope, a uid, the desired
apiVersion, a list of objects), 504 at the deadline, 503 while closing. A conversion that
fails (an object the models reject, a function that raises) is answered 200 with
``result.status: Failure`` and a message, which kube-apiserver passes on to its client.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from cloudcoil_sync.admission._internal.concurrency import RouteSlots
from cloudcoil_sync.admission._internal.conversion_route import ConversionRoute, conversion_route
from cloudcoil_sync.admission._internal.review import InvalidReview, decode_document
from cloudcoil_sync.crd import convert

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

__all__ = [
    "CONVERSION_REVIEW_API_VERSION",
    "ConversionRoute",
    "conversion_route",
    "parse_conversion_review",
    "serve_conversion",
]

log = logging.getLogger("cloudcoil_sync.admission")
CONVERSION_REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
_LATE_ANSWER = "cloudcoil.late_answer"  # the host's hook, see webhook.py
_TIMED_OUT = json.dumps({"message": "Conversion webhook timed out"}).encode()
_TIMED_OUT_HEADERS = [
    ("Content-Type", "application/json"),
    ("Content-Length", str(len(_TIMED_OUT))),
]
Answer = tuple[int, dict[str, Any]]


class _Pool(Protocol):
    @property
    def closed(self) -> bool: ...


class _Host(Protocol):
    """What the conversion endpoint uses of the `AdmissionWebhook` serving it."""

    slots: RouteSlots

    @property
    def pool(self) -> _Pool: ...

    def _read_body(self, environ: WSGIEnvironment) -> bytes | None: ...


def parse_conversion_review(body: bytes) -> dict[str, Any]:
    """The ``request`` of a ConversionReview v1, else InvalidReview."""
    document = decode_document(body)
    if (
        document.get("apiVersion") != CONVERSION_REVIEW_API_VERSION
        or document.get("kind") != "ConversionReview"
    ):
        raise InvalidReview("not an apiextensions.k8s.io/v1 ConversionReview")
    request = document.get("request")
    if not isinstance(request, dict):
        raise InvalidReview("request missing")
    uid, desired = request.get("uid"), request.get("desiredAPIVersion")
    if not isinstance(uid, str) or not uid or len(uid) > 256:
        raise InvalidReview("request.uid must be a nonempty string")
    if not isinstance(desired, str) or not desired:
        raise InvalidReview("request.desiredAPIVersion must be a nonempty string")
    objects = request.get("objects")
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise InvalidReview("request.objects must be a list of objects")
    return request


def serve_conversion(host: _Host, route: ConversionRoute, environ: WSGIEnvironment) -> Answer:
    """(HTTP status, document) for one request to a conversion path."""
    if environ.get("REQUEST_METHOD", "GET") != "POST":
        return 405, {"message": "Method not allowed"}
    media_type = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        return 415, {"message": "Expected application/json"}
    if host.pool.closed:
        return 503, {"message": "Conversion webhook is shutting down"}
    deadline = time.monotonic() + route.timeout_seconds
    body = host._read_body(environ)
    if body is None:
        return 413, {"message": "Request body too large"}
    if not host.slots.acquire(route.path, route.max_concurrency, deadline - time.monotonic()):
        return 504, {"message": "Conversion webhook timed out"}
    late = environ.get(_LATE_ANSWER)
    timer = None
    if late is not None:
        timer = late(deadline, "504 Gateway Timeout", _TIMED_OUT_HEADERS, _TIMED_OUT, _fired(route))
    try:
        answer = _answer(route, body, str(environ.get("REMOTE_ADDR", "")))
    finally:
        host.slots.release(route.path)
    if timer is not None and not timer.cancel():
        return 504, {"message": "Conversion webhook timed out"}  # already answered
    return answer


def _fired(route: ConversionRoute) -> Callable[[], None]:
    def fired() -> None:
        log.warning(
            "Conversion of %s exceeded its %ss deadline; abandoned",
            route.versions.label,
            route.timeout_seconds,
        )

    return fired


def _answer(route: ConversionRoute, body: bytes, client: str) -> Answer:
    try:
        request = parse_conversion_review(body)
    except InvalidReview as error:
        log.info("Rejected a ConversionReview on %s from %s: %s", route.path, client, error)
        return 400, {"message": "Invalid apiextensions.k8s.io/v1 ConversionReview"}
    desired, converted = request["desiredAPIVersion"], []
    try:
        for obj in request["objects"]:
            converted.append(convert(route.versions, obj, desired))
    except Exception as error:  # a user function's defect is this conversion's failure
        where = _subject(obj)
        log.warning("Conversion of %s to %s failed: %s", where, desired, error)
        result = {"status": "Failure", "message": f"converting {where} to {desired}: {error}"}
        return 200, _review(request["uid"], [], result)
    return 200, _review(request["uid"], converted, {"status": "Success"})


def _subject(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    name = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}".lstrip("/")
    return f"{obj.get('apiVersion')} {obj.get('kind')} {name or '<unnamed>'}"


def _review(uid: str, objects: list[dict[str, Any]], result: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": CONVERSION_REVIEW_API_VERSION,
        "kind": "ConversionReview",
        "response": {"uid": uid, "convertedObjects": objects, "result": result},
    }
