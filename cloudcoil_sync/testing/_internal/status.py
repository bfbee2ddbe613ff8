"""``Status`` bodies and the exception that carries one to the HTTP layer."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "invalid",
    "method_not_allowed",
    "not_found",
    "status_body",
    "success",
    "unauthorized",
]

JSON = dict[str, Any]


def status_body(code: int, reason: str, message: str, details: JSON | None = None) -> JSON:
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:  # an internal error (500) carries none
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """An API failure answered with a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: JSON | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.warnings: list[str] = []  # Warning headers of the answer

    def body(self) -> JSON:
        return status_body(self.code, self.reason, self.message, self.details)


def _details(name: str | None, group: str, kind: str) -> JSON:
    details: JSON = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(plural, group)} "{name}" not found',
        _details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        _details(name, group, plural),
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """``causes`` are (reason, field, message) triples, as kube-apiserver reports them; its
    message lists them as Go's aggregate error does (bracketed when several, no repeats)."""
    texts = list(dict.fromkeys(f"{field}: {message}" for _, field, message in causes))
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = _details(name, group, kind)
    details["causes"] = [{"reason": r, "message": m, "field": f} for r, f, m in causes]
    qualified = f"{kind}.{group}" if group else kind  # Go's GroupKind.String()
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, {})


def forbidden(
    user: str, verb: str, plural: str, group: str, name: str, namespace: str, sub: str
) -> ApiError:
    resource = f"{plural}/{sub}" if sub else plural
    subject = f'{_qualified(plural, group)} "{name}"' if name else _qualified(plural, group)
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{group}"{where}'
    )
    return ApiError(403, "Forbidden", message, _details(name, group, plural))


def unauthorized() -> ApiError:
    err = ApiError(401, "Unauthorized", "Unauthorized")
    return err


def expired(requested: str, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def success(plural: str, group: str, name: str, uid: str) -> JSON:
    details = _details(name, group, plural)
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
