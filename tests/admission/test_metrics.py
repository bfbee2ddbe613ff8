"""Webhook metrics: controller-runtime names, labelled by route path and status code."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest

from cloudcoil_sync.admission._internal.metrics import InstrumentedAdmission
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics

from .reviews import call


def _app(status: str, seen: dict[str, Any]) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen["in_flight"] = _value(seen["metrics"], "in_flight", environ["PATH_INFO"])
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", "2")])
        return [b"{}"]

    return app


def _value(metrics: OperatorMetrics, which: str, path: str) -> float:
    label = path if path == "/validate/cm" else "unknown"
    sample = metrics.registry.get_sample_value(
        "controller_runtime_webhook_requests_in_flight", {"webhook": label}
    )
    return float(sample or 0.0)


def test_requests_are_counted_timed_and_tracked_per_route() -> None:
    metrics = OperatorMetrics()
    seen: dict[str, Any] = {"metrics": metrics}
    ticks = iter([10.0, 10.25, 20.0, 20.5])
    app = InstrumentedAdmission(
        _app("200 OK", seen), {"/validate/cm"}, metrics, clock=lambda: next(ticks)
    )
    assert call(app, "/validate/cm", {})[0] == 200
    assert seen["in_flight"] == 1.0
    assert call(app, "/random/path", {})[0] == 200
    text = generate_latest(metrics.registry).decode()
    assert (
        'controller_runtime_webhook_requests_total{code="200",webhook="/validate/cm"} 1.0' in text
    )
    assert 'controller_runtime_webhook_requests_total{code="200",webhook="unknown"} 1.0' in text
    assert 'controller_runtime_webhook_latency_seconds_sum{webhook="/validate/cm"} 0.25' in text
    assert 'controller_runtime_webhook_requests_in_flight{webhook="/validate/cm"} 0.0' in text
    assert "/random/path" not in text


def test_a_failing_app_still_counts_a_500_and_leaves_no_request_in_flight() -> None:
    metrics = OperatorMetrics()

    def broken(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        raise RuntimeError("boom")

    app = InstrumentedAdmission(broken, {"/validate/cm"}, metrics)
    with pytest.raises(RuntimeError, match="boom"):
        call(app, "/validate/cm", {})
    text = generate_latest(metrics.registry).decode()
    assert (
        'controller_runtime_webhook_requests_total{code="500",webhook="/validate/cm"} 1.0' in text
    )
    assert 'controller_runtime_webhook_requests_in_flight{webhook="/validate/cm"} 0.0' in text
