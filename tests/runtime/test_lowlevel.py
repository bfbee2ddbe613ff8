"""Low-level `Stages`/`Cases` reconcilers and `every=` through the runtime."""

from __future__ import annotations

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Cases, Controller, Stage, Stages, Wait
from cloudcoil_sync.controller._internal.context import Request
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness, Widget, conditions, create_widget, stored


def test_low_level_stages_persist_the_request_object_and_conditions(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    def configure(request: Request[Widget]) -> None:
        obj = request.object
        assert obj is not None and obj.metadata is not None
        obj.metadata.annotations = {"configured": "yes"}

    def deploy(request: Request[Widget]) -> Wait | None:
        obj = request.object
        assert obj is not None and obj.spec is not None
        return None if obj.spec.size > 1 else Wait("TooSmall", "size must exceed 1")

    controller: Controller[Widget] = Controller(
        Widget, Stages(Stage("Configured", configure), Stage("Deployed", deploy))
    )
    runtime = harness.run(controller, name="lowlevel")
    create_widget(widgets, "w1", size=1)

    def widget() -> dict[str, object]:
        return stored(kube_emulator, "example.com", "widgets", "w1")

    assert kube_emulator.wait_for(
        lambda: conditions(widget()).get("Deployed", {}).get("reason") == "TooSmall", timeout=10
    )
    assert widget()["metadata"]["annotations"] == {"configured": "yes"}  # type: ignore[index]
    assert conditions(widget())["Configured"]["status"] == "True"
    assert conditions(widget())["Ready"]["status"] == "False"
    widgets.client(Widget).raw.merge_patch("w1", {"spec": {"size": 2}})
    assert kube_emulator.wait_for(
        lambda: conditions(widget()).get("Ready", {}).get("status") == "True", timeout=10
    )
    assert runtime.queue.join(10)


def test_low_level_cases_and_every(kube_config: Config, harness: Harness) -> None:
    calls = Calls()
    cases: Cases[ConfigMap] = Cases(report_status=False)

    @cases.case("Big", when=lambda request: len(request.object.data or {}) > 1)
    def big(request: Request[ConfigMap]) -> None:
        calls.hit(f"big:{request.name}")

    @cases.otherwise("Small")
    def small(request: Request[ConfigMap]) -> None:
        calls.hit(f"small:{request.name}")

    harness.run(Controller(ConfigMap, cases), name="cases")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}})
    api.create({"metadata": {"name": "b"}, "data": {"x": "1"}})
    assert calls.reached("big:a") and calls.reached("small:b")

    periodic: Controller[ConfigMap] = Controller(ConfigMap, label_selector="periodic")

    @periodic.reconcile(every=0.05)
    def tick(cm: ConfigMap) -> None:
        calls.hit(f"tick:{cm.name}")

    harness.run(periodic, name="periodic")
    api.create({"metadata": {"name": "p", "labels": {"periodic": "yes"}}})
    assert calls.reached("tick:p", 3)  # requeued without any event
