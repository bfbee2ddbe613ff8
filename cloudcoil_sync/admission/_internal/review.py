"""Strict parsing of AdmissionReview v1 bodies, checked against the route they came for.

JSON with no NaN/Infinity (and no number overflowing to infinity, no integer past Python's
digit limit), the v1 envelope, the shape of every member a handler can read, and the route's
kind, resource, operation, subresource and scope, with the object/oldObject combination its
operation implies. What a body may cost is bounded before and after it is decoded: at most
MAX_VALUES JSON values (counted from its separators before decoding, so a 4 MiB array of empty
objects is refused before it becomes a million dicts) and at most MAX_DEPTH levels of nesting
(so that no later copy, diff or validation of it can exhaust the stack).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from cloudcoil_sync.admission._internal.routes import Route

__all__ = ["REVIEW_API_VERSION", "InvalidReview", "decode_document", "parse_review"]

REVIEW_API_VERSION = "admission.k8s.io/v1"
# Kubernetes objects are a few levels deep and, at the API server's request limit of 3 MiB,
# rarely hold more than some thousands of values; each decoded value costs ~50-100 bytes.
MAX_DEPTH = 100
MAX_VALUES = 100_000


class InvalidReview(ValueError):
    """The body is not a well-formed AdmissionReview v1 for this route."""


def _reject_constant(name: str) -> Any:
    raise InvalidReview(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 overflows to infinity
        raise InvalidReview(f"non-finite number {text}")
    return value


def parse_review(body: bytes, route: Route) -> dict[str, Any]:
    """The `request` member of an AdmissionReview v1 that matches `route`, else InvalidReview."""
    document = decode_document(body)
    if document.get("apiVersion") != REVIEW_API_VERSION or document.get("kind") != (
        "AdmissionReview"
    ):
        raise InvalidReview("not an admission.k8s.io/v1 AdmissionReview")
    review = document.get("request")
    if not isinstance(review, dict):
        raise InvalidReview("request missing")
    _check_shape(review)
    _check_route(review, route)
    return review


def decode_document(body: bytes) -> dict[str, Any]:
    """A JSON object within MAX_VALUES values and MAX_DEPTH levels, else InvalidReview
    (also the conversion webhook's parsing)."""
    if _values(body) > MAX_VALUES:
        raise InvalidReview(f"more than {MAX_VALUES} JSON values")
    try:
        document = json.loads(
            body.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float
        )
    except InvalidReview:
        raise
    except (ValueError, RecursionError) as error:  # JSON, UTF-8, integer digit limit
        raise InvalidReview(f"not JSON: {str(error)[:200]}") from None
    if not isinstance(document, dict):
        raise InvalidReview("not an object")
    _check_depth(document)
    return document


# A JSON string (escapes included), as an unrolled loop: linear, no backtracking.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def _values(body: bytes) -> int:
    """How many JSON values `body` holds at most, at C speed before decoding: every value but
    the document's own follows a ',' or opens its container. Separators inside strings are
    taken off (counted in place, nothing copied) when the first count, which includes them,
    is over the limit."""
    count = _separators(body, 0, len(body)) + 1
    if count > MAX_VALUES:
        for string in _STRING.finditer(body):
            count -= _separators(body, *string.span())
    return count


def _separators(body: bytes, start: int, end: int) -> int:
    return (
        body.count(b",", start, end) + body.count(b"{", start, end) + body.count(b"[", start, end)
    )


def _check_depth(document: Any) -> None:
    """InvalidReview when containers nest deeper than MAX_DEPTH (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        for child in value.values() if type(value) is dict else value:
            if type(child) is dict or type(child) is list:
                if depth >= MAX_DEPTH:
                    raise InvalidReview(f"JSON nested deeper than {MAX_DEPTH} levels")
                stack.append((child, depth + 1))


_STRINGS = ("name", "namespace", "subResource")
_OBJECTS = ("object", "oldObject", "options")


def _check_shape(review: dict[str, Any]) -> None:
    uid = review.get("uid")
    if not isinstance(uid, str) or not uid:
        raise InvalidReview("request.uid must be a non-empty string")
    _check_strings(review.get("kind"), ("group", "version", "kind"), "request.kind")
    _check_strings(review.get("resource"), ("group", "version", "resource"), "request.resource")
    for key in ("requestKind", "requestResource"):
        if review.get(key) is not None and not isinstance(review[key], dict):
            raise InvalidReview(f"request.{key} must be an object")
    if review.get("operation") not in ("CREATE", "UPDATE", "DELETE"):
        raise InvalidReview("request.operation must be CREATE, UPDATE or DELETE")
    for key in _STRINGS:
        if not isinstance(review.get(key, ""), str):
            raise InvalidReview(f"request.{key} must be a string")
    for key in _OBJECTS:
        if review.get(key) is not None and not isinstance(review[key], dict):
            raise InvalidReview(f"request.{key} must be an object or null")
    if not isinstance(review.get("dryRun", False), bool):
        raise InvalidReview("request.dryRun must be a boolean")
    _check_user(review.get("userInfo"))


def _check_strings(value: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(value, dict) or not all(isinstance(value.get(key), str) for key in keys):
        raise InvalidReview(f"{where} must have string {', '.join(keys)}")


def _check_user(user: Any) -> None:
    if user is None:
        return
    if not isinstance(user, dict):
        raise InvalidReview("request.userInfo must be an object")
    if not all(isinstance(user.get(key, ""), str) for key in ("username", "uid")):
        raise InvalidReview("request.userInfo username/uid must be strings")
    groups = user.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise InvalidReview("request.userInfo.groups must be a list of strings")
    extra = user.get("extra") or {}
    if not isinstance(extra, dict) or not all(
        isinstance(values, list) and all(isinstance(value, str) for value in values)
        for values in extra.values()
    ):
        raise InvalidReview("request.userInfo.extra must map to lists of strings")


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _check_route(review: dict[str, Any], route: Route) -> None:
    kind = review["kind"]
    if (kind["group"], kind["version"], kind["kind"]) != route.model_gvk:
        raise InvalidReview("request.kind does not match the route model")
    resource = review["resource"]
    group, version, _ = route.target_gvk
    if (resource["group"], resource["version"], resource["resource"]) != (
        group,
        version,
        route.resource,
    ):
        raise InvalidReview("request.resource does not match the route")
    operation = review["operation"]
    if operation not in route.operations:
        raise InvalidReview(f"operation {operation} is not registered for this route")
    if review.get("subResource", "") != route.subresource:
        raise InvalidReview("request.subResource does not match the route")
    namespace = review.get("namespace", "")
    # Since Kubernetes 1.20 a Namespace's own name is sent as request.namespace.
    own_name = route.target_gvk[:2] == ("", "v1") and route.resource == "namespaces"
    cluster_namespace_ok = not namespace or (own_name and namespace == review.get("name"))
    if (route.scope == "Namespaced" and not namespace) or (
        route.scope == "Cluster" and not cluster_namespace_ok
    ):
        raise InvalidReview("request.namespace does not fit the route scope")
    new, old = review.get("object"), review.get("oldObject")
    expected = {"CREATE": (True, False), "UPDATE": (True, True), "DELETE": (False, True)}
    if (new is not None, old is not None) != expected[operation]:
        raise InvalidReview(f"{operation} has the wrong object/oldObject combination")
    model_group, model_version, model_kind = route.model_gvk
    for item in (new, old):
        if item is not None and (
            item.get("apiVersion") != _api_version(model_group, model_version)
            or item.get("kind") != model_kind
        ):
            raise InvalidReview("object apiVersion/kind do not match the route model")
