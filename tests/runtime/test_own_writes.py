"""Own status writes never cancel a requeue, whatever the status model (issue 43)."""

from __future__ import annotations

from typing import Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from fake_clock import FakeClock
from pydantic import Field
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Context, Controller, ResourceKey, Result
from cloudcoil_sync.crd import CRD, custom_resource
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness


class GadgetStatus(BaseModel):  # not a ReconcileStatus: status-only updates wake the controller
    phase: str | None = None
    passes: int = 0


@custom_resource(api_version="example.com/v1", plural="gadgets")
class Gadget(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Gadget"] = "Gadget"
    status: GadgetStatus | None = None


def create(config: Config, name: str) -> None:
    config.client(Gadget).raw.create(
        {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name}}
    )


def test_own_status_write_keeps_the_requeue(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    kube_config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions")).create(
        CRD(Gadget).manifest()
    )
    calls = Calls()
    controller: Controller[Gadget] = Controller(Gadget)
    assert controller.status_updates  # the case of the pitfall

    @controller.reconcile()
    def poll(gadget: Gadget, ctx: Context[Gadget]) -> Result:
        count = calls.hit(gadget.name or "")
        ctx.set_status(phase="Polling", passes=count)
        return Result(requeue_after=3)

    clock = FakeClock()
    runtime = harness.run(controller, name="gadgets", clock=clock)
    create(kube_config, "g")
    key = ResourceKey("g", "default")
    assert calls.reached("g")

    def written() -> bool:
        stored = kube_emulator.get_object("example.com", "gadgets", "default", "g") or {}
        return (stored.get("status") or {}).get("passes") == 1

    assert kube_emulator.wait_for(written, timeout=10)
    assert wait_until(lambda: runtime.queue.due(key) is not None, timeout=10)  # settled
    # Events reach the triggers in order on the informer's thread: once the marker's pass
    # ran, the echo of g's status write was handled before it.
    create(kube_config, "marker")
    assert calls.reached("marker")
    assert calls["g"] == 1  # the echo started no pass: the requeue stands
    due = runtime.queue.due(key)
    assert due is not None and 2.9 <= due - clock() <= 3.1
    clock.advance(3.0)
    assert calls.reached("g", 2)
    # A status write by someone else still wakes the controller at once.
    assert wait_until(lambda: runtime.queue.due(key) is not None, timeout=10)
    kube_config.client(Gadget).raw.merge_patch(
        "g", {"status": {"phase": "Edited"}}, subresource="status"
    )
    assert calls.reached("g", 3)
