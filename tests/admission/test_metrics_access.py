"""Issue 18, finding 4: /metrics only for tokens the API server authenticates and
authorizes (TokenReview + SubjectAccessReview, cached), with exactly the generated RBAC."""

from __future__ import annotations

import http.client
import ssl
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client import CollectorRegistry, Counter

from cloudcoil_sync.admission._internal.metrics_access import MetricsAccess
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.application._internal.manifests import metrics_reader
from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .conftest import https

RBAC = "rbac.authorization.k8s.io"
Factory = Callable[..., WebhookHost]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def operator(kube_emulator: Emulator) -> Iterator[Config]:
    """The operator's own identity, with only the review permissions manifests grant."""
    admin = kube_emulator.config()
    admin.client((RBAC, "v1", "clusterroles")).create(
        {
            "metadata": {"name": "reviews"},
            "rules": [
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["tokenreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["subjectaccessreviews"],
                    "verbs": ["create"],
                },
            ],
        }
    )
    _bind(admin, "reviews", "operator")
    admin.client((RBAC, "v1", "clusterroles")).create(metrics_reader("op", "ops"))
    config = kube_emulator.config(token=kube_emulator.service_account_token("default", "operator"))
    yield config
    config.close()
    admin.close()


def _bind(admin: Config, role: str, account: str) -> None:
    admin.client((RBAC, "v1", "clusterrolebindings")).create(
        {
            "metadata": {"name": f"{role}-{account}"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}],
        }
    )


def test_tokens_are_authenticated_then_authorized(
    kube_emulator: Emulator, operator: Config
) -> None:
    access = MetricsAccess(operator)
    assert access.decide(None, "/metrics") == 401
    assert access.decide("Basic dXNlcjpwYXNz", "/metrics") == 401
    assert access.decide("Bearer unknown", "/metrics") == 401
    stranger = kube_emulator.service_account_token("default", "stranger")
    assert access.decide(f"Bearer {stranger}", "/metrics") == 403
    scraper = kube_emulator.service_account_token("default", "prometheus")
    _bind(kube_emulator.config(), "op.ops-metrics-reader", "prometheus")
    assert access.decide(f"Bearer {scraper}", "/metrics") == 200
    assert access.decide(f"Bearer {scraper}", "/debug") == 403  # the reader grants /metrics only


def test_decisions_are_cached_as_controller_runtime_does(
    kube_emulator: Emulator, operator: Config
) -> None:
    clock = Clock()
    access = MetricsAccess(operator, clock=clock)
    scraper = kube_emulator.service_account_token("default", "prometheus")
    header = f"Bearer {scraper}"
    assert access.decide(header, "/metrics") == 403 and access.reviews == 2
    _bind(kube_emulator.config(), "op.ops-metrics-reader", "prometheus")
    assert access.decide(header, "/metrics") == 403 and access.reviews == 2  # denial cached
    clock.now += 31  # past the 30 s denial TTL; the token's own minute still holds
    assert access.decide(header, "/metrics") == 200 and access.reviews == 3
    clock.now += 28
    for _ in range(5):
        assert access.decide(header, "/metrics") == 200
    assert access.reviews == 3  # allowed for 5 minutes, the token known for one
    clock.now += 3  # the token is reviewed again after its minute; the decision is still cached
    assert access.decide(header, "/metrics") == 200 and access.reviews == 4


def test_a_failing_api_server_is_a_500_not_cached(
    kube_emulator: Emulator, operator: Config
) -> None:
    access = MetricsAccess(operator)
    kube_emulator.faults.inject(403, count=2, method="POST", path="tokenreviews")
    assert access.decide("Bearer x", "/metrics") == 500
    assert access.decide("Bearer x", "/metrics") == 500 and access.reviews == 2
    assert access.decide("Bearer x", "/metrics") == 401  # answered again: an unknown token


def test_the_webhook_listener_serves_metrics_to_authorized_scrapers_only(
    host_factory: Factory, client_context: ssl.SSLContext, kube_emulator: Emulator, operator: Config
) -> None:
    registry = CollectorRegistry()
    Counter("demo", "Demo", registry=registry).inc()
    access = MetricsAccess(operator)
    host = host_factory(registry=registry, metrics_access=access.decide)
    scraper = kube_emulator.service_account_token("default", "prometheus")
    _bind(kube_emulator.config(), "op.ops-metrics-reader", "prometheus")

    def scrape(token: str | None) -> tuple[int, bytes]:
        connection: http.client.HTTPSConnection = https(host, client_context)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        connection.request("GET", "/metrics", headers=headers)
        response = connection.getresponse()
        answer = response.status, response.read()
        connection.close()
        return answer

    assert scrape(None) == (401, b"Unauthorized\n")
    assert scrape(kube_emulator.service_account_token("default", "other")) == (403, b"Forbidden\n")
    status, body = scrape(scraper)
    assert status == 200 and b"demo_total 1.0" in body
    connection = https(host, client_context)  # the probes stay open to the kubelet
    connection.request("GET", "/healthz")
    assert connection.getresponse().status == 200
    connection.close()


# -- issue 37, finding 3: junk tokens must not become reviews one for one ---------------------


def test_junk_tokens_from_one_address_cost_at_most_its_review_budget(
    host_factory: Factory, client_context: ssl.SSLContext, operator: Config
) -> None:
    access = MetricsAccess(operator, clock=Clock(), client_burst=5)  # a frozen clock: no refill
    host = host_factory(metrics_access=access.decide)
    answers = []
    for n in range(40):
        connection: http.client.HTTPSConnection = http.client.HTTPSConnection(
            *host.address, context=client_context, timeout=5, source_address=("127.0.0.2", 0)
        )
        connection.request("GET", "/metrics", headers={"Authorization": f"Bearer junk-{n}"})
        response = connection.getresponse()
        response.read()
        answers.append((response.status, response.getheader("Retry-After")))
        connection.close()
    assert answers == [(401, None)] * 5 + [(429, "1")] * 35
    assert access.reviews == 5
    # Another address has a budget of its own; the first gets one again as time passes.
    assert access.decide("Bearer junk-x", "/metrics", "127.0.0.3") == 401
    access.clock.now += 1  # type: ignore[attr-defined]
    assert access.decide("Bearer junk-y", "/metrics", "127.0.0.2") == 401
    assert access.reviews == 7
    access.close()


def test_junk_cannot_push_a_scrapers_decision_out_of_the_cache(
    kube_emulator: Emulator, operator: Config
) -> None:
    access = MetricsAccess(operator, max_entries=4)
    scraper = f"Bearer {kube_emulator.service_account_token('default', 'prometheus')}"
    _bind(kube_emulator.config(), "op.ops-metrics-reader", "prometheus")
    assert access.decide(scraper, "/metrics") == 200 and access.reviews == 2
    for n in range(40):  # from 40 addresses: each within its budget
        assert access.decide(f"Bearer junk-{n}", "/metrics", f"10.0.0.{n}") == 401
    assert access.reviews == 42
    assert access.decide(scraper, "/metrics") == 200 and access.reviews == 42  # still cached
    access.close()


def test_concurrent_lookups_of_one_new_token_share_its_reviews(
    kube_emulator: Emulator, operator: Config
) -> None:
    access = MetricsAccess(operator)
    scraper = f"Bearer {kube_emulator.service_account_token('default', 'prometheus')}"
    _bind(kube_emulator.config(), "op.ops-metrics-reader", "prometheus")
    # Slow reviews: the 16 lookups are all waiting while the first one's are in flight.
    kube_emulator.faults.add_latency(1.0, "POST", "accessreviews|tokenreviews")
    start = threading.Barrier(16)

    def scrape(_: int) -> int:
        start.wait(5)
        return access.decide(scraper, "/metrics", "127.0.0.2")

    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(scrape, range(16))) == [200] * 16
    assert access.reviews == 2  # one TokenReview, one SubjectAccessReview
    kube_emulator.faults.clear()
    access.close()


def test_reviews_have_a_budget_and_connections_apart_from_the_operators(
    kube_emulator: Emulator, operator: Config
) -> None:
    before = operator.transport.pool_stats()["requests"]
    access = MetricsAccess(operator)
    for n in range(5):
        assert access.decide(f"Bearer junk-{n}", "/metrics") == 401
    assert access.reviews == 5
    # Not one of them went through the operator's own pool (nor its rate limiter).
    assert operator.transport.pool_stats()["requests"] == before
    assert access.transport is not operator.transport
    assert access.transport.limiter is not operator.transport.limiter
    assert access.transport.pool_stats()["requests"] == 5
    access.close()
