"""Issue 18, finding 2: one stuck route cannot block admission on the others.

Each route has its own handler slots: requests to a route whose handlers block take that
route's slots only and are answered 504 at its deadline, while the other routes keep
answering within PROMPT seconds; the saturation shows in metrics and in the logs.
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from prometheus_client import CollectorRegistry, generate_latest

from cloudcoil_sync.admission._internal.concurrency import RouteSlots
from cloudcoil_sync.admission._internal.request import AdmissionRequest
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

from .reviews import call, review

Factory = Callable[..., WebhookHost]
PROMPT = 1.0
STUCK, FINE = "/validate/stuck", "/validate/fine"


@pytest.fixture
def stuck() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


def routes(release: threading.Event, entered: threading.Semaphore, **stuck_options: Any) -> Any:
    table = AdmissionRoutes()

    @table.validating(ConfigMap, path=STUCK, timeout_seconds=1, **stuck_options)
    def blocked(request: AdmissionRequest[ConfigMap]) -> None:
        entered.release()
        release.wait(10)

    @table.validating(ConfigMap, path=FINE)
    def fine(request: AdmissionRequest[ConfigMap]) -> None:
        return None

    return table


def post(host: WebhookHost, context: ssl.SSLContext, path: str, timeout: float) -> int:
    address, port = host.address
    connection = http.client.HTTPSConnection(address, port, context=context, timeout=timeout)
    try:
        body = json.dumps(review()).encode()
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_a_stuck_route_at_the_defaults_answers_504_for_itself_only(
    host_factory: Factory,
    client_context: ssl.SSLContext,
    stuck: threading.Event,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The attack: more blocking requests than the 16 default slots on one route.
    entered = threading.Semaphore(0)
    webhook = AdmissionWebhook(routes(stuck, entered))
    registry = CollectorRegistry()
    registry.register(webhook.slots)
    host = host_factory(webhook)
    with ThreadPoolExecutor(20) as pool:
        blocked = [pool.submit(post, host, client_context, STUCK, 10) for _ in range(20)]
        for _ in range(16):
            assert entered.acquire(timeout=5)
        assert webhook.slots.in_flight(STUCK) == 16
        # While every slot of the stuck route is taken, the other route answers at once.
        assert [post(host, client_context, FINE, PROMPT) for _ in range(20)] == [200] * 20
        assert [future.result(timeout=10) for future in blocked] == [504] * 20
    stuck.set()
    assert webhook.slots.rejected(STUCK) == 4 and webhook.slots.rejected(FINE) == 0
    text = generate_latest(registry).decode()
    assert f'cloudcoil_webhook_handlers_rejected_total{{webhook="{STUCK}"}} 4.0' in text
    assert f'cloudcoil_webhook_handler_slots{{webhook="{STUCK}"}} 16.0' in text
    assert f'cloudcoil_webhook_handlers_in_flight{{webhook="{FINE}"}} 0.0' in text
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"Admission route {STUCK} has all 16 of its handler slots busy" in w for w in warnings
    )
    assert webhook.close(timeout=5)


def test_a_route_sets_its_own_concurrency(
    host_factory: Factory, client_context: ssl.SSLContext, stuck: threading.Event
) -> None:
    entered = threading.Semaphore(0)
    webhook = AdmissionWebhook(routes(stuck, entered, max_concurrency=2), max_workers=4)
    host = host_factory(webhook)
    with ThreadPoolExecutor(3) as pool:
        blocked = [pool.submit(post, host, client_context, STUCK, 10) for _ in range(3)]
        assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
        assert not entered.acquire(timeout=0.3)  # the third waits: 2 slots, not the 4
        assert webhook.slots.in_flight(STUCK) == 2
        assert post(host, client_context, FINE, PROMPT) == 200
        assert [future.result(timeout=10) for future in blocked] == [504] * 3
    assert webhook.slots.rejected(STUCK) == 1
    assert webhook.close(timeout=5)


def test_per_route_slots_without_the_host(stuck: threading.Event) -> None:
    # Under another WSGI server handlers run on the pool, within the same per-route slots.
    entered = threading.Semaphore(0)
    webhook = AdmissionWebhook(routes(stuck, entered, max_concurrency=1))
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(call, webhook, STUCK, review())
        assert entered.acquire(timeout=5)
        second = pool.submit(call, webhook, STUCK, review())
        assert call(webhook, FINE, review())[0] == 200
        assert first.result(timeout=5)[0] == 504 and second.result(timeout=5)[0] == 504
    assert webhook.slots.rejected(STUCK) == 1
    stuck.set()
    assert webhook.close(timeout=5)


def test_slots_are_validated() -> None:
    with pytest.raises(ValueError, match="positive integer"):
        RouteSlots(0)
    with pytest.raises(ValueError, match="max_concurrency must be an integer between 1 and 1024"):
        AdmissionRoutes().validating(ConfigMap, path="/v", max_concurrency=0)(lambda request: None)
