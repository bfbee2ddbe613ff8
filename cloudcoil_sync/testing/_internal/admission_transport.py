"""HTTPS calls to admission webhooks: ``clientConfig`` URLs and routed Services, the
``caBundle`` trust, ``timeoutSeconds`` deadlines, kept-alive connections and Go-like failure
messages (see :mod:`cloudcoil_sync.testing._internal.admission`)."""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cloudcoil_sync.testing._internal.admission_review import CallFailed

__all__ = ["DEFAULT_TIMEOUT", "ServiceRoute", "WebhookTransport"]

JSON = dict[str, Any]
DEFAULT_TIMEOUT = 10
_MAX_IDLE = 4  # kept-alive connections per webhook address
_CLOSED = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


@dataclass(frozen=True)
class ServiceRoute:
    """Where calls to a webhook Service go, and the name its certificate is checked for."""

    host: str
    port: int
    server_name: str


class WebhookTransport:
    """POSTs reviews to webhooks; thread-safe, one pool of idle connections per address."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._routes: dict[tuple[str, str], ServiceRoute] = {}
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._idle: dict[tuple[str, int, str, str], list[_Connection]] = {}

    def close(self) -> None:
        """Close the kept-alive connections to webhooks."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for conn in connections:
                conn.close()

    def route_service(
        self, namespace: str, name: str, host: str, port: int, server_name: str | None = None
    ) -> None:
        """Send calls for Service ``namespace/name`` to ``host:port``."""
        route = ServiceRoute(host, int(port), server_name or f"{name}.{namespace}.svc")
        with self._lock:
            self._routes[(namespace, name)] = route

    def unroute_service(self, namespace: str, name: str) -> None:
        with self._lock:
            self._routes.pop((namespace, name), None)

    def post(self, webhook: JSON, review: JSON) -> JSON:
        """The webhook's decoded answer to ``review``; ``CallFailed`` when there is none."""
        client = webhook.get("clientConfig") or {}
        timeout = webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT
        url, host, port, server_name, target = self._target(client, timeout)
        failing = f'failed to call webhook: Post "{url}"'
        if host is None:
            raise CallFailed(f"{failing}: {server_name}")
        try:
            context = self._context(client.get("caBundle"))
        except (ValueError, ssl.SSLError) as exc:
            raise CallFailed(f"{failing}: invalid caBundle: {exc}") from None
        deadline = time.monotonic() + timeout
        body = json.dumps(review, separators=(",", ":")).encode()
        key = (host, port, server_name, str(client.get("caBundle") or ""))
        try:
            status, data = self._exchange(key, context, target, body, timeout, deadline)
        except TimeoutError:
            raise CallFailed(f"{failing}: context deadline exceeded") from None
        except ssl.SSLCertVerificationError as exc:
            detail = exc.verify_message or str(exc)
            raise CallFailed(f"{failing}: tls: failed to verify certificate: {detail}") from None
        except ConnectionRefusedError:
            raise CallFailed(
                f"{failing}: dial tcp {host}:{port}: connect: connection refused"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise CallFailed(f"{failing}: {type(exc).__name__}: {exc}") from None
        if status != 200:
            text = data[:512].decode("utf-8", "replace")
            raise CallFailed(f'{failing}: the server responded with status {status} ("{text}")')
        try:
            document: JSON = json.loads(data)
        except ValueError as exc:
            raise CallFailed(f"received invalid webhook response: {exc}") from None
        return document

    def _exchange(
        self,
        key: tuple[str, int, str, str],
        context: ssl.SSLContext,
        target: str,
        body: bytes,
        timeout: float,
        deadline: float,
    ) -> tuple[int, bytes]:
        """POST on a kept-alive connection (one fresh retry if the server had closed it)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        while True:
            with self._lock:
                idle = self._idle.get(key)
                conn = idle.pop() if idle else None
            reused = conn is not None
            if conn is None:
                conn = _Connection(key[0], key[1], key[2], context, timeout)
            try:
                if not reused:
                    conn.connect()
                _remaining(conn, deadline)
                conn.request("POST", target, body, headers)
                answer = conn.getresponse()
                data = answer.read()
            except _CLOSED:
                conn.close()
                if reused:
                    continue  # closed while idle: the request never reached a handler
                raise
            except BaseException:
                conn.close()
                raise
            if answer.will_close:
                conn.close()
            else:
                with self._lock:
                    pool = self._idle.setdefault(key, [])
                    if len(pool) < _MAX_IDLE:
                        pool.append(conn)
                        conn = None
                if conn is not None:
                    conn.close()
            return answer.status, data

    def _target(self, client: JSON, timeout: int) -> tuple[str, str | None, int, str, str]:
        """(shown URL, host, port, TLS server name, request target); host None: no route."""
        query = f"?timeout={timeout}s"
        if client.get("url"):
            parts = urlsplit(str(client["url"]))
            target = (parts.path or "/") + query
            hostname = parts.hostname or ""
            return str(client["url"]) + query, hostname, parts.port or 443, hostname, target
        service = client.get("service") or {}
        namespace, name = service.get("namespace", ""), service.get("name", "")
        port = int(service.get("port") or 443)
        path = service.get("path") or "/"
        url = f"https://{name}.{namespace}.svc:{port}{path}{query}"
        with self._lock:
            route = self._routes.get((namespace, name))
        if route is None:
            why = (
                f"service {namespace}/{name} has no route in the emulator (Emulator.route_service)"
            )
            return url, None, port, why, path + query
        return url, route.host, route.port, route.server_name, path + query

    def _context(self, bundle: Any) -> ssl.SSLContext:
        key = str(bundle or "")
        with self._lock:
            context = self._contexts.get(key)
        if context is not None:
            return context
        if key:
            try:
                pem = base64.b64decode(key, validate=True).decode("ascii")
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise ValueError(f"not base64-encoded PEM ({exc})") from None
            context = ssl.create_default_context(cadata=pem)
        else:
            context = ssl.create_default_context()  # the system roots, as kube-apiserver
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with self._lock:
            self._contexts[key] = context
        return context


class _Connection(http.client.HTTPSConnection):
    """HTTPS to ``host:port`` whose certificate is verified for ``server_name``."""

    def __init__(
        self, host: str, port: int, server_name: str, context: ssl.SSLContext, timeout: float
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = self._tls.wrap_socket(raw, server_hostname=self._server_name)
        except BaseException:
            raw.close()
            raise


def _remaining(conn: _Connection, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    if conn.sock is not None:
        conn.sock.settimeout(left)
