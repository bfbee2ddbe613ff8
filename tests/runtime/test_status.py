"""Stages, conditions, status through /status, failure reports, Events and conflicts."""

from __future__ import annotations

import threading
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, ResourceKey, Wait
from cloudcoil_sync.controller._internal.context import Context
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness, Widget, conditions, create_widget, stored


def widget(kube: Emulator, name: str) -> dict[str, Any]:
    return stored(kube, "example.com", "widgets", name)


def events(kube: Emulator) -> list[dict[str, Any]]:
    return kube.list_objects("events.k8s.io", "events", "default")


def staged_controller(calls: Calls) -> Controller[Widget]:
    controller: Controller[Widget] = Controller(Widget)

    @controller.stage(condition="ConfigurationReady")
    def configure(w: Widget, ctx: Context[Widget]) -> None:
        calls.hit(w.name or "")
        ctx.set_status(phase="Configured")
        ctx.condition("Configured", True, reason="Done")

    @controller.stage(condition="BackendReady", depends=configure)
    def backend(w: Widget) -> None:
        if w.spec is None or w.spec.size < 2:
            raise Wait("Scaling", "size must reach 2", after=30)

    return controller


def test_stages_report_conditions_through_the_status_subresource(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    runtime = harness.run(staged_controller(calls), name="stages")
    kube_emulator.clear_log()
    create_widget(widgets, "w1", size=1)

    def waiting() -> bool:
        found = conditions(widget(kube_emulator, "w1"))
        return found.get("Ready", {}).get("reason") == "Scaling"

    assert kube_emulator.wait_for(waiting, timeout=10)
    obj = widget(kube_emulator, "w1")
    found = conditions(obj)
    assert found["ConfigurationReady"]["status"] == "True"
    assert found["ConfigurationReady"]["reason"] == "Reconciled"
    assert found["ConfigurationReady"]["message"] == "configure is up to date"
    assert found["BackendReady"]["status"] == "False"
    assert found["BackendReady"]["message"] == "size must reach 2"
    assert found["Ready"]["status"] == "False"
    assert found["Configured"]["reason"] == "Done"
    assert obj["status"]["phase"] == "Configured"
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]

    def patches() -> list[str]:
        return [e.path for e in kube_emulator.request_log if e.method == "PATCH"]

    assert kube_emulator.wait_for(lambda: bool(patches()))
    assert all(path.endswith("/w1/status") for path in patches())

    widgets.client(Widget).raw.merge_patch("w1", {"spec": {"size": 2}})

    def ready() -> bool:
        return conditions(widget(kube_emulator, "w1")).get("Ready", {}).get("status") == "True"

    assert kube_emulator.wait_for(ready, timeout=10)
    assert runtime.queue.join(10)
    reasons = {(e["reason"], e["action"], e["type"]) for e in events(kube_emulator)}
    assert ("Reconciled", "configure", "Normal") in reasons
    assert ("Scaling", "backend", "Normal") in reasons  # the wait, on its transition
    assert ("Reconciled", "backend", "Normal") in reasons


def test_status_only_updates_do_not_trigger_passes(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget)

    @controller.stage(condition="ConfigurationReady")
    def configure(w: Widget) -> None:
        calls.hit(w.name or "")

    runtime = harness.run(controller, name="quiet")
    create_widget(widgets, "w1")
    assert kube_emulator.wait_for(
        lambda: conditions(widget(kube_emulator, "w1")).get("Ready", {}).get("status") == "True"
    )
    assert runtime.queue.join(10)
    assert calls["w1"] == 1  # our own status write did not come back as a pass
    api = widgets.client(Widget).raw
    api.merge_patch("w1", {"status": {"phase": "external"}}, subresource="status")
    api.merge_patch("w1", {"metadata": {"labels": {"touched": "yes"}}})
    assert calls.reached("w1", 2)
    assert runtime.queue.join(10)
    assert calls["w1"] == 2


def test_failure_reports_only_status_and_a_warning_event(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget)

    @controller.stage(condition="ConfigurationReady")
    def configure(w: Widget) -> None:
        calls.hit(w.name or "")
        assert w.metadata is not None
        w.metadata.labels = {"half": "done"}  # never persisted by a failing pass
        raise RuntimeError("secret-token-123 rejected")

    @controller.stage(condition="BackendReady", depends=configure)
    def backend(w: Widget) -> None:
        pass

    runtime = harness.run(controller, name="failing")
    create_widget(widgets, "w1")

    def failed() -> bool:
        found = conditions(widget(kube_emulator, "w1"))
        return found.get("Ready", {}).get("reason") == "ReconcileFailed"

    assert kube_emulator.wait_for(failed, timeout=10)
    obj = widget(kube_emulator, "w1")
    found = conditions(obj)
    message = "ConfigurationReady failed (RuntimeError); see controller logs"
    assert found["ConfigurationReady"]["message"] == message
    assert found["BackendReady"]["status"] == "Unknown"
    assert found["BackendReady"]["reason"] == "DependencyNotReady"
    assert "labels" not in obj["metadata"]
    assert calls.reached("w1", 2)  # retried with backoff
    assert kube_emulator.wait_for(
        lambda: any(e["type"] == "Warning" for e in events(kube_emulator)), timeout=10
    )
    warning = next(e for e in events(kube_emulator) if e["type"] == "Warning")
    assert warning["reason"] == "ReconcileFailed"
    assert "secret" not in warning["note"]
    assert runtime.status.errors >= 1


def test_events_are_posted_once_per_interval(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def note(cm: ConfigMap, ctx: Context[ConfigMap]) -> None:
        calls.hit(cm.name or "")
        ctx.event("Observed", f"saw version {cm.metadata.resource_version if cm.metadata else ''}")

    runtime = harness.run(controller, name="events")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "x"}})
    assert calls.reached("x")
    api.merge_patch("x", {"data": {"a": "b"}})
    assert calls.reached("x", 2)
    assert runtime.queue.join(10)
    posted = [e for e in events(kube_emulator) if e["regarding"]["name"] == "x"]
    # One Observed and one Reconciled Event, each deduplicated on the second pass.
    assert sorted(e["reason"] for e in posted) == ["Observed", "Reconciled"]
    observed = next(e for e in posted if e["reason"] == "Observed")
    assert observed["apiVersion"] == "events.k8s.io/v1"
    assert observed["reportingController"] == "cloudcoil/configmap"
    assert observed["regarding"]["kind"] == "ConfigMap"
    assert observed["regarding"]["uid"]


def test_guarded_write_retries_against_the_newer_object(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    read = threading.Event()
    concurrent_done = threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def mark(cm: ConfigMap) -> ConfigMap:
        if calls.hit(cm.name or "") == 1:
            read.set()
            assert concurrent_done.wait(10)  # a concurrent writer changes it meanwhile
        cm.data = {**(cm.data or {}), "managed": "yes"}
        return cm

    runtime = harness.run(controller, name="conflicts")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "x"}, "data": {"a": "1"}})
    assert read.wait(10)
    api.merge_patch("x", {"data": {"concurrent": "kept"}})
    concurrent_done.set()

    def converged() -> bool:
        data = (kube_emulator.get_object("", "configmaps", "default", "x") or {}).get("data")
        return data == {"a": "1", "concurrent": "kept", "managed": "yes"}

    assert kube_emulator.wait_for(converged, timeout=10)
    assert runtime.queue.join(10)
    assert calls["x"] >= 2

    # An injected 409 on the write is retried the same way.
    kube_emulator.faults.inject(409, count=1, method="PATCH", path="/configmaps/y$")
    api.create({"metadata": {"name": "y"}})
    assert kube_emulator.wait_for(
        lambda: (
            (kube_emulator.get_object("", "configmaps", "default", "y") or {})
            .get("data", {})
            .get("managed")
            == "yes"
        ),
        timeout=10,
    )
    assert runtime.queue.join(10)
    assert runtime.queue.num_retries(ResourceKey("y", "default")) == 0
    assert runtime.status.errors >= 2
