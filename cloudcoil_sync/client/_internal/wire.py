"""The wire send: a request on a kept-alive connection of urllib3's pool, without urlopen.

On a connection already open, urllib3's ``urlopen`` and http.client's request building
(timeouts cloned, headers put one at a time, a urllib3 response around http.client's) cost
about 130 Python calls per request: a fifth of this process's CPU per reconciled object.
`send` writes the bytes they would write and reads the answer with the connections' own
response class, raising what urllib3 raises where it would raise it. It takes only a
request it sends exactly as urllib3 would: on a kept-alive connection of a pool without a
proxy, a bytes body with its Content-Length (or none), plain header names and values,
User-Agent and Accept-Encoding given. Any other goes to ``urlopen`` unsent, as does a
request when no kept-alive connection is free. The pool's connections, the write gate
(checked right before the bytes leave), the pool's request count, urllib3's retry object
and its request log keep their roles.
"""

from __future__ import annotations

import errno
import functools
import io
import logging
import re
import sys
from http.client import HTTPException
from socket import timeout as SocketTimeout
from ssl import SSLError as BaseSSLError
from typing import Any

import requests.models
from urllib3 import HTTPConnectionPool, HTTPHeaderDict, HTTPResponse
from urllib3.exceptions import (
    HeaderParsingError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util import Retry
from urllib3.util.response import assert_header_parsing

from cloudcoil_sync._compat.urllib3 import kept_alive, put_back
from cloudcoil_sync.client._internal import gate, lean
from cloudcoil_sync.client._internal.failures import URLOPEN_ERRORS, adapter_error, body_error
from cloudcoil_sync.client._internal.response_head import LeanMessage, LeanResponse

__all__ = ["send"]

_log = logging.getLogger("urllib3.connectionpool")  # where urllib3 logs what it sends

#: A header name of token characters; a value of visible latin-1 text, spaces and tabs;
#: a method of letters; a request target of visible ASCII: what http.client's checks
#: accept and its encodings write unchanged.
_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\t\x20-\x7e\xa0-\xff]*")
_METHOD = re.compile(r"[A-Z]+")
_TARGET = re.compile(r"/[!-~]*")
_BLOCKING = frozenset({errno.EAGAIN, errno.EWOULDBLOCK})  # urllib3's `_blocking_errnos`
_REQUIRED = 2  # User-Agent and Accept-Encoding: else urllib3 or http.client adds its own


def send(
    pool: HTTPConnectionPool,
    retries: Retry,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: tuple[float, float],
    url: str,
) -> lean.Answer | HTTPResponse:
    """`lean.urlopen` and `lean.answer` in one: an `Answer`, or urllib3's response for the
    transport to finish (a redirect, an encoded body, a request `urlopen` sent)."""
    chunked = lean.content_length(method, body, headers)
    plain = not chunked and (body is None or body.__class__ is bytes)
    head = _head(method, path, headers) if plain else None
    conn = None if head is None else kept_alive(pool)
    if head is None or conn is None:
        return lean.urlopen(pool, retries, method, path, body, headers, lean.timeout(*timeout))
    data = head.replace(b"\0", _host(conn.host, conn.port, conn.default_port), 1)
    if body:
        data += body
    try:
        response = _exchange(pool, conn, retries, method, path, data, timeout)
    except URLOPEN_ERRORS as exc:
        error = adapter_error(exc)
        if error is exc:
            raise
        raise error from exc
    if isinstance(response, Retry):  # broken before an answer; the retries allow another
        return lean.urlopen(pool, response, method, path, body, headers, lean.timeout(*timeout))
    content = _read(pool, conn, response)
    message = response.msg
    if response.status in requests.models.REDIRECT_STATI or message.get("content-encoding"):
        return _urllib3_response(response, content, method, path)
    return lean.Answer(response.status, message, content, url)


def _head(method: str, path: str, headers: dict[str, str]) -> bytes | None:
    """The request line and header block urllib3 would send (Host as a NUL), or None."""
    if not (_METHOD.fullmatch(method) and _TARGET.fullmatch(path)):
        return None
    lines = [f"{method} {path} HTTP/1.1", "Host: \0"]
    required = 0
    for name, value in headers.items():
        if not (_NAME.fullmatch(name) and _VALUE.fullmatch(value)):
            return None
        lowered = name.lower()
        if lowered in ("user-agent", "accept-encoding"):
            required += 1
        elif lowered in ("host", "transfer-encoding"):
            return None
        lines.append(f"{name}: {value}")
    if required != _REQUIRED:
        return None
    lines += ("", "")
    return "\r\n".join(lines).encode("latin-1")


@functools.lru_cache(maxsize=64)
def _host(host: str, port: int | None, default_port: int) -> bytes:
    """The Host value http.client's ``putrequest`` writes for a connection."""
    encoded = host.encode("ascii") if host.isascii() else host.encode("idna")
    if b":" in encoded:
        encoded = b"[" + encoded + b"]"
    if port == default_port:
        return encoded
    return encoded + b":" + str(port).encode("ascii")


def _exchange(
    pool: HTTPConnectionPool,
    conn: Any,
    retries: Retry,
    method: str,
    path: str,
    data: bytes,
    timeout: tuple[float, float],
) -> LeanResponse | Retry:
    """Send `data` and read the answer's head as ``_make_request`` does; failures as
    ``urlopen`` raises them (or the retries left, if urllib3's allow another attempt)."""
    pool.num_requests += 1
    sock = conn.sock
    response = LeanResponse(sock, method=method)  # http.client's file over the socket
    try:
        sock.settimeout(timeout[0])  # urllib3 sends with the connect timeout
        try:
            gate.check_armed()
            sock.sendall(data)
        except BrokenPipeError:
            pass  # the server may have answered before it closed: read that
        except OSError as error:
            if error.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                raise
        sock.settimeout(timeout[1])
        try:
            response.begin()
        except (BaseSSLError, OSError) as error:
            _raise_timeout(pool, error, path, timeout[1])
            raise
    except (Urllib3Timeout, HTTPException, OSError, ProtocolError, SSLError) as error:
        _drop(pool, conn, response)
        return _retry(pool, retries, method, path, error)
    except BaseException:  # a write refused by the gate, an interrupt: nothing half-read kept
        _drop(pool, conn, response)
        raise
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(
            '%s://%s:%s "%s %s %s" %s %s', pool.scheme, pool.host, pool.port, method, path,
            "HTTP/1.1", response.status, response.length,
        )  # fmt: skip
    if not isinstance(response.msg, LeanMessage):  # http.client's parser read it: check it
        try:
            assert_header_parsing(response.msg)
        except (HeaderParsingError, TypeError) as error:
            _log.warning("Failed to parse headers (url=%s): %s", path, error, exc_info=True)
    return response


def _drop(pool: HTTPConnectionPool, conn: Any, response: LeanResponse) -> None:
    """As urlopen after a broken attempt: the connection closed, its slot back in the pool."""
    response.close()
    conn.close()
    put_back(pool, None)


def _raise_timeout(pool: HTTPConnectionPool, error: Exception, path: str, read: float) -> None:
    """urllib3's ``_raise_timeout``: a read that timed out is a `ReadTimeoutError`."""
    if isinstance(error, SocketTimeout) or getattr(error, "errno", None) in _BLOCKING:
        raise ReadTimeoutError(pool, path, f"Read timed out. (read timeout={read})") from error


def _retry(
    pool: HTTPConnectionPool, retries: Retry, method: str, path: str, error: Exception
) -> Retry:
    """``urlopen``'s handling of a broken attempt: raise unless the retries allow another."""
    new: Exception = error
    if isinstance(error, BaseSSLError):
        new = SSLError(error)
    elif isinstance(error, OSError | HTTPException):
        new = ProtocolError("Connection aborted.", error)
    retries = retries.increment(method, path, error=new, _pool=pool, _stacktrace=sys.exc_info()[2])
    retries.sleep()
    _log.warning("Retrying (%r) after connection broken by '%r': %s", retries, error, path)
    return retries


def _read(pool: HTTPConnectionPool, conn: Any, response: LeanResponse) -> bytes:
    """The whole body, failures as reading ``Response.content`` raises them; the connection
    back in the pool (closed first if the answer said so, or broke off)."""
    try:
        content: bytes = response.read()
    except BaseException as error:
        response.close()
        conn.close()
        put_back(pool, conn)
        mapped = _broken_body(pool, error)
        if mapped is None:
            raise
        raise body_error(mapped) from mapped
    if response.will_close:
        conn.close()
    put_back(pool, conn)
    return content


def _broken_body(pool: HTTPConnectionPool, error: BaseException) -> Exception | None:
    """urllib3's error for a failed read of a body (its ``_error_catcher``), or None."""
    if isinstance(error, SocketTimeout):
        return ReadTimeoutError(pool, None, "Read timed out.")
    if isinstance(error, BaseSSLError):
        return SSLError(error)
    if isinstance(error, HTTPException | OSError):  # IncompleteRead among them
        return ProtocolError(f"Connection broken: {error!r}", error)
    return None


def _urllib3_response(
    response: LeanResponse, content: bytes, method: str, path: str
) -> HTTPResponse:
    """The answer as urllib3's response over its body, for what the transport does with one
    (follow a redirect, decode a body)."""
    return HTTPResponse(
        body=io.BytesIO(content),
        headers=HTTPHeaderDict(response.msg.items()),
        status=response.status,
        version=response.version,
        reason=response.reason,
        preload_content=False,
        decode_content=False,
        enforce_content_length=False,
        request_method=method,
        request_url=path,
    )
