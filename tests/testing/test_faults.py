"""Fault injection: canned errors, Retry-After, filters, latency."""

from __future__ import annotations

import time

from .conftest import Client, configmap

CM = "/api/v1/namespaces/default/configmaps"


def test_injected_errors_are_counted_and_filtered(client: Client) -> None:
    client.emulator.faults.inject(503, count=2, method="GET", path="/configmaps$")
    assert client.post(CM, configmap("x")).status_code == 201  # POST is not matched
    assert client.get(CM + "/x").status_code == 200  # path is not matched
    first = client.get(CM)
    assert first.status_code == 503
    assert first.json()["reason"] == "ServiceUnavailable"
    assert client.get(CM).status_code == 503
    assert client.get(CM).status_code == 200
    assert client.emulator.faults.injected == 2


def test_too_many_requests_carries_retry_after(client: Client) -> None:
    client.emulator.faults.inject(429, retry_after=3)
    response = client.get(CM)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert response.json()["details"]["retryAfterSeconds"] == 3
    assert [e.status for e in client.emulator.request_log] == [429]


def test_latency_is_added_until_cleared(client: Client) -> None:
    client.emulator.faults.add_latency(0.2, method="GET")
    start = time.monotonic()
    client.get(CM)
    assert time.monotonic() - start >= 0.2
    client.emulator.faults.clear()
    assert client.emulator.faults.take("GET", CM) == (None, 0.0)


def test_injected_error_keeps_connection_usable(client: Client) -> None:
    client.emulator.faults.inject(500)
    assert client.post(CM, configmap("y")).status_code == 500
    assert client.post(CM, configmap("y")).status_code == 201
    assert client.emulator.connections_accepted == 1
