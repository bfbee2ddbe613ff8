"""Request shapes of guarded persistence (HTTP edge cases mocked with `responses`)."""

import json
from typing import Any, Literal

import pytest
import responses
from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync._internal.patches import split_status
from cloudcoil_sync.client import Config, Conflict
from cloudcoil_sync.controller._internal.reconciler import persist, status_only
from cloudcoil_sync.controller._internal.status import ReconcileStatus, update_status
from cloudcoil_sync.crd import custom_resource

SERVER = "http://kube.test"
PATH = f"{SERVER}/apis/example.com/v1/namespaces/ns/gadgets/g"


class GadgetStatus(ReconcileStatus):
    phase: str | None = None


@custom_resource(api_version="example.com/v1", plural="gadgets")
class Gadget(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Gadget"] = "Gadget"
    status: GadgetStatus | None = None


def gadget() -> Gadget:
    return Gadget(metadata=ObjectMeta(name="g", namespace="ns", uid="u1", resource_version="5"))


def answer(rv: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "ns", "uid": "u1", "resourceVersion": rv},
    }
    if status is not None:
        body["status"] = status
    return body


@pytest.fixture
def config() -> Config:
    return Config(SERVER, token="t", namespace="ns", max_retries=0)


def sent(call: Any) -> list[dict[str, Any]]:
    return list(json.loads(call.request.body))


@responses.activate
def test_main_then_status_patch_at_the_new_version(config: Config) -> None:
    before = gadget()
    after = gadget()
    after.metadata.labels = {"a": "b"}  # type: ignore[union-attr]
    update_status(after, phase="Ready")
    responses.patch(PATH, json=answer("6"))
    responses.patch(f"{PATH}/status", json=answer("7", {"phase": "Ready"}))
    result = persist(config.client(Gadget), before, after, status_subresource=True)
    assert result is not None and result["metadata"]["resourceVersion"] == "7"
    main, status = responses.calls
    assert main.request.headers["Content-Type"] == "application/json-patch+json"
    assert sent(main) == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
        {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}},
    ]
    assert sent(status)[:2] == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "6"},
    ]
    assert all(op["path"].startswith("/status") for op in sent(status)[2:])


@responses.activate
def test_status_changed_by_the_main_patch_is_a_conflict(config: Config) -> None:
    before = gadget()
    after = gadget()
    after.metadata.labels = {"a": "b"}  # type: ignore[union-attr]
    update_status(after, phase="Ready")
    responses.patch(PATH, json=answer("6", {"phase": "SomeoneElse"}))
    with pytest.raises(Conflict, match="Status changed during resource patch; reconcile again"):
        persist(config.client(Gadget), before, after, status_subresource=True)
    assert len(responses.calls) == 1  # the status patch was not sent


@responses.activate
def test_status_only_changes_skip_the_main_patch(config: Config) -> None:
    after = gadget()
    update_status(after, phase="Ready")
    responses.patch(f"{PATH}/status", json=answer("6", {"phase": "Ready"}))
    persist(config.client(Gadget), gadget(), after, status_subresource=True)
    [call] = responses.calls
    assert sent(call)[1] == {"op": "test", "path": "/metadata/resourceVersion", "value": "5"}


@responses.activate
def test_without_a_status_subresource_one_patch_carries_everything(config: Config) -> None:
    after = gadget()
    after.metadata.labels = {"a": "b"}  # type: ignore[union-attr]
    update_status(after, phase="Ready")
    responses.patch(PATH, json=answer("6", {"phase": "Ready"}))
    persist(config.client(Gadget), gadget(), after, status_subresource=False)
    [call] = responses.calls
    paths = [op["path"] for op in sent(call)]
    assert "/metadata/labels" in paths and any(p.startswith("/status") for p in paths)


@responses.activate
def test_no_change_sends_nothing(config: Config) -> None:
    assert persist(config.client(Gadget), gadget(), gadget(), status_subresource=True) is None
    assert len(responses.calls) == 0


def test_split_and_status_only_helpers() -> None:
    operations: list[dict[str, Any]] = [
        {"op": "add", "path": "/status", "value": {}},
        {"op": "replace", "path": "/status/phase", "value": "x"},
        {"op": "add", "path": "/statusx", "value": 1},
        {"op": "add", "path": "/metadata/labels", "value": {}},
    ]
    main, status = split_status(operations)
    assert [op["path"] for op in main] == ["/statusx", "/metadata/labels"]
    assert [op["path"] for op in status] == ["/status", "/status/phase"]
    snapshot, desired = gadget(), gadget()
    desired.metadata.labels = {"not": "written"}  # type: ignore[union-attr]
    update_status(desired, phase="Failed")
    report = status_only(snapshot, desired)
    assert report.metadata.labels is None  # type: ignore[union-attr]
    assert report.status is not None and report.status.phase == "Failed"
    assert snapshot.status is None
