"""A pass that edits a field the model defaults but the stored object lacks must land (the
guarded patch adds the member; it looped on 422 refusals before)."""

from __future__ import annotations

from typing import Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.crd import CRD, custom_resource
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness


class GadgetSpec(BaseModel):
    items: list[str] = Field(default_factory=list)


@custom_resource(api_version="example.com/v1", plural="gadgets")
class Gadget(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Gadget"] = "Gadget"
    spec: GadgetSpec | None = None


def test_an_edit_of_a_defaulted_list_is_written(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    crds = kube_config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
    crds.create(CRD(Gadget).manifest())
    calls = Calls()
    controller: Controller[Gadget] = Controller(Gadget, events=False)

    @controller.reconcile()
    def reconcile(gadget: Gadget) -> Gadget:
        calls.hit("pass")
        assert gadget.spec is not None
        if "x" not in gadget.spec.items:
            gadget.spec.items.append("x")
        return gadget

    harness.run(controller, name="gadgets")
    body = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    kube_config.client(Gadget).raw.create({**body, "spec": {}})

    def written() -> bool:
        stored = kube_emulator.get_object("example.com", "gadgets", "default", "g") or {}
        return (stored.get("spec") or {}).get("items") == ["x"]

    assert kube_emulator.wait_for(written, timeout=10)
    assert calls["pass"] <= 2  # no loop of refused writes
