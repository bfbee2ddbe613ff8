"""HealthServer over real HTTP on loopback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import requests
from prometheus_client import CollectorRegistry, Counter
from waiting import wait_until

from cloudcoil_sync.controller._internal.health import HealthServer, HealthServerError


class Probes:
    def __init__(self) -> None:
        self.healthy = True
        self.ready = False

    def health(self) -> bool:
        return self.healthy

    def readiness(self) -> bool:
        return self.ready


@pytest.fixture
def probes() -> Probes:
    return Probes()


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("demo_events", "Demo events", ["kind"], registry=registry).labels(kind="x").inc(3)
    return registry


@pytest.fixture
def server(probes: Probes, registry: CollectorRegistry) -> Iterator[HealthServer]:
    server = HealthServer(port=0)
    server.read_timeout = 0.5
    server.probe(probes.health, probes.readiness, registry).start()
    yield server
    server.stop()


def url(server: HealthServer, path: str) -> str:
    assert server.address is not None
    host, port = server.address
    return f"http://{host}:{port}{path}"


def raw(server: HealthServer, data: bytes, *, timeout: float = 5) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it."""
    assert server.address is not None
    with socket.create_connection(server.address, timeout=timeout) as sock:
        if data:
            sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_defaults_and_validation() -> None:
    server = HealthServer()
    assert (server.host, server.port, server.address) == ("127.0.0.1", 8080, None)
    for port in (-1, 65536, True, "80"):
        with pytest.raises(ValueError, match="port must be an integer between 0 and 65535"):
            HealthServer(port=port)  # type: ignore[arg-type]


def test_port_zero_reports_the_bound_address(server: HealthServer) -> None:
    assert server.address is not None
    host, port = server.address
    assert host == "127.0.0.1" and port > 0


def test_healthz_and_readyz_follow_the_probes(server: HealthServer, probes: Probes) -> None:
    response = requests.get(url(server, "/healthz"), timeout=5)
    assert (response.status_code, response.text) == (200, "ok\n")
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-store"
    response = requests.get(url(server, "/readyz"), timeout=5)
    assert (response.status_code, response.text) == (503, "not ready\n")
    probes.ready = True
    assert requests.get(url(server, "/readyz"), timeout=5).text == "ok\n"
    probes.healthy = False
    response = requests.get(url(server, "/healthz?verbose=1"), timeout=5)
    assert (response.status_code, response.text) == (503, "unhealthy\n")


def test_a_failing_probe_is_unhealthy(probes: Probes) -> None:
    def broken() -> bool:
        raise RuntimeError("probe bug")

    server = HealthServer(port=0)
    server.probe(broken, broken).start()
    try:
        assert requests.get(url(server, "/healthz"), timeout=5).status_code == 503
        assert requests.get(url(server, "/readyz"), timeout=5).status_code == 503
        assert requests.get(url(server, "/metrics"), timeout=5).text == ""
    finally:
        server.stop()


def test_metrics_in_prometheus_text_format(server: HealthServer) -> None:
    response = requests.get(url(server, "/metrics"), timeout=5)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE demo_events_total counter\n" in response.text
    assert 'demo_events_total{kind="x"} 3.0\n' in response.text


def test_large_metrics_answers_are_sent_whole(probes: Probes) -> None:
    registry = CollectorRegistry()
    counter = Counter("wide", "Many series", ["n"], registry=registry)
    for n in range(5000):
        counter.labels(n=str(n)).inc()
    server = HealthServer(port=0)
    server.probe(probes.health, probes.readiness, registry).start()
    try:
        text = requests.get(url(server, "/metrics"), timeout=5).text
        assert len(text) > 200_000 and 'wide_total{n="4999"} 1.0' in text
    finally:
        server.stop()


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_only_get_and_head(server: HealthServer, method: str) -> None:
    response = requests.request(method, url(server, "/healthz"), timeout=5)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET, HEAD"


def test_head_answers_headers_without_a_body(server: HealthServer) -> None:
    response = requests.head(url(server, "/healthz"), timeout=5)
    assert (response.status_code, response.content) == (200, b"")
    assert response.headers["Content-Length"] == "3"  # the length a GET would have


def test_unknown_path(server: HealthServer) -> None:
    response = requests.get(url(server, "/nowhere"), timeout=5)
    assert (response.status_code, response.text) == (404, "not found\n")


def test_controllers_readyz_is_its_own_probe(probes: Probes) -> None:
    leading = {"now": False}
    server = HealthServer(port=0)
    server.probe(probes.health, lambda: True, controllers_ready=lambda: leading["now"]).start()
    try:
        assert requests.get(url(server, "/readyz"), timeout=5).status_code == 200
        assert requests.get(url(server, "/controllers/readyz"), timeout=5).status_code == 503
        leading["now"] = True
        assert requests.get(url(server, "/controllers/readyz"), timeout=5).status_code == 200
    finally:
        server.stop()


@pytest.mark.parametrize("request_line", [b"GARBAGE\r\n\r\n", b"GET\r\n\r\n"])
def test_malformed_request(server: HealthServer, request_line: bytes) -> None:
    assert raw(server, request_line).startswith(b"HTTP/1.0 400 Bad Request\r\n")


def test_headers_over_8_kib_are_refused(server: HealthServer) -> None:
    start = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
    endless = start + b"a" * (8192 - len(start))  # never ends, all of it read: no reset
    assert raw(server, endless).startswith(b"HTTP/1.0 431 Request Header Fields Too Large\r\n")
    just_fits = b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 8000 + b"\r\n\r\n"
    assert requests_raw_status(server, just_fits) == b"HTTP/1.1 200 OK"


def test_a_body_is_refused(server: HealthServer) -> None:
    assert requests.get(url(server, "/healthz"), data=b"x", timeout=5).status_code == 413


def requests_raw_status(server: HealthServer, data: bytes) -> bytes:
    assert server.address is not None
    with socket.create_connection(server.address, timeout=5) as sock:
        sock.sendall(data)
        return sock.recv(65536).split(b"\r\n", 1)[0]


def test_a_slow_client_is_closed_and_does_not_block_others(server: HealthServer) -> None:
    # waitress has no 408: a client silent for read_timeout (whole seconds) is closed.
    assert server.address is not None
    with socket.create_connection(server.address, timeout=10) as idle:
        idle.sendall(b"GET /healthz HTTP/1.1\r\n")  # never finishes
        for _ in range(5):  # meanwhile everybody else is served at once
            assert requests.get(url(server, "/healthz"), timeout=1).status_code == 200
        assert _recv_or_reset(idle) == b""


def _recv_or_reset(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def test_connections_beyond_the_limit_wait_for_a_free_one(probes: Probes) -> None:
    server = HealthServer(port=0)
    server.max_connections = 3
    server.probe(probes.health, probes.readiness).start()
    assert server.address is not None
    try:
        idle = [socket.create_connection(server.address, timeout=5) for _ in range(3)]
        assert wait_until(lambda: len(server._map) == 5)  # listener, trigger and the three
        waiting = socket.create_connection(server.address, timeout=5)
        waiting.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        waiting.settimeout(0.3)
        with pytest.raises(TimeoutError):
            waiting.recv(100)  # in the backlog: waitress stops accepting at its limit
        for sock in idle:
            sock.close()
        waiting.settimeout(5)
        assert waiting.recv(65536).startswith(b"HTTP/1.1 200 OK")  # then served
        waiting.close()
    finally:
        server.stop()


def _answer(server: HealthServer, data: bytes) -> bytes:
    try:
        return raw(server, data)
    except ConnectionResetError:
        return b""


def test_bind_failure_names_the_address(probes: Probes) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        server = HealthServer(port=port)
        with pytest.raises(HealthServerError, match=f"cannot listen on 127.0.0.1:{port}"):
            server.probe(probes.health, probes.readiness).start()


def test_stop_joins_and_closes(probes: Probes) -> None:
    server = HealthServer(port=0)
    server.probe(probes.health, probes.readiness).start()
    address = server.address
    assert address is not None
    before = set(threading.enumerate())
    assert f"cloudcoil-health-{address[1]}" in {thread.name for thread in before}
    kept = socket.create_connection(address, timeout=5)  # an open connection, idle
    assert requests.get(f"http://{address[0]}:{address[1]}/healthz", timeout=5).ok
    server.stop(timeout=5)
    kept.close()
    assert server.address is None
    # The loop thread and waitress's task threads are all joined.
    assert not [t for t in threading.enumerate() if t not in before or "health" in t.name]
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=1).close()
    with pytest.raises(RuntimeError, match="only run once"):
        server.probe(probes.health, probes.readiness).start()
