from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.server import WebhookHost

from .certs import CertificateAuthority, ServingPair

LIMITS = {field.name for field in fields(ConnectionLimits)}
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@pytest.fixture(scope="session")
def authority() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture
def serving(authority: CertificateAuthority, tmp_path: Path) -> ServingPair:
    return authority.issue(tmp_path / "tls")


@pytest.fixture
def client_context(authority: CertificateAuthority, tmp_path: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=authority.pem.decode())
    return context


def echo_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Echo the request body; `/block` waits on environ-independent gates set by tests."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    if environ["PATH_INFO"] == "/big":
        size = 16 * 1024 * 1024
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(size))])
        return [b"z" * size]
    if environ["PATH_INFO"] == "/block":
        GATES.entered.set()
        GATES.release.wait(10)
    answer = json.dumps(
        {"path": environ["PATH_INFO"], "scheme": environ["wsgi.url_scheme"], "size": len(body)}
    ).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))]
    )
    return [answer]


class _Gates:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


GATES = _Gates()


@pytest.fixture
def gates() -> Iterator[_Gates]:
    GATES.reset()
    yield GATES
    GATES.release.set()


@pytest.fixture
def host_factory(serving: ServingPair) -> Iterator[Callable[..., WebhookHost]]:
    hosts: list[WebhookHost] = []

    def start(app: WSGIApp = echo_app, **options: Any) -> WebhookHost:
        options.setdefault("reload_interval", 0.0)
        options.setdefault("certfile", str(serving.certfile))
        options.setdefault("keyfile", str(serving.keyfile))
        limits = {name: options.pop(name) for name in LIMITS if name in options}
        if limits:
            cap = limits.get("max_connections", 256)
            limits.setdefault("max_connections_per_client", min(cap, 64))
            options["limits"] = ConnectionLimits(**limits)
        host = WebhookHost(
            app,
            host="127.0.0.1",
            port=0,
            **options,
        )
        host.start()
        hosts.append(host)
        return host

    yield start
    for host in hosts:
        assert host.stop(timeout=5), "webhook host threads did not stop"


def https(
    host: WebhookHost, context: ssl.SSLContext, timeout: float = 5
) -> http.client.HTTPSConnection:
    address, port = host.address
    return http.client.HTTPSConnection(address, port, context=context, timeout=timeout)


def raw_connect(host: WebhookHost, timeout: float = 5) -> socket.socket:
    return socket.create_connection(host.address, timeout=timeout)


def still_open(sock: socket.socket) -> bool:
    """Whether the server has not closed `sock` (nothing to read, no end of stream)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except ConnectionError:
        return False
    finally:
        sock.settimeout(timeout)
