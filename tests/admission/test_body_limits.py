"""Issue 18, finding 3: bodies over the limit are refused before they are read.

A declared Content-Length over the limit is answered 413 as soon as the headers are in; a
chunked body is counted as it arrives; nothing is ever spooled to a temporary file (waitress
would spool a body over its inbuf_overflow); health and metrics paths take no body.
"""

from __future__ import annotations

import http.client
import json
import ssl
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.admission._internal.request import AdmissionRequest
from cloudcoil_sync.admission._internal.routes import DEFAULT_MAX_BODY_BYTES, AdmissionRoutes
from cloudcoil_sync.admission._internal.server import NO_BODY_PATHS, WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

from .conftest import raw_connect
from .reviews import review

Factory = Callable[..., WebhookHost]
PROMPT = 1.0
MiB = 1024 * 1024


@pytest.fixture
def spooled(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every temporary file created (waitress creates its spool files with this)."""
    created: list[Any] = []
    original = tempfile.TemporaryFile

    def counting(*args: Any, **kwargs: Any) -> Any:
        created.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", counting)
    return created


@pytest.fixture
def admission(host_factory: Factory) -> WebhookHost:
    table = AdmissionRoutes()

    @table.validating(ConfigMap, path="/validate/cm")
    def allow(request: AdmissionRequest[ConfigMap]) -> None:
        return None

    webhook = AdmissionWebhook(table)
    return host_factory(webhook, max_request_body_size=webhook.max_body_bytes)


def tls(host: WebhookHost, context: ssl.SSLContext) -> ssl.SSLSocket:
    return context.wrap_socket(raw_connect(host), server_hostname="127.0.0.1")


def status_line(sock: ssl.SSLSocket) -> bytes:
    sock.settimeout(5)
    return sock.recv(65536).split(b"\r\n", 1)[0]


def post_review(host: WebhookHost, context: ssl.SSLContext, body: bytes) -> int:
    address, port = host.address
    connection = http.client.HTTPSConnection(address, port, context=context, timeout=10)
    try:
        headers = {"Content-Type": "application/json"}
        connection.request("POST", "/validate/cm", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_declared_length_over_the_limit_is_refused_before_the_body(
    admission: WebhookHost, client_context: ssl.SSLContext, spooled: list[Any]
) -> None:
    with tls(admission, client_context) as sock:
        sock.sendall(
            b"POST /validate/cm HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {15 * MiB}\r\n\r\n{{".encode()
        )  # one byte of the 15 MiB: the answer cannot wait for the rest
        assert status_line(sock) == b"HTTP/1.1 413 Payload Too Large"
    assert spooled == []


def test_uploads_between_the_limit_and_16_mib_leave_no_temporary_files(
    admission: WebhookHost, client_context: ssl.SSLContext, spooled: list[Any]
) -> None:
    # The issue's attack, scaled down: whole 15 MiB uploads, while a normal client posts.
    blob = json.dumps(review()).encode().replace(b'"settings"', b'"' + b"x" * 15 * MiB + b'"', 1)
    good = json.dumps(review()).encode()
    with ThreadPoolExecutor(4) as pool:
        uploads = [pool.submit(post_review, admission, client_context, blob) for _ in range(4)]
        for _ in range(5):
            assert post_review(admission, client_context, good) == 200
        assert [future.result(timeout=30) for future in uploads] == [413] * 4
    assert spooled == []


def test_a_chunked_body_is_counted_as_it_arrives(
    admission: WebhookHost, client_context: ssl.SSLContext, spooled: list[Any]
) -> None:
    chunk = b"x" * 65536
    frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    with tls(admission, client_context) as sock:
        sock.sendall(
            b"POST /validate/cm HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sent = 0
        while sent <= DEFAULT_MAX_BODY_BYTES:  # just over the limit, never the whole body
            sock.sendall(frame)
            sent += len(frame)
        assert status_line(sock) == b"HTTP/1.1 413 Payload Too Large"
    assert spooled == []


def test_a_body_within_the_limit_is_served_from_memory(
    host_factory: Factory, client_context: ssl.SSLContext, spooled: list[Any]
) -> None:
    host = host_factory()  # echo_app, the default 4 MiB limit
    address, port = host.address
    connection = http.client.HTTPSConnection(address, port, context=client_context, timeout=10)
    body = b"y" * (DEFAULT_MAX_BODY_BYTES - 1)
    connection.request("POST", "/echo", body=body)
    response = connection.getresponse()
    assert response.status == 200 and json.loads(response.read())["size"] == len(body)
    connection.close()
    assert spooled == []


@pytest.mark.parametrize("path", sorted(NO_BODY_PATHS))
@pytest.mark.parametrize(
    "framing", [b"Content-Length: 10\r\n", b"Transfer-Encoding: chunked\r\n"], ids=["cl", "chunked"]
)
def test_health_and_metrics_paths_take_no_body(
    host_factory: Factory, client_context: ssl.SSLContext, path: str, framing: bytes
) -> None:
    host = host_factory()
    with tls(host, client_context) as sock:
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + framing + b"\r\n")
        assert status_line(sock) == b"HTTP/1.1 413 Payload Too Large"
    with tls(host, client_context) as sock:  # without a body, answered as before
        sock.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_line(sock) in (b"HTTP/1.1 200 OK", b"HTTP/1.1 503 Service Unavailable")
