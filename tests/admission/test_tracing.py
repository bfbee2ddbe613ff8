"""An admission request is a server span continuing the caller's W3C trace context."""

from __future__ import annotations

import io
import json
import ssl
from collections.abc import Callable, Iterator

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cloudcoil_sync._internal import tracing
from cloudcoil_sync.admission._internal.request import AdmissionDenied, AdmissionRequest
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook
from cloudcoil_sync.controller import enable_tracing

from .conftest import https
from .reviews import config_map, review

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    enable_tracing(provider)
    yield spans
    tracing.disable()
    provider.shutdown()


def test_admission_spans_take_the_trace_context_from_the_request(
    host_factory: Callable[..., WebhookHost],
    client_context: ssl.SSLContext,
    exporter: InMemorySpanExporter,
) -> None:
    table = AdmissionRoutes()

    @table.validating(ConfigMap, path="/validate/cm")
    def check(request: AdmissionRequest[ConfigMap]) -> None:
        with tracing.span("policy lookup", {}):  # on the handler pool's thread
            pass
        if request.resource is not None and (request.resource.data or {}).get("deny"):
            raise AdmissionDenied("no")

    webhook = AdmissionWebhook(table)
    host = host_factory(webhook, ready=lambda: True)
    connection = https(host, client_context)
    try:
        headers = {"Content-Type": "application/json", "traceparent": f"00-{TRACE}-{PARENT}-01"}
        denied = json.dumps(review(obj=config_map(data={"deny": "1"}))).encode()
        connection.request("POST", "/validate/cm", body=denied, headers=headers)
        assert json.loads(connection.getresponse().read())["response"]["allowed"] is False
        plain = json.dumps(review()).encode()
        connection.request(
            "POST", "/validate/cm", body=plain, headers={"Content-Type": "application/json"}
        )
        assert connection.getresponse().read()
    finally:
        connection.close()
        assert webhook.close(timeout=5)
    inner, first, _, second = exporter.get_finished_spans()
    assert inner.name == "policy lookup" and inner.parent is not None and first.context is not None
    assert inner.parent.span_id == first.context.span_id
    assert first.name == "admission /validate/cm" and first.kind.name == "SERVER"
    assert first.context is not None and format(first.context.trace_id, "032x") == TRACE
    assert first.parent is not None and format(first.parent.span_id, "016x") == PARENT
    assert first.attributes is not None
    assert first.attributes["cloudcoil.admission.allowed"] is False
    assert first.attributes["http.response.status_code"] == 200
    assert second.parent is None and second.context is not None
    assert format(second.context.trace_id, "032x") != TRACE


def test_a_handler_on_the_pool_runs_under_the_request_span(exporter: InMemorySpanExporter) -> None:
    """Served by another WSGI server (no late-answer hook): the handler runs on the pool."""
    table = AdmissionRoutes()

    @table.validating(ConfigMap, path="/validate/cm")
    def check(request: AdmissionRequest[ConfigMap]) -> None:
        with tracing.span("policy lookup", {}):
            pass

    webhook = AdmissionWebhook(table)
    body = json.dumps(review()).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/validate/cm",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "HTTP_TRACEPARENT": f"00-{TRACE}-{PARENT}-01",
    }
    try:
        answer = b"".join(webhook(environ, lambda status, headers: None))
    finally:
        assert webhook.close(timeout=5)
    assert json.loads(answer)["response"]["allowed"] is True
    inner, served = exporter.get_finished_spans()
    assert inner.name == "policy lookup" and served.name == "admission /validate/cm"
    assert inner.parent is not None and served.context is not None
    assert inner.parent.span_id == served.context.span_id
    assert format(inner.context.trace_id, "032x") == TRACE  # type: ignore[union-attr]
