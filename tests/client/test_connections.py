"""The pools' connections: a request's header block and body leave in one write to the TLS
socket on a connection already open, and every body shape still arrives whole."""

from __future__ import annotations

import json
import ssl
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator


def counted_sends(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every payload a client TLS socket's `sendall` is handed, in order (the in-process
    emulator's answers are left out)."""
    sent: list[bytes] = []
    original = ssl.SSLSocket.sendall

    def sendall(self: ssl.SSLSocket, data: Any, flags: int = 0) -> None:
        if not self.server_side:
            sent.append(bytes(data))
        original(self, data, flags)

    monkeypatch.setattr(ssl.SSLSocket, "sendall", sendall)
    return sent


def test_a_write_leaves_in_one_socket_write(
    kube_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "one-write"}})  # the connection is open from here on
    sent = counted_sends(monkeypatch)
    api.merge_patch("one-write", {"data": {"k": "v"}})
    [request] = sent  # headers and body together (http.client sends them apart)
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"PATCH /api/v1/namespaces/default/configmaps/one-write HTTP/1.1")
    assert json.loads(body) == {"data": {"k": "v"}}
    sent.clear()
    assert api.get("one-write")["data"] == {"k": "v"}  # a request without a body
    [request] = sent
    assert request.startswith(b"GET ") and request.endswith(b"\r\n\r\n")


def test_a_body_that_is_not_bytes_still_follows_its_headers(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    transport = kube_config.transport
    kube_config.client(ConfigMap).raw.list()  # an open connection in the pool
    pool = transport._adapter.lean_pool(transport.url("/"), transport.session.verify, None)
    body = bytearray(json.dumps({"metadata": {"name": "from-bytearray"}}).encode())
    answer = pool.urlopen(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        body=body,  # sent as a memoryview, not bytes: the header block goes first on its own
        headers={
            **transport._base_headers,
            **transport._headers(transport.auth.credentials()[0], "application/json", None),
        },
        retries=False,
    )
    assert answer.status == 201, answer.data
    assert kube_emulator.get_object("", "configmaps", "default", "from-bytearray") is not None


def test_header_values_are_still_checked_and_urllib3_markers_still_honoured() -> None:
    """The connections hand a plain header straight to http.client, which refuses an
    injected line; urllib3's SKIP_HEADER marker still goes through urllib3's own check."""
    from urllib3.connection import HTTPConnection
    from urllib3.util import SKIP_HEADER

    from cloudcoil_sync.client._internal.connections import POOL_CLASSES

    cls = POOL_CLASSES["http"].ConnectionCls
    assert issubclass(cls, HTTPConnection)
    conn = cls("127.0.0.1", 1)
    conn.putrequest("GET", "/", skip_host=True, skip_accept_encoding=True)
    with pytest.raises(ValueError, match="Invalid header value"):
        conn.putheader("X-Injected", "a\r\nAuthorization: stolen")
    with pytest.raises(ValueError, match="Invalid header name"):
        conn.putheader("Bad:Name", "v")
    conn.putheader("User-Agent", SKIP_HEADER)  # skipped: nothing is buffered for it
    with pytest.raises(ValueError, match="SKIP_HEADER only supports"):
        conn.putheader("X-Other", SKIP_HEADER)
    conn.putheader("Accept", "application/json")
    buffered: list[bytes] = getattr(conn, "_buffer")  # noqa: B009 (http.client's, private)
    assert buffered[-1] == b"Accept: application/json"
    assert not any(line.startswith(b"User-Agent") for line in buffered)
    conn.close()
