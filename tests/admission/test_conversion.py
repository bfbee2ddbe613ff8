"""The conversion webhook over real TLS: ConversionReview v1 on its own path of the
admission webhook, with the admission routes' hardening and its own deadline."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.admission._internal.conversion import ConversionRoute, conversion_route
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook
from cloudcoil_sync.crd import Version, Versions, custom_resource
from examples.versioned_operator import GIZMOS

from .conftest import https

GROUP = "examples.cloudcoil.dev"
PATH = f"/convert/gizmos.{GROUP}"
Factory = Callable[..., WebhookHost]


class SlowSpec(BaseModel):
    n: int = 0


@custom_resource(api_version="slow.example.com/v2", kind="Slow", plural="slows")
class SlowV2(Resource):
    spec: SlowSpec = Field(default_factory=SlowSpec)


@custom_resource(api_version="slow.example.com/v1", kind="Slow", plural="slows")
class SlowV1(Resource):
    spec: SlowSpec = Field(default_factory=SlowSpec)


GATE = threading.Event()
ENTERED = threading.Event()


def slow_up(old: SlowV1) -> SlowV2:
    ENTERED.set()
    GATE.wait(10)
    return SlowV2(metadata=old.metadata, spec=old.spec)


def down(new: SlowV2) -> SlowV1:
    return SlowV1(metadata=new.metadata, spec=new.spec)


SLOWS = Versions(
    Version(SlowV2, hub=True, storage=True), Version(SlowV1, to_hub=slow_up, from_hub=down)
)


def review(objects: list[dict[str, Any]], desired: str = f"{GROUP}/v1") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects},
    }


def alpha(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Gizmo",
        "metadata": {"name": name, "namespace": "ns", "uid": "x", "resourceVersion": "7"},
        "spec": spec,
    }


class Client:
    def __init__(self, host: WebhookHost, context: ssl.SSLContext) -> None:
        self.host, self.context = host, context

    def post(self, path: str, document: Any, content_type: str = "application/json") -> Any:
        connection = https(self.host, self.context)
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        connection.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        answer = response.status, json.loads(response.read())
        connection.close()
        return answer


@pytest.fixture
def client(host_factory: Factory, client_context: ssl.SSLContext) -> Iterator[Client]:
    table = AdmissionRoutes()
    for route in (conversion_route(GIZMOS), ConversionRoute(SLOWS, "/convert/slow", 1)):
        table.conversions[route.path] = route
    webhook = AdmissionWebhook(table)
    host = host_factory(webhook, ready=lambda: True)
    GATE.clear()
    ENTERED.clear()
    yield Client(host, client_context)
    GATE.set()
    assert webhook.close(timeout=5)


def test_converts_every_object_and_keeps_metadata(client: Client) -> None:
    status, document = client.post(PATH, review([alpha("a", greeting="hi"), alpha("b")]))
    assert status == 200
    response = document["response"]
    assert (document["kind"], response["uid"]) == ("ConversionReview", "u-1")
    assert response["result"] == {"status": "Success"}
    first, second = response["convertedObjects"]
    assert first["apiVersion"] == f"{GROUP}/v1"
    assert first["spec"] == {"message": "hi", "replicas": 1}
    assert first["metadata"] == alpha("a")["metadata"]
    assert second["spec"]["message"] == "hello"


def test_a_failed_conversion_is_a_failure_result(client: Client) -> None:
    status, document = client.post(PATH, review([alpha("a", greeting=["not", "a", "string"])]))
    assert status == 200
    result = document["response"]["result"]
    assert result["status"] == "Failure"
    assert f"converting {GROUP}/v1alpha1 Gizmo ns/a to {GROUP}/v1" in result["message"]
    assert "GizmoV1Alpha1 rejects the object" in result["message"]
    assert document["response"]["convertedObjects"] == []


def test_hardening_as_admission_routes(client: Client) -> None:
    assert client.post(PATH, review([]), content_type="text/plain")[0] == 415
    assert client.post(PATH, b"{")[0] == 400
    assert client.post(PATH, b"[]")[0] == 400
    wrong = review([])
    wrong["kind"] = "AdmissionReview"
    assert client.post(PATH, wrong) == (
        400,
        {"message": "Invalid apiextensions.k8s.io/v1 ConversionReview"},
    )
    no_uid = review([])
    del no_uid["request"]["uid"]
    assert client.post(PATH, no_uid)[0] == 400
    assert client.post(PATH, review(["x"]))[0] == 400  # type: ignore[list-item]
    nested: Any = {}
    for _ in range(150):
        nested = {"a": nested}
    assert client.post(PATH, review([nested]))[0] == 400
    huge = review([alpha("a", greeting="x" * (4 * 1024 * 1024))])
    assert client.post(PATH, huge)[0] == 413
    assert client.post("/convert/unknown", review([]))[0] == 404
    connection = https(client.host, client.context)
    connection.request("GET", PATH)
    assert connection.getresponse().status == 405
    connection.close()


def test_a_slow_conversion_answers_504_at_its_deadline_and_others_go_on(client: Client) -> None:
    slow = {"apiVersion": "slow.example.com/v1", "kind": "Slow", "metadata": {"name": "s"}}
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            client.post("/convert/slow", review([slow], "slow.example.com/v2"))
        )
    )
    waiting.start()
    assert ENTERED.wait(10)
    # The Gizmo conversion has its own slots: answered while the slow one is stuck.
    assert client.post(PATH, review([alpha("a")]))[0] == 200
    waiting.join(15)
    assert answers == [(504, {"message": "Conversion webhook timed out"})]
