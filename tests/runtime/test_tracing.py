"""OpenTelemetry spans of passes (causes, outcome) and their API requests, on the emulator,
read back with the SDK's in-memory exporter; without `enable_tracing` nothing is imported."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cloudcoil_sync._internal import tracing
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Context, Controller, enable_tracing
from cloudcoil_sync.testing import Emulator

from .conftest import Harness, Widget, create_widget


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    enable_tracing(provider)
    yield spans
    tracing.disable()
    provider.shutdown()


def passes_of(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in spans.get_finished_spans() if span.name == "reconcile parents"]


def test_a_pass_is_a_span_naming_its_causes_with_its_api_requests_under_it(
    kube_emulator: Emulator, widgets: Config, harness: Harness, exporter: InMemorySpanExporter
) -> None:
    controller: Controller[Widget] = Controller(Widget)
    controller.owns(ConfigMap)
    done = threading.Event()

    @controller.reconcile()
    def reconcile(w: Widget, ctx: Context[Widget]) -> None:
        ctx.ensure(ConfigMap(metadata=ObjectMeta(name=f"{w.name}-0"), data={"a": "1"}))
        done.set()

    runtime = harness.run(controller, name="parents")
    create_widget(widgets, "w1")
    assert done.wait(10) and runtime.queue.join(10)
    widgets.client(ConfigMap).delete("w1-0")
    assert kube_emulator.wait_for(
        lambda: any(
            "child ConfigMap default/w1-0 deleted" in span.attributes["cloudcoil.causes"]  # type: ignore[index, operator]
            for span in passes_of(exporter)
        ),
        timeout=10,
    )
    assert runtime.queue.join(10)
    spans = exporter.get_finished_spans()
    first = passes_of(exporter)[0]
    assert first.attributes is not None
    assert first.attributes["cloudcoil.causes"] == ("added",)
    assert first.attributes["cloudcoil.outcome"] == "success"
    assert (first.attributes["k8s.kind"], first.attributes["k8s.object.name"]) == ("Widget", "w1")
    under = [span for span in spans if span.parent is not None and first.context is not None
             and span.parent.span_id == first.context.span_id]  # fmt: skip
    names = {span.name for span in under}
    assert any(name.startswith("POST /api/v1/namespaces/default/configmaps") for name in names), (
        names
    )
    assert all(span.kind.name == "CLIENT" for span in under)
    assert all(span.attributes and span.attributes["http.response.status_code"] for span in under)
    missing = [span for span in under if span.name.startswith("GET")]  # the child, not there yet
    assert missing and missing[0].status.status_code.name == "ERROR"
    assert missing[0].attributes and missing[0].attributes["http.response.status_code"] == 404


def test_without_enable_tracing_opentelemetry_is_never_imported() -> None:
    code = (
        "import sys, cloudcoil_sync.controller, cloudcoil_sync.client, cloudcoil_sync.admission;"
        "from cloudcoil_sync._internal import tracing;"
        "assert not tracing.enabled();"
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_enable_tracing_without_opentelemetry_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = sys.modules['opentelemetry.trace'] = None\n"
        "from cloudcoil_sync.controller import enable_tracing\n"
        "try:\n    enable_tracing()\nexcept ImportError as e:\n    print(e)\n"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'cloudcoil_sync[otel]'" in found.stdout
