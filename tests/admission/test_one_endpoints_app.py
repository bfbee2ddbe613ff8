"""The health server (plain HTTP) and the webhook host (TLS) serve one operator-endpoints app:
the same request gets the same status, body and headers from either."""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.controller import HealthServer

Answer = tuple[int, bytes, dict[str, str]]
#: The headers an answer is compared on (waitress adds Date and Server on both).
HEADERS = ("Content-Type", "Content-Length", "Cache-Control", "Allow", "Retry-After")
PATHS = ("/healthz", "/readyz", "/controllers/readyz", "/metrics")


class Probes:
    def __init__(self) -> None:
        self.healthy = self.ready = self.leading = True

    def set(self, *, healthy: bool, ready: bool, leading: bool) -> None:
        self.healthy, self.ready, self.leading = healthy, ready, leading


class Hosts:
    """Both hosts, on loopback, over the same checks and registry."""

    def __init__(self, health: HealthServer, webhook: WebhookHost, context: ssl.SSLContext):
        self.health, self.webhook, self.context = health, webhook, context

    def ask(self, method: str, path: str) -> tuple[Answer, Answer]:
        assert self.health.address is not None
        plain = http.client.HTTPConnection(*self.health.address, timeout=10)
        tls = http.client.HTTPSConnection(*self.webhook.address, context=self.context, timeout=10)
        return _exchange(plain, method, path), _exchange(tls, method, path)


def _exchange(connection: http.client.HTTPConnection, method: str, path: str) -> Answer:
    try:
        connection.request(method, path)
        response = connection.getresponse()
        body = response.read()
        headers = {name: response.getheader(name) for name in HEADERS}
        return response.status, body, {k: v for k, v in headers.items() if v is not None}
    finally:
        connection.close()


@pytest.fixture
def probes() -> Probes:
    return Probes()


@pytest.fixture
def hosts(
    probes: Probes,
    host_factory: Callable[..., WebhookHost],
    client_context: ssl.SSLContext,
) -> Iterator[Hosts]:
    registry = CollectorRegistry()
    Counter("demo_events", "Events", ["kind"], registry=registry).labels(kind="x").inc(3)
    health = HealthServer(port=0).probe(
        lambda: probes.healthy,
        lambda: probes.ready,
        registry,
        controllers_ready=lambda: probes.leading,
    )
    health.start()
    webhook = host_factory(
        healthy=lambda: probes.healthy,
        ready=lambda: probes.ready,
        controllers_ready=lambda: probes.leading,
        registry=registry,
        metrics_access=lambda authorization, path, client: 200,  # allowed: same answer
    )
    try:
        yield Hosts(health, webhook, client_context)
    finally:
        assert health.stop(5)


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        # A healthy standby: its probed endpoints are true, only leadership is not (SPEC §6).
        (
            {"healthy": True, "ready": True, "leading": False},
            {"/healthz": 200, "/readyz": 200, "/controllers/readyz": 503},
        ),
        (
            {"healthy": True, "ready": True, "leading": True},
            {"/healthz": 200, "/readyz": 200, "/controllers/readyz": 200},
        ),
        (
            {"healthy": False, "ready": False, "leading": False},
            {"/healthz": 503, "/readyz": 503, "/controllers/readyz": 503},
        ),
    ],
    ids=["standby", "leader", "not-ready"],
)
def test_both_hosts_answer_the_probes_alike(
    hosts: Hosts, probes: Probes, state: dict[str, bool], expected: dict[str, int]
) -> None:
    probes.set(**state)
    for path, status in expected.items():
        plain, tls = hosts.ask("GET", path)
        assert plain == tls, path
        assert plain[0] == status, path
        assert plain[2]["Content-Type"] == "text/plain; charset=utf-8"
        assert plain[2]["Cache-Control"] == "no-store"
    assert hosts.ask("GET", "/healthz")[0][1] == (b"ok\n" if state["healthy"] else b"unhealthy\n")
    assert hosts.ask("GET", "/readyz")[0][1] == (b"ok\n" if state["ready"] else b"not ready\n")


def test_both_hosts_serve_the_same_metrics(hosts: Hosts) -> None:
    plain, tls = hosts.ask("GET", "/metrics")
    assert plain == tls
    status, body, headers = plain
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert b'demo_events_total{kind="x"} 3.0\n' in body


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("method", ["HEAD", "POST", "PUT", "DELETE", "OPTIONS"])
def test_both_hosts_answer_other_methods_alike(hosts: Hosts, path: str, method: str) -> None:
    plain, tls = hosts.ask(method, path)
    assert plain == tls
    if method == "HEAD":  # a GET's headers, no body
        get = hosts.ask("GET", path)[0]
        assert plain == (get[0], b"", get[2])
    else:
        assert plain[:2] == (405, b"method not allowed\n")
        assert plain[2]["Allow"] == "GET, HEAD"
