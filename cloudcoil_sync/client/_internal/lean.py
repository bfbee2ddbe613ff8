"""The lean send: a JSON call on urllib3's pool, sent as requests' adapter would send it.

For every request `requests` builds a PreparedRequest, merges headers into a
CaseInsensitiveDict, gives it a cookie jar and hooks, and wraps urllib3's response in a
Response: about a quarter of a small write's CPU in this process (bench/write_path.py).
`urlopen` skips those layers for the calls that need none of them (`Transport.request_json`)
and keeps what they decide: the pool the adapter picks (`Adapter.lean_pool`), the same headers
in the same order, Content-Length and chunking as requests sets them, the adapter's timeout
and retry objects, and urllib3's failures raised as the requests exceptions the adapter
raises (`failures`), so retries and error messages are unchanged. Anything else (a proxy, an
adapter of the user's or a test double, a streamed answer, a redirect) is left to requests.
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Mapping
from http.client import HTTPMessage
from typing import Any
from urllib.parse import urlsplit

import requests
import requests.structures
import requests.utils
from urllib3 import HTTPConnectionPool, HTTPHeaderDict, HTTPResponse
from urllib3.util import Timeout

from cloudcoil_sync.client._internal.failures import (
    URLOPEN_ERRORS,
    adapter_error,
    body_error,
)

__all__ = ["Answer", "content_length", "path_url", "stock", "target", "timeout", "urlopen"]

#: A URL of only the characters requests' ``requote_uri`` keeps as they are, without ``%``
#: (escapes it would re-read) and ``#`` (a fragment): most API paths (names are DNS labels).
_PLAIN = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=]*")


class Answer:
    """What the transport reads of a non-streamed response: status, headers, body, URL."""

    __slots__ = ("_head", "_headers", "content", "status_code", "url")

    def __init__(
        self, status_code: int, headers: Mapping[str, str] | HTTPMessage, content: bytes, url: str
    ):
        self.status_code = status_code
        self._head = headers  # urllib3's HTTPHeaderDict, or the message http.client read
        self._headers: Mapping[str, str] | None = None
        self.content = content
        self.url = url

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive, repeated names joined, as urllib3's (built when first read: the
        transport reads them only of an error answer)."""
        if self._headers is None:
            head = self._head
            self._headers = HTTPHeaderDict(head.items()) if isinstance(head, HTTPMessage) else head
        return self._headers

    def close(self) -> None:
        """Nothing to release: the body was read, which put the connection back."""

    @property
    def text(self) -> str:
        """The body decoded exactly as ``requests.Response.text`` decodes it (error paths only)."""
        response = requests.Response()
        response.status_code = self.status_code
        response.headers = requests.structures.CaseInsensitiveDict(self.headers)
        response.encoding = requests.utils.get_encoding_from_headers(response.headers)
        response.raw = io.BytesIO(self.content)  # read as a plain file: the same bytes
        return response.text


def stock(adapter: requests.adapters.BaseAdapter) -> bool:
    """True unless the adapter's ``send`` was replaced (a subclass's, a test double such as
    `responses`, an attribute of the instance): whoever replaced it sees every request."""
    send = getattr(type(adapter), "send", None)
    return (
        "send" not in vars(adapter)
        and getattr(send, "__qualname__", "") == "HTTPAdapter.send"
        and getattr(send, "__module__", "") == "requests.adapters"
    )


def path_url(url: str) -> str:
    """requests' ``PreparedRequest.path_url`` as the client's adapter sends it (a leading
    ``//`` collapsed, as ``Adapter.request_url`` does)."""
    parts = urlsplit(url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return "/" + path.lstrip("/") if path.startswith("//") else path


def target(url: str, origin: int) -> tuple[str, str]:
    """(``requote_uri(url)``, `path_url` of it) for a URL whose first `origin` characters
    are its ``scheme://netloc``: a plain URL is both as it is, without parsing it again."""
    rest = url[origin:]
    if (
        _PLAIN.fullmatch(url)
        and rest[:1] in ("/", "")
        and not rest.startswith("//")
        and not rest.endswith("?")
    ):
        return url, rest or "/"
    quoted = requests.utils.requote_uri(url)
    return quoted, path_url(quoted)


def content_length(method: str, body: bytes | None, headers: dict[str, str]) -> bool:
    """Set Content-Length as ``PreparedRequest.prepare_content_length`` does; True if the
    adapter would send the body chunked (an empty body, which requests gives no length)."""
    if body is not None:
        if body:
            headers["Content-Length"] = str(len(body))
    elif method not in ("GET", "HEAD") and headers.get("Content-Length") is None:
        headers["Content-Length"] = "0"
    return not (body is None or "Content-Length" in headers)


@functools.lru_cache(maxsize=16)
def timeout(connect: float, read: float) -> Timeout:
    """The adapter's ``TimeoutSauce`` for a (connect, read) pair (few pairs per client)."""
    return Timeout(connect=connect, read=read)


def urlopen(
    pool: HTTPConnectionPool,
    retries: Any,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    limits: Timeout,
) -> HTTPResponse:
    """Send `path` (a `path_url`) on `pool` as ``HTTPAdapter.send`` does; failures as the
    adapter raises them."""
    chunked = content_length(method, body, headers)
    try:
        response = pool.urlopen(
            method=method,
            url=path,
            body=body,
            headers=headers,
            redirect=False,
            assert_same_host=False,
            preload_content=False,
            decode_content=False,
            retries=retries,
            timeout=limits,
            chunked=chunked,
        )
    except URLOPEN_ERRORS as exc:
        error = adapter_error(exc)
        if error is exc:
            raise
        raise error from exc
    assert isinstance(response, HTTPResponse)
    return response


def answer(response: HTTPResponse, url: str) -> Answer:
    """Read the whole body as ``Response.content`` does (decoded, failures as it raises them)."""
    try:
        content = response.read(decode_content=True) or b""
    except URLOPEN_ERRORS as exc:
        error = body_error(exc)
        if error is exc:
            raise
        raise error from exc
    return Answer(response.status, response.headers, content, url)
