"""HTTP transport: one pooled ``requests.Session``, auth, rate limit, retries, timeouts.

``trust_env`` is off so the configured CA wins over ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE``;
proxies are passed explicitly (kubeconfig ``proxy-url``, else ``HTTPS_PROXY``/``NO_PROXY``).
"""

from __future__ import annotations

import http.cookiejar
import json
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple, cast
from urllib.parse import urlencode

import requests
import requests.cookies
import requests.hooks
import requests.models
import requests.structures
import requests.utils

from cloudcoil_sync._compat.requests import set_cookie_jar
from cloudcoil_sync._compat.urllib3 import connection_pools
from cloudcoil_sync._internal import tracing
from cloudcoil_sync.client._internal import codec, gate, lean, wire
from cloudcoil_sync.client._internal.auth import Auth
from cloudcoil_sync.client._internal.errors import TransportError, api_error
from cloudcoil_sync.client._internal.failures import map_transport_error, not_sent
from cloudcoil_sync.client._internal.pools import Adapter, origin
from cloudcoil_sync.client._internal.ratelimit import TokenBucket
from cloudcoil_sync.client._internal.retry import IDEMPOTENT_METHODS, RetryPolicy

__all__ = ["USER_AGENT", "Transport"]

USER_AGENT = "cloudcoil-sync/0.1"
_Reply = requests.Response | lean.Answer
_JSON = "application/json"
#: ``json.dumps(body, separators=(",", ":"), allow_nan=False)`` without building an encoder
#: per call (``encode`` keeps no state between calls: one encoder serves every thread).
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class _Call(NamedTuple):
    """One request's options, as `Transport.request` took them; `lean`: a JSON call that may
    go on urllib3's pool directly (`Transport._send_lean`)."""

    params: Mapping[str, Any] | None = None
    body: Any = None
    content_type: str | None = None
    stream: bool = False
    read_timeout: float | None = None
    connect_timeout: float | None = None
    retries: int | None = None
    accept: str | None = None
    lean: bool = False


def _payload(call: _Call) -> tuple[bytes | None, str | None]:
    """The body as sent (JSON-encoded unless bytes) and its content type (JSON by default)."""
    body = call.body
    if body is None or isinstance(body, bytes):
        data = body
    else:
        try:
            data = _ENCODER.encode(body).encode()
        except ValueError as error:
            raise ValueError(
                f"The request body is not valid JSON ({error}): NaN and Infinity have no JSON form"
            ) from None
    content_type = call.content_type
    return data, _JSON if data is not None and content_type is None else content_type


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
        adapter = Adapter(
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
        self._site = origin(self.server)  # of every URL: it starts so
        self._origin = len("://".join(self._site))

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
        return cast(requests.Response, self._call(method, path, call))

    def _call(self, method: str, path: str, call: _Call, traced: bool = False) -> _Reply:
        """The request under this thread's write gate, if any; a client span when tracing
        (`traced`: already inside its span)."""
        if not traced and tracing.enabled():  # a span per request, under the pass's if any
            return tracing.traced(method, path, lambda: self._call(method, path, call, True))
        guard = gate.current()  # the write gate installed on this thread, if any
        if guard is None or method in gate.READ_METHODS:
            return self._request(method, path, call)
        with guard.write(method, path) as recheck:
            return self._request(method, path, call, recheck)

    def _request(
        self, method: str, path: str, call: _Call, recheck: gate.Recheck | None = None
    ) -> _Reply:
        if self._closed.is_set():
            raise TransportError("client is closed", method=method)
        url = self.url(path, call.params) if call.params else self.server + path
        data, content_type = _payload(call)
        stream = call.stream
        timeout = (
            call.connect_timeout or self.connect_timeout,
            call.read_timeout or self.timeout,
        )
        idempotent = method in IDEMPOTENT_METHODS
        limit = self.retry.max_retries if call.retries is None else call.retries
        attempt, reauthed = 0, False
        send = self._send_lean if call.lean else self._send
        while True:
            # Before each attempt: the rate limiter's wait, then the write gate's check (it
            # may have closed meanwhile, or during a retry's backoff); the credentials to send.
            self.limiter.acquire()
            if recheck is not None:
                recheck()
            authz, cert = self.auth.credentials()
            headers = self._headers(authz, content_type, call.accept)
            try:
                with gate.armed(recheck):  # checked again right before the bytes leave
                    resp = send(method, url, data, headers, timeout, stream, cert)
            except requests.RequestException as exc:
                err = map_transport_error(exc, method, url, self.server)
                if (idempotent or not_sent(exc)) and attempt < limit:
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
        prep = self._prepared(method, url, data, headers)
        options = self._options(timeout, stream, cert)
        resp = session.get_adapter(prep.url or url).send(prep, **options)  # honours mounts
        return self._finished(resp, prep, options)

    def _send_lean(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: dict[str, str],
        timeout: tuple[float, float],
        stream: bool,
        cert: tuple[str, str] | None,
    ) -> _Reply:
        """`_send` on urllib3's pool directly (`lean`) where requests' layers would only pass
        the request through: no proxy, the client's own adapter unreplaced, TLS verified. A
        redirect answer is handed to requests to follow, as `_send` does."""
        session = self.session
        pool, quoted = None, url
        if self._fast and url.isascii() and not session.proxies:
            quoted, path = lean.target(url, self._origin)
            adapter = session.get_adapter(quoted)
            if adapter is self._adapter and lean.stock(adapter):
                cert_ = cert or self._cert
                site = self._site if quoted is url else None  # requoted: found again
                pool = adapter.lean_pool(quoted, session.verify, cert_ or session.cert, site)
        if pool is None:
            return self._send(method, url, data, headers, timeout, stream, cert)
        method = method.upper()
        sent = {**self._base_headers, **headers}
        raw = wire.send(pool, self._adapter.max_retries, method, path, data, sent, timeout, quoted)
        if isinstance(raw, lean.Answer):
            return raw
        if raw.status in requests.models.REDIRECT_STATI and "location" in raw.headers:
            prep = self._prepared(method, url, data, headers)
            options = self._options(timeout, stream, cert or self._cert)
            return self._finished(self._adapter.build_response(prep, raw), prep, options)
        return lean.answer(raw, quoted)

    def _prepared(
        self, method: str, url: str, data: bytes | None, headers: dict[str, str]
    ) -> requests.PreparedRequest:
        """The PreparedRequest ``Session.request`` would build (the session's settings never
        change what it holds here)."""
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
        return prep

    def _options(
        self, timeout: tuple[float, float], stream: bool, cert: tuple[str, str] | None
    ) -> dict[str, Any]:
        session = self.session
        return {
            "timeout": timeout,
            "stream": stream,
            "verify": session.verify,
            "cert": cert if cert is not None else session.cert,
            "proxies": session.proxies,
        }

    def _finished(
        self, resp: requests.Response, prep: requests.PreparedRequest, options: dict[str, Any]
    ) -> requests.Response:
        """Redirects followed as ``Session.send`` follows them; the body read unless streamed."""
        session = self.session
        if resp.is_redirect:
            history = [resp, *session.resolve_redirects(resp, prep, **options)]
            resp = history.pop()
            resp.history = history
        if not options["stream"]:
            resp.content  # noqa: B018
        return resp

    def request_json(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`request` and decode the JSON body (``TransportError`` if it is not JSON)."""
        resp = self._call(method, path, _Call(**kwargs, lean=not kwargs.get("stream")))
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
