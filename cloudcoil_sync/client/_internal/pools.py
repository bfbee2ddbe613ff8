"""Connections: the requests adapter of a client's session, its TLS contexts and pools.

Stock requests builds an SSL context per connection and re-derives the pool of a request
on every call; this adapter builds each context once and remembers the pool of an origin,
which is also the pool the lean send (`lean.py`) writes on.
"""

from __future__ import annotations

import functools
import os
import ssl
import threading
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit

import requests
import requests.adapters
import requests.structures
import requests.utils
from urllib3.util.ssl_ import create_urllib3_context

from cloudcoil_sync.client._internal.connections import POOL_CLASSES

__all__ = ["Adapter", "origin", "pool_host"]


class Adapter(requests.adapters.HTTPAdapter):
    """HTTPAdapter that can verify the server under another name (kubeconfig
    ``tls-server-name``): SNI and hostname check use it instead of the URL's host.

    Requests made with the configured ``verify`` use an SSL context built once per client
    certificate (stock requests stats the CA path and the certificate files on every
    request) and, with no proxy, the connection pool found for their host and certificate
    the first time (stock requests re-derives proxy settings and the pool key on every
    request). Credentials that rotate (exec plugins) arrive as new file paths, so a
    context is never stale; the last few are kept.
    """

    _MAX_CERT_CONTEXTS = 4

    def __init__(self, tls_server_name: str | None, verify: bool | str, **kwargs: Any) -> None:
        self._tls_server_name = tls_server_name
        self._verify = verify
        self._context = _ca_context(verify)
        self._cert_contexts: dict[tuple[str, str], ssl.SSLContext] = {}
        self._contexts_lock = threading.Lock()
        self._pools: dict[tuple[str, str, Any], Any] = {}
        super().__init__(**kwargs)

    def get_connection_with_tls_context(
        self, request: requests.PreparedRequest, verify: Any, proxies: Any = None, cert: Any = None
    ) -> Any:
        if proxies or self._prebuilt(verify, cert) is None:
            return super().get_connection_with_tls_context(request, verify, proxies, cert)
        key = (*origin(request.url or ""), cert)
        pool = self._pools.get(key)
        if pool is None or pool.pool is None:  # first use, or closed (adapter closed)
            pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
            self._pools[key] = pool
        return pool

    def lean_pool(
        self, url: str, verify: Any, cert: Any, site: tuple[str, str] | None = None
    ) -> Any:
        """The pool ``send`` would use for `url` with no proxy, ready as ``send`` leaves it;
        None where stock requests decides (verification off, a combined PEM). `site`: the
        URL's `origin`, if the caller knows it (asked per request: no call to find it)."""
        if self._context is None or verify != self._verify:
            return None  # `_prebuilt`'s first test inline: the common case costs no call
        if cert is not None and self._prebuilt(verify, cert) is None:
            return None
        pool = self._pools.get((*(site or origin(url)), cert))
        if pool is None or pool.pool is None:
            request = requests.PreparedRequest()
            request.url = url
            pool = self.get_connection_with_tls_context(request, verify, None, cert)
            self.cert_verify(pool, url, verify, cert)
        return pool

    def request_url(self, request: requests.PreparedRequest, proxies: Any) -> str:
        if proxies:
            return str(super().request_url(request, proxies))
        path = request.path_url
        return "/" + path.lstrip("/") if path.startswith("//") else path

    def close(self) -> None:
        self._pools.clear()
        super().close()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self._tls_server_name:
            kwargs["server_hostname"] = self._tls_server_name
            kwargs["assert_hostname"] = self._tls_server_name
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = POOL_CLASSES  # writes checked at the socket

    def _prebuilt(self, verify: Any, cert: Any) -> ssl.SSLContext | None:
        """The prebuilt context for these settings, or None where stock requests decides."""
        if self._context is None or verify != self._verify:
            return None
        if cert is None:
            return self._context
        if not isinstance(cert, tuple) or len(cert) != 2:
            return None  # a combined PEM path: rare, left to requests
        context = self._cert_contexts.get(cert)
        if context is None:
            context = self._cert_context(cert)
        return context

    def _cert_context(self, cert: tuple[str, str]) -> ssl.SSLContext:
        with self._contexts_lock:
            context = self._cert_contexts.get(cert)
            if context is not None:
                return context
            context = _ca_context(self._verify)
            assert context is not None
            try:
                context.load_cert_chain(*cert)
            except (OSError, ssl.SSLError) as error:
                raise requests.exceptions.SSLError(
                    f"cannot load the client certificate {cert[0]} and key {cert[1]}: {error}"
                ) from error
            while len(self._cert_contexts) >= self._MAX_CERT_CONTEXTS:
                stale = next(iter(self._cert_contexts))
                del self._cert_contexts[stale]
                for key in [k for k in list(self._pools) if k[2] == stale]:
                    self._pools.pop(key, None)  # urllib3's own LRU closes the pool itself
            self._cert_contexts[cert] = context
            return context

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> Any:  # requests' own return types are private
        context = self._prebuilt(verify, cert)
        if context is None:
            return super().build_connection_pool_key_attributes(request, verify, cert)
        host = pool_host(*origin(request.url or ""))
        return dict(host), {"cert_reqs": "CERT_REQUIRED", "ssl_context": context}

    def build_response(self, req: requests.PreparedRequest, resp: Any) -> requests.Response:
        """As requests builds it, without collecting cookies: the session refuses them all."""
        response = requests.Response()
        response.status_code = resp.status
        response.headers = requests.structures.CaseInsensitiveDict(resp.headers)
        response.encoding = requests.utils.get_encoding_from_headers(response.headers)
        response.raw = resp
        response.reason = resp.reason
        url = req.url or ""
        response.url = url.decode("utf-8") if isinstance(url, bytes) else url
        response.request = req
        response.connection = self
        return response

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        if url.lower().startswith("https") and self._prebuilt(verify, cert) is not None:
            # CA and client certificate are already in the pool's ssl_context.
            conn.cert_reqs = "CERT_REQUIRED"
            return
        # types-requests leaves HTTPAdapter.cert_verify untyped.
        inherited = cast(Callable[[Any, str, Any, Any], None], super().cert_verify)
        inherited(conn, url, verify, cert)


def origin(url: str) -> tuple[str, str]:
    """(scheme, netloc) of an absolute URL, without a full parse per request."""
    scheme, _, rest = url.partition("://")
    return scheme.lower(), rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]


@functools.lru_cache(maxsize=64)
def pool_host(scheme: str, netloc: str) -> tuple[tuple[str, Any], ...]:
    """urllib3's pool key fields for an origin (few per client, so cached)."""
    url = urlsplit(f"{scheme}://{netloc}")
    return (("scheme", scheme), ("host", url.hostname), ("port", url.port))


def _ca_context(verify: bool | str) -> ssl.SSLContext | None:
    """The context urllib3 would build per connection, with the CA loaded once."""
    if verify is False:
        return None
    ca = requests.utils.DEFAULT_CA_BUNDLE_PATH if verify is True else verify
    ctx = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    if os.path.isdir(ca):
        ctx.load_verify_locations(capath=ca)
    else:
        ctx.load_verify_locations(cafile=ca)
    return ctx
