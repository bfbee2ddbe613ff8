"""Issue 41's generation-changed must-show on a real API server (KUBECONFIG, admin): under
`filter(changed="generation")`, annotation- and label-only changes of a custom resource
start no pass; a spec change does.

    KUBECONFIG=... .venv/bin/python bench/generation_real.py

Installs the CRD gadgets.i41.cloudcoil.test and a namespace i41-gen-*, both deleted at the
end. One JSON line; record `uptime` beside it.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Literal

from cloudcoil.models.kubernetes.core.v1 import Namespace
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime
from cloudcoil_sync.crd import CRD, custom_resource

CRDS = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")


class GadgetSpec(BaseModel):
    size: int = 1


@custom_resource(api_version="i41.cloudcoil.test/v1", plural="gadgets")
class Gadget(Resource):
    api_version: Literal["i41.cloudcoil.test/v1"] = Field(
        default="i41.cloudcoil.test/v1", alias="apiVersion"
    )
    kind: Literal["Gadget"] = "Gadget"
    spec: GadgetSpec | None = None


def _until(predicate: Any, timeout: float) -> bool:
    deadline, pause = time.monotonic() + timeout, threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        pause.wait(0.05)
    return True


def main() -> dict[str, Any]:
    namespace = f"i41-gen-{int(time.time())}"
    config = Config.from_kubeconfig(None, None, namespace=namespace)
    crds = config.client(CRDS).raw
    crds.create(CRD(Gadget).manifest())

    def established() -> bool:
        conditions = (crds.get("gadgets.i41.cloudcoil.test").get("status") or {}).get(
            "conditions"
        ) or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    assert _until(established, 60)
    config.client(Namespace).raw.create({"metadata": {"name": namespace}})
    passes: list[int] = []
    controller: Controller[Gadget] = Controller(Gadget, events=False).filter(changed="generation")

    @controller.reconcile()
    def reconcile(gadget: Gadget) -> None:
        passes.append(gadget.spec.size if gadget.spec else 0)

    metrics = OperatorMetrics()
    runtime = ControllerRuntime(controller, config, metrics=metrics)
    api = config.client(Gadget).raw

    def dropped() -> float:
        sample = metrics.registry.get_sample_value(
            "cloudcoil_filtered_events_total",
            {"controller": runtime.name, "filter": "generation"},
        )
        return sample or 0.0

    try:
        runtime.start(wait=True)
        body = {"apiVersion": "i41.cloudcoil.test/v1", "kind": "Gadget"}
        api.create({**body, "metadata": {"name": "g1"}, "spec": {"size": 1}})
        assert _until(lambda: len(passes) == 1, 30)
        for i in range(5):
            api.merge_patch("g1", {"metadata": {"annotations": {"note": str(i)}}})
        api.merge_patch("g1", {"metadata": {"labels": {"team": "a"}}})
        assert _until(lambda: dropped() == 6, 30)
        runtime.queue.join(10)
        after_metadata = len(passes)
        api.merge_patch("g1", {"spec": {"size": 2}})
        assert _until(lambda: len(passes) == 2, 30)
        runtime.queue.join(10)
        return {
            "bench": "generation_changed",
            "passes_after_create": 1,
            "metadata_only_changes": 6,
            "passes_after_metadata_changes": after_metadata,
            "filtered_events_total": dropped(),
            "passes_after_spec_change": len(passes),
            "sizes_seen": passes,
        }
    finally:
        runtime.stop(timeout=10)
        config.client(Namespace).raw.delete(namespace)
        crds.delete("gadgets.i41.cloudcoil.test")


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
