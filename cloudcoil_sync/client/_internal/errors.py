"""Typed client errors, parsed from the API server's ``Status`` body.

:func:`api_error` maps an HTTP failure to the most specific class (by ``reason``, then by
status code); bodies that are not a ``Status`` (HTML from a proxy, truncated JSON) still map by
status code. Transport failures (connect, TLS, timeouts, broken streams) are
:class:`TransportError`; bad configuration is :class:`ConfigError`.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

__all__ = [
    "APIError",
    "APITimeout",
    "AlreadyExists",
    "BadRequest",
    "ClientError",
    "ConfigError",
    "Conflict",
    "Expired",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ResourceConflict",
    "ResourceNotFound",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "WatchEventTooLarge",
    "WatchStreamError",
    "api_error",
    "parse_retry_after",
]


class ClientError(Exception):
    """Base class of every error raised by :mod:`cloudcoil_sync.client`."""


class ConfigError(ClientError):
    """The client configuration (kubeconfig, in-cluster files, arguments) is unusable."""


class TransportError(ClientError):
    """The request did not get an HTTP answer (connection refused/reset, TLS, DNS...)."""

    def __init__(self, message: str, *, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.url = url


class APITimeout(TransportError):
    """Connect or read timeout (including a silent watch stream)."""


class WatchStreamError(TransportError):
    """A watch stream broke mid-event or carried a line that is not a watch event."""


class WatchEventTooLarge(WatchStreamError):
    """A watch event line is longer than the client takes: the stream cannot go on from
    there; list again (an informer does) and watch from the list's resourceVersion."""


class APIError(ClientError):
    """The API server answered with an HTTP error."""

    def __init__(
        self,
        status_code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        status: Mapping[str, Any] | None = None,
        *,
        method: str = "",
        url: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.status_code = status_code
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.status: dict[str, Any] = dict(status or {})
        self.method = method
        self.url = url
        self.retry_after = retry_after
        where = f" [{method} {url}]" if method or url else ""
        super().__init__(f"{status_code} {reason}: {message}{where}")

    @property
    def code(self) -> int:
        return self.status_code

    @property
    def kind(self) -> str | None:
        return self.details.get("kind")

    @property
    def name(self) -> str | None:
        return self.details.get("name")

    @property
    def causes(self) -> list[dict[str, Any]]:
        """``details.causes`` (field-level reasons) if the server sent any."""
        return list(self.details.get("causes") or [])


class BadRequest(APIError):
    """400: malformed request (bad patch body, bad selector...)."""


class Unauthorized(APIError):
    """401: the credentials were rejected (expired token, wrong certificate)."""


class Forbidden(APIError):
    """403: authenticated but RBAC (or admission) denies the request."""


class NotFound(APIError):
    """404: the object (or the resource type) does not exist."""


class Conflict(APIError):
    """409: stale resourceVersion, failed precondition or server-side-apply field conflict."""


class AlreadyExists(APIError):
    """409 with reason AlreadyExists: create of an existing name."""


class Expired(APIError):
    """410: the resourceVersion is too old (watch/list must restart from a fresh list)."""


Gone = Expired


class Invalid(APIError):
    """422: validation failed (see :attr:`causes`), including a failed JSON patch ``test``."""


class TooManyRequests(APIError):
    """429: throttled by the server; :attr:`retry_after` is the server's hint in seconds."""


class ServerError(APIError):
    """5xx: the server failed (internal error, timeout, unavailable)."""


# cloudcoil 0.8 names
ResourceNotFound = NotFound
ResourceConflict = Conflict

_BY_REASON: dict[str, type[APIError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Gone": Expired,
    "Expired": Expired,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
    "InternalError": ServerError,
    "ServiceUnavailable": ServerError,
}
_BY_CODE: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Expired,
    422: Invalid,
    429: TooManyRequests,
}
_DEFAULT_REASON: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status_dict(body: bytes | str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if isinstance(body, Mapping):
        data: Any = body
    else:
        try:
            data = json.loads(body or b"")
        except (ValueError, UnicodeDecodeError):
            return None
    if isinstance(data, Mapping) and data.get("kind") == "Status":
        return dict(data)
    return None


def _snippet(body: bytes | str | Mapping[str, Any] | None) -> str:
    if body is None or isinstance(body, Mapping):
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return text[:200] + ("..." if len(text) > 200 else "")


def api_error(
    status_code: int,
    body: bytes | str | Mapping[str, Any] | None,
    *,
    method: str = "",
    url: str = "",
    retry_after_header: str | None = None,
) -> APIError:
    """The typed error for an HTTP failure (or a watch ``ERROR`` event's Status)."""
    status = _status_dict(body)
    if status is not None:
        code = status.get("code")
        if not isinstance(code, int) or code < 400:
            code = status_code
        reason = str(status.get("reason") or _DEFAULT_REASON.get(code, "Unknown"))
        message = str(status.get("message") or reason)
        details = status.get("details")
        details = details if isinstance(details, Mapping) else {}
    else:
        status, code, details = {}, status_code, {}
        reason = _DEFAULT_REASON.get(code, "Unknown")
        text = _snippet(body)
        message = f"non-Status error body: {text}" if text else "empty error body"
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code)
    if cls is None:
        cls = ServerError if code >= 500 else APIError
    retry_after = parse_retry_after(retry_after_header)
    if retry_after is None and isinstance(details.get("retryAfterSeconds"), int | float):
        retry_after = float(details["retryAfterSeconds"])
    return cls(
        code,
        reason,
        message,
        details,
        status,
        method=method,
        url=url,
        retry_after=retry_after,
    )
