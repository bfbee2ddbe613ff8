"""Requests go through a configured proxy (the transport's pool cache is only for direct use)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config, TransportError


class RefusingProxy:
    """Accepts connections, records each request line, answers 502 and closes."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen = threading.Event()
        self._closing = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(5)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, name="refusing-proxy")
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self._closing.is_set():
                conn.close()
                return
            with conn:
                conn.settimeout(5)
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                self.lines.append(head.split(b"\r\n", 1)[0].decode())
                self.seen.set()
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self._closing.set()
        socket.create_connection(self._sock.getsockname(), timeout=5).close()  # wakes accept()
        self._thread.join(5)
        self._sock.close()


@pytest.fixture
def proxy() -> Iterator[RefusingProxy]:
    server = RefusingProxy()
    yield server
    server.close()


def test_https_requests_tunnel_through_the_proxy(proxy: RefusingProxy) -> None:
    config = Config("https://kube.invalid:6443", token="t", proxy_url=proxy.url, max_retries=0)
    with config, pytest.raises(TransportError):
        config.client(ConfigMap).raw.create({"metadata": {"name": "a"}}, namespace="default")
    assert proxy.seen.wait(5)
    assert proxy.lines[0].startswith("CONNECT kube.invalid:6443 HTTP/1.")


def test_plain_http_requests_name_the_full_url_to_the_proxy(proxy: RefusingProxy) -> None:
    config = Config("http://kube.invalid:8080", token="t", proxy_url=proxy.url, max_retries=0)
    with config, pytest.raises(Exception, match="502"):
        config.client(ConfigMap).raw.get("a", namespace="default")
    assert proxy.lines[0] == (
        "GET http://kube.invalid:8080/api/v1/namespaces/default/configmaps/a HTTP/1.1"
    )
