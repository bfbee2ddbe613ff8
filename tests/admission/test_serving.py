"""The admission webhook end to end: AdmissionWebhook behind WebhookHost over real TLS."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.admission._internal.request import AdmissionDenied, AdmissionRequest
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

from .conftest import https
from .reviews import config_map, review

Factory = Callable[..., WebhookHost]


class Served:
    def __init__(self, host: WebhookHost, context: ssl.SSLContext) -> None:
        self.host = host
        self.connection = https(host, context)
        self.context = context

    def post(
        self, path: str, document: Any, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.connection.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = self.connection.getresponse()
        return response.status, json.loads(response.read())


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def served(
    host_factory: Factory, client_context: ssl.SSLContext, release: threading.Event
) -> Iterator[Served]:
    table = AdmissionRoutes()

    @table.mutating(ConfigMap, path="/mutate/cm")
    def label(request: AdmissionRequest[ConfigMap]) -> ConfigMap:
        resource = request.resource
        assert resource is not None and resource.metadata is not None
        if (resource.data or {}).get("deny"):
            raise AdmissionDenied("denied by policy")
        if (resource.data or {}).get("crash"):
            raise RuntimeError("defect")
        resource.metadata.labels = {"managed": "yes"}
        return resource

    @table.validating(ConfigMap, path="/validate/slow", timeout_seconds=1)
    def slow(request: AdmissionRequest[ConfigMap]) -> None:
        release.wait(10)

    webhook = AdmissionWebhook(table)
    host = host_factory(webhook, ready=lambda: True)
    yield Served(host, client_context)
    release.set()
    assert webhook.close(timeout=5)


def test_mutation_over_tls(served: Served) -> None:
    status, document = served.post("/mutate/cm", review(uid="abc"))
    assert status == 200
    response = document["response"]
    assert response["uid"] == "abc" and response["allowed"] is True
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"managed": "yes"}}
    ]


def test_every_answer_code_over_tls(served: Served) -> None:
    deny = review(obj=config_map(data={"deny": "1"}))
    status, document = served.post("/mutate/cm", deny)
    assert status == 200 and document["response"]["status"]["message"] == "denied by policy"
    assert served.post("/mutate/cm", review(obj=config_map(data={"crash": "1"})))[0] == 500
    assert served.post("/mutate/cm", review(obj=config_map(data={"n": 1})))[1]["response"][
        "status"
    ]["code"] == 422  # fmt: skip
    assert served.post("/nowhere", review()) == (404, {"message": "Unknown webhook path"})
    assert served.post("/mutate/cm", review(), content_type="text/plain")[0] == 415
    assert served.post("/mutate/cm", b"{")[0] == 400
    huge = review(obj=config_map(data={"blob": "x" * (4 * 1024 * 1024)}))
    assert served.post("/mutate/cm", huge)[0] == 413
    served.connection.request("GET", "/mutate/cm")
    response = served.connection.getresponse()
    assert response.status == 405 and response.getheader("Allow") == "POST"
    response.read()
    served.connection.request("GET", "/readyz")
    response = served.connection.getresponse()
    assert (response.status, response.read()) == (200, b"ok\n")
    # One connection, and a second after the 413: it closes its connection unread.
    assert served.host.front is not None and served.host.front.accepted == 2


def test_slow_handler_times_out_without_blocking_others(
    served: Served, client_context: ssl.SSLContext, release: threading.Event
) -> None:
    results: list[tuple[int, Any]] = []
    slow_client = Served(served.host, client_context)
    started = time.monotonic()
    worker = threading.Thread(target=lambda: results.append(slow_client.post("/validate/slow",
        review())))  # fmt: skip
    worker.start()
    assert served.post("/mutate/cm", review())[0] == 200
    worker.join(5)
    assert results == [(504, {"message": "Admission webhook timed out"})]
    assert time.monotonic() - started >= 0.9  # the route's 1 s deadline answered it
    release.set()  # only now may the handler end: the 504 did not wait for it
