"""Transport failures: urllib3's as requests raises them, and those as `TransportError` kinds."""

from __future__ import annotations

import requests
from requests import exceptions
from urllib3 import exceptions as urllib3_exceptions
from urllib3.exceptions import (
    ClosedPoolError,
    ConnectTimeoutError,
    DecodeError,
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    ResponseError,
)

from cloudcoil_sync.client._internal.errors import APITimeout, TransportError

__all__ = ["URLOPEN_ERRORS", "adapter_error", "body_error", "map_transport_error", "not_sent"]


def map_transport_error(exc: Exception, method: str, url: str, server: str) -> TransportError:
    """A :class:`TransportError` naming the server and the cause of a requests exception."""
    inner = exc.args[0] if exc.args else None
    reason = getattr(inner, "reason", inner)
    if isinstance(exc, requests.exceptions.SSLError):
        return TransportError(
            f"TLS error talking to {server}: {reason} (check the certificate authority, "
            "client certificate or insecure-skip-tls-verify)",
            method=method,
            url=url,
        )
    if isinstance(reason, NewConnectionError):  # subclass of ConnectTimeoutError: test first
        return TransportError(f"cannot connect to {server}: {reason}", method=method, url=url)
    if isinstance(exc, requests.exceptions.ConnectTimeout) or isinstance(
        reason, ConnectTimeoutError
    ):
        return APITimeout(f"timed out connecting to {server}", method=method, url=url)
    if isinstance(exc, requests.exceptions.ReadTimeout) or isinstance(reason, ReadTimeoutError):
        return APITimeout(f"{server} did not answer {method} {url} in time", method=method, url=url)
    return TransportError(f"{method} {url} failed: {exc}", method=method, url=url)


def not_sent(exc: Exception) -> bool:
    """True if the request certainly never reached the server (safe to retry any method)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    inner = exc.args[0] if exc.args else None
    return isinstance(getattr(inner, "reason", None), NewConnectionError | ConnectTimeoutError)


def adapter_error(exc: Exception, request: requests.PreparedRequest | None = None) -> Exception:
    """The exception requests' `HTTPAdapter.send` raises for a failure of urllib3's ``urlopen``
    (the same classes, wrapping the same urllib3 error): the lean send raises what the
    adapter would, so `map_transport_error` and the retries see the same thing."""
    if isinstance(exc, ProtocolError | OSError):
        return exceptions.ConnectionError(exc, request=request)
    if isinstance(exc, MaxRetryError):
        reason = exc.reason
        if isinstance(reason, ConnectTimeoutError) and not isinstance(reason, NewConnectionError):
            return exceptions.ConnectTimeout(exc, request=request)
        if isinstance(reason, ResponseError):
            return exceptions.RetryError(exc, request=request)
        if isinstance(reason, urllib3_exceptions.ProxyError):
            return exceptions.ProxyError(exc, request=request)
        if isinstance(reason, urllib3_exceptions.SSLError):
            return exceptions.SSLError(exc, request=request)
        return exceptions.ConnectionError(exc, request=request)
    if isinstance(exc, ClosedPoolError):
        return exceptions.ConnectionError(exc, request=request)
    if isinstance(exc, urllib3_exceptions.ProxyError):
        return exceptions.ProxyError(exc)
    if isinstance(exc, urllib3_exceptions.SSLError):
        return exceptions.SSLError(exc, request=request)
    if isinstance(exc, ReadTimeoutError):
        return exceptions.ReadTimeout(exc, request=request)
    if isinstance(exc, urllib3_exceptions.InvalidHeader):
        return exceptions.InvalidHeader(exc, request=request)
    return exc  # requests lets any other urllib3 error through as it is


def body_error(exc: Exception) -> Exception:
    """The exception reading ``Response.content`` raises for a failure of urllib3's read."""
    if isinstance(exc, ProtocolError):
        return exceptions.ChunkedEncodingError(exc)
    if isinstance(exc, DecodeError):
        return exceptions.ContentDecodingError(exc)
    if isinstance(exc, ReadTimeoutError):
        return exceptions.ConnectionError(exc)
    if isinstance(exc, urllib3_exceptions.SSLError):
        return exceptions.SSLError(exc)
    return exc


#: What urllib3's ``urlopen`` and a body's read raise that `adapter_error`/`body_error` map.
URLOPEN_ERRORS = (OSError, urllib3_exceptions.HTTPError)
