"""Objects the model rejects: reported on the object, skipped by readers, never fatal."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Literal

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.client import Config
from cloudcoil_sync.client import InvalidObject as ClientInvalidObject
from cloudcoil_sync.controller import (
    Context,
    Controller,
    InvalidObject,
    ReconcileStatus,
    ResourceKey,
)
from cloudcoil_sync.crd import CRD, custom_resource
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness, conditions

GROUP, PLURAL = "example.com", "gadgets"


class GadgetSpec(BaseModel):
    target: str
    replicas: int = 1


class GadgetStatus(ReconcileStatus):
    seen: str | None = None


@custom_resource(api_version="example.com/v1", plural="gadgets")
class Gadget(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Gadget"] = "Gadget"
    spec: GadgetSpec
    status: GadgetStatus | None = None


def loose_crd(config: Config) -> None:
    """The CRD with an older, looser schema: any spec is stored (as after a model change)."""
    manifest = CRD(Gadget).manifest()
    version = manifest["spec"]["versions"][0]
    properties = version["schema"]["openAPIV3Schema"]["properties"]
    properties["spec"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    version["schema"]["openAPIV3Schema"].pop("required", None)
    config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions")).create(manifest)


def gadget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name}
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": metadata, "spec": spec}


def warnings(kube: Emulator, name: str) -> list[dict[str, Any]]:
    return [
        event
        for event in kube.list_objects("events.k8s.io", "events", "default")
        if event["regarding"]["name"] == name and event["type"] == "Warning"
    ]


def gadget_controller(calls: Calls, listed: dict[str, list[str]]) -> Controller[Gadget]:
    controller: Controller[Gadget] = Controller(Gadget)

    @controller.watch(ConfigMap)
    def every_gadget(cm: ConfigMap) -> Iterable[ResourceKey]:
        # The dependency_rollout pattern: a mapper listing the primary kind.
        for item in controller.cached(Gadget).list(namespace="default"):
            yield ResourceKey(item.name or "", "default")

    @controller.stage(condition="Seen")
    def seen(item: Gadget, ctx: Context[Gadget]) -> None:
        listed[item.name or ""] = sorted(g.name or "" for g in ctx.cached(Gadget).list())
        ctx.set_status(seen=item.spec.target)
        calls.hit(item.name or "")

    return controller


def test_an_object_the_model_rejects_is_reported_on_it_and_the_rest_converge(
    kube_emulator: Emulator,
    kube_config: Config,
    harness: Harness,
    caplog: pytest.LogCaptureFixture,
) -> None:
    loose_crd(kube_config)
    api = kube_config.client(Gadget).raw
    for name in ("a", "b"):
        api.create(gadget(name, {"target": name}))
    api.create(gadget("bad", {"replicas": "many"}))
    calls, listed = Calls(), dict[str, list[str]]()
    runtime = harness.run(gadget_controller(calls, listed), name="gadgets")
    assert calls.reached("a") and calls.reached("b")

    def reported() -> bool:
        stored = kube_emulator.get_object(GROUP, PLURAL, "default", "bad") or {}
        return conditions(stored).get("Ready", {}).get("reason") == "InvalidObject"

    assert kube_emulator.wait_for(reported, timeout=10)
    ready = conditions(kube_emulator.get_object(GROUP, PLURAL, "default", "bad") or {})["Ready"]
    assert ready["status"] == "False"
    assert "spec.target: Field required" in ready["message"]
    assert "spec.replicas" in ready["message"] and "Traceback" not in ready["message"]
    assert kube_emulator.wait_for(lambda: bool(warnings(kube_emulator, "bad")), timeout=10)
    assert warnings(kube_emulator, "bad")[0]["reason"] == "InvalidObject"
    # A dependency event runs the mapper, which lists the primary kind: the bad one is
    # left out, the others are reconciled again, nothing is fatal.
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "settings"}})
    assert calls.reached("a", 2) and calls.reached("b", 2)
    assert listed["a"] == ["a", "b"]
    assert runtime.queue.join(10)
    assert harness.fatal == [] and runtime.ready
    assert calls["bad"] == 0
    lines = [r for r in caplog.records if "Gadget default/bad" in r.getMessage()]
    assert lines and all(r.levelno == logging.WARNING and r.exc_info is None for r in lines)
    assert "spec.target" in lines[0].getMessage()
    text = harness.metrics.render().decode()
    assert 'cloudcoil_invalid_objects_total{controller="gadgets",source="pass"} 1.0' in text
    # Not retried with backoff: looked at again when the object changes.
    assert 'workqueue_retries_total{controller="gadgets",name="gadgets"} 0.0' in text
    live = api.get("bad")
    live["spec"] = {"target": "fixed"}
    api.replace(live)
    assert calls.reached("bad")

    def recovered() -> bool:
        stored = kube_emulator.get_object(GROUP, PLURAL, "default", "bad") or {}
        return conditions(stored).get("Ready", {}).get("status") == "True"

    assert kube_emulator.wait_for(recovered, timeout=10)


def test_cached_reads_name_the_object_and_its_fields(kube_config: Config, harness: Harness) -> None:
    loose_crd(kube_config)
    api = kube_config.client(Gadget).raw
    api.create(gadget("good", {"target": "x"}))
    api.create(gadget("bad", {}))
    controller: Controller[Gadget] = Controller(Gadget)

    @controller.reconcile()
    def reconcile(item: Gadget) -> None:
        pass

    harness.run(controller, name="reads")
    cached = controller.cached(Gadget)
    assert [g.name for g in cached.list(namespace="default")] == ["good"]
    with pytest.raises(InvalidObject) as caught:
        cached.get("bad", namespace="default")
    error = caught.value
    assert (error.kind, error.namespace, error.name) == ("Gadget", "default", "bad")
    assert error.fields == ("spec.target",)
    assert str(error) == (
        "Gadget default/bad does not fit the Gadget model: spec.target: Field required"
    )
    # A live read (ctx.get, ctx.client) says the same, never a pydantic ValidationError.
    with pytest.raises(InvalidObject, match="Gadget default/bad does not fit"):
        kube_config.client(Gadget).get("bad")
    with pytest.raises(ClientInvalidObject):
        kube_config.client(Gadget).list()


def test_mappers_wait_for_the_caches_they_read(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    """The dependency's informer lists first; its mapper reads the primary cache."""
    loose_crd(kube_config)
    kube_config.client(Gadget).raw.create(gadget("a", {"target": "a"}))
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "early"}})
    kube_emulator.faults.add_latency(0.5, method="GET", path="/gadgets$")
    calls, listed = Calls(), dict[str, list[str]]()
    controller = gadget_controller(calls, listed)
    runtime = harness.runtime(controller, name="order")
    runtime.start()
    runtime.wait_synced(timeout=10)
    runtime.start_workers()
    kube_emulator.faults.clear()
    assert calls.reached("a")
    assert harness.fatal == [] and runtime.ready
