"""HTTP transport: one pooled ``requests.Session``, auth, rate limit, retries, timeouts.

``trust_env`` is off so the configured CA wins over ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE``;
proxies are passed explicitly (kubeconfig ``proxy-url``, else ``HTTPS_PROXY``/``NO_PROXY``).
"""

from __future__ import annotations

import functools
import http.cookiejar
import json
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast
from urllib.parse import urlencode, urlsplit

import requests
import requests.adapters
import requests.cookies
import requests.hooks
import requests.structures
import requests.utils
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ReadTimeoutError
from urllib3.util.ssl_ import create_urllib3_context

from cloudcoil_sync._compat.requests import set_cookie_jar
from cloudcoil_sync._compat.urllib3 import connection_pools
from cloudcoil_sync._internal import tracing
from cloudcoil_sync.client._internal import codec, gate
from cloudcoil_sync.client._internal.auth import Auth
from cloudcoil_sync.client._internal.errors import APITimeout, TransportError, api_error
from cloudcoil_sync.client._internal.ratelimit import TokenBucket
from cloudcoil_sync.client._internal.retry import IDEMPOTENT_METHODS, RetryPolicy

__all__ = ["USER_AGENT", "Transport", "map_transport_error"]

USER_AGENT = "cloudcoil-sync/0.1"
_JSON = "application/json"


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


def _not_sent(exc: Exception) -> bool:
    """True if the request certainly never reached the server (safe to retry any method)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    inner = exc.args[0] if exc.args else None
    return isinstance(getattr(inner, "reason", None), NewConnectionError | ConnectTimeoutError)


class _Adapter(requests.adapters.HTTPAdapter):
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
        key = (*_origin(request.url or ""), cert)
        pool = self._pools.get(key)
        if pool is None or pool.pool is None:  # first use, or closed (adapter closed)
            pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
            self._pools[key] = pool
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
        host = _pool_host(*_origin(request.url or ""))
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


def _origin(url: str) -> tuple[str, str]:
    """(scheme, netloc) of an absolute URL, without a full parse per request."""
    scheme, _, rest = url.partition("://")
    return scheme.lower(), rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]


@functools.lru_cache(maxsize=64)
def _pool_host(scheme: str, netloc: str) -> tuple[tuple[str, Any], ...]:
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


class _Call(NamedTuple):
    """One request's options, as `Transport.request` took them."""

    params: Mapping[str, Any] | None
    body: Any
    content_type: str | None
    stream: bool
    read_timeout: float | None
    connect_timeout: float | None
    retries: int | None
    accept: str | None


class Transport:
    """Sends requests to one API server; thread-safe."""

    def __init__(
        self,
        server: str,
        *,
        auth: Auth,
        verify: bool | str = True,
        cert: tuple[str, str] | None = None,
        proxies: Mapping[str, str] | None = None,
        qps: float = 1000.0,
        burst: int = 2000,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        pool_maxsize: int = 64,
        tls_server_name: str | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self.auth = auth
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry or RetryPolicy()
        self.limiter = TokenBucket(qps, burst)
        self._cert = cert
        self._closed = threading.Event()
        session = requests.Session()
        session.trust_env = False
        session.verify = verify
        session.cert = cert
        session.proxies = dict(proxies or {})
        session.headers.update({"User-Agent": USER_AGENT, "Accept": _JSON})
        # The API server sets no cookies we want; refuse them so threads share no jar state.
        session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        adapter = _Adapter(
            tls_server_name, verify, pool_connections=4, pool_maxsize=pool_maxsize, max_retries=0
        )
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        self.session = session
        self._adapter = adapter
        # Session.request's per-call work, done once; URLs with user info take the slow path
        # (requests turns them into basic auth).
        self._base_headers = cast(dict[str, str], dict(session.headers))
        self._fast = not any(requests.utils.get_auth_from_url(self.server))

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        url = self.server + path
        if params:
            query = {k: _param(v) for k, v in params.items() if v is not None}
            if query:
                url += "?" + urlencode(query)
        return url

    @staticmethod
    def _headers(authz: str | None, content_type: str | None, accept: str | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if accept:
            headers["Accept"] = accept
        if authz:
            headers["Authorization"] = authz
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        stream: bool = False,
        read_timeout: float | None = None,
        connect_timeout: float | None = None,
        retries: int | None = None,
        accept: str | None = None,
    ) -> requests.Response:
        """Send with rate limit and retries; return a 2xx/3xx response or raise a typed error.

        ``body``: JSON-encoded unless ``bytes``. ``retries`` overrides ``max_retries`` (e.g. 0
        for lease renewals bound by a deadline); ``connect_timeout`` bounds connect and TLS;
        ``accept`` replaces ``Accept``. A write under a write gate (`fenced`) goes through its
        `write`, which may refuse it (`WriteFenced`, unsent); traced calls are client spans."""
        call = _Call(
            params, body, content_type, stream, read_timeout, connect_timeout, retries, accept
        )
        if tracing.enabled():  # a span per request, under the pass's when one runs
            return tracing.traced(method, path, lambda: self._fenced(method, path, call))
        return self._fenced(method, path, call)

    def _fenced(self, method: str, path: str, call: _Call) -> requests.Response:
        guard = gate.current()  # the write gate installed on this thread, if any
        if guard is None or method in gate.READ_METHODS:
            return self._request(method, path, call)
        with guard.write(method, path) as recheck:
            return self._request(method, path, call, recheck)

    def _request(
        self, method: str, path: str, call: _Call, recheck: gate.Recheck | None = None
    ) -> requests.Response:
        if self._closed.is_set():
            raise TransportError("client is closed", method=method)
        url = self.url(path, call.params)
        body, content_type, stream = call.body, call.content_type, call.stream
        data = body if body is None or isinstance(body, bytes) else _dumps(body)
        if data is not None and content_type is None:
            content_type = _JSON
        timeout = (
            call.connect_timeout or self.connect_timeout,
            call.read_timeout or self.timeout,
        )
        idempotent = method in IDEMPOTENT_METHODS
        limit = self.retry.max_retries if call.retries is None else call.retries
        attempt, reauthed = 0, False
        while True:
            self.limiter.acquire()
            if recheck is not None:  # the gate may have closed while this waited
                recheck()
            authz, cert = self.auth.credentials()
            try:
                resp = self._send(
                    method,
                    url,
                    data,
                    self._headers(authz, content_type, call.accept),
                    timeout,
                    stream,
                    cert,
                )
            except requests.RequestException as exc:
                err = map_transport_error(exc, method, url, self.server)
                if (idempotent or _not_sent(exc)) and attempt < limit:
                    self._backoff(attempt, None, method)
                    attempt += 1
                    continue
                raise err from exc
            code = resp.status_code
            if code < 400:
                return resp
            try:
                content = resp.content
            except requests.RequestException:
                content = b""  # the error body itself broke off: classify by status code
            finally:
                resp.close()
            if code == 401 and not reauthed and self.auth.invalidate():
                reauthed = True
                continue
            err_ = api_error(
                code,
                content,
                method=method,
                url=url,
                retry_after_header=resp.headers.get("Retry-After"),
            )
            if self.retry.should_retry_status(method, code) and attempt < limit:
                self._backoff(attempt, err_.retry_after, method)
                attempt += 1
                continue
            raise err_

    def _send(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: dict[str, str],
        timeout: tuple[float, float],
        stream: bool,
        cert: tuple[str, str] | None,
    ) -> requests.Response:
        """``Session.request`` without merging session settings that never change here (no
        cookies, auth or params, ``trust_env`` off), straight to the URL's adapter
        (``Session.send`` only adds hooks, cookie bookkeeping and redirects: followed here)."""
        session = self.session
        cert = cert or self._cert
        if not self._fast or not url.isascii():
            return session.request(
                method, url, data=data, headers=headers, timeout=timeout, stream=stream, cert=cert
            )
        prep = requests.PreparedRequest()
        prep.method = method.upper()
        prep.url = requests.utils.requote_uri(url)
        merged = requests.structures.CaseInsensitiveDict(self._base_headers)
        merged.update(headers)
        prep.headers = merged
        set_cookie_jar(prep, requests.cookies.RequestsCookieJar())
        prep.body = data
        prep.prepare_content_length(data)
        prep.hooks = requests.hooks.default_hooks()
        options: dict[str, Any] = {
            "timeout": timeout,
            "stream": stream,
            "verify": session.verify,
            "cert": cert if cert is not None else session.cert,
            "proxies": session.proxies,
        }
        resp = session.get_adapter(prep.url or url).send(prep, **options)  # honours mounts
        if resp.is_redirect:
            history = [resp, *session.resolve_redirects(resp, prep, **options)]
            resp = history.pop()
            resp.history = history
        if not stream:
            resp.content  # noqa: B018
        return resp

    def request_json(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`request` and decode the JSON body (``TransportError`` if it is not JSON)."""
        resp = self.request(method, path, **kwargs)
        try:
            return codec.loads(resp.content)
        except ValueError:
            snippet = resp.text[:200]
            raise TransportError(
                f"{method} {resp.url}: server answered {resp.status_code} with a non-JSON body: "
                f"{snippet!r}",
                method=method,
                url=resp.url,
            ) from None

    def _backoff(self, attempt: int, retry_after: float | None, method: str) -> None:
        if self._closed.wait(self.retry.delay(attempt, retry_after)):
            raise TransportError("client closed while waiting to retry", method=method)

    def pool_stats(self) -> dict[str, int]:
        """New connections opened and requests sent, summed over the connection pools."""
        pools = connection_pools(self._adapter.poolmanager)
        return {
            "connections": sum(p.num_connections for p in pools),
            "requests": sum(p.num_requests for p in pools),
        }

    def derived(self, *, qps: float, burst: int, pool_maxsize: int) -> Transport:
        """The same server and credentials with a rate limit and connections of its own."""
        adapter = self._adapter
        return Transport(
            self.server,
            auth=self.auth,
            verify=adapter._verify,
            cert=self._cert,
            proxies=self.session.proxies,
            qps=qps,
            burst=burst,
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
            retry=self.retry,
            pool_maxsize=pool_maxsize,
            tls_server_name=adapter._tls_server_name,
        )

    def close(self) -> None:
        self._closed.set()
        self.session.close()


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _dumps(body: Any) -> bytes:
    try:
        return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as error:
        raise ValueError(
            f"The request body is not valid JSON ({error}): NaN and Infinity have no JSON form"
        ) from None
