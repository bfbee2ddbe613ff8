"""The live finalizer flow of `@controller.finalize(key)` and the mutate helpers."""

from __future__ import annotations

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config, Invalid
from cloudcoil_sync.controller import Controller, Wait
from cloudcoil_sync.controller._internal.mutations import ensure_finalizer, mutate, remove_finalizer
from cloudcoil_sync.controller._internal.types import TerminalError
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness, Widget, conditions, create_widget, stored

KEY = "example.com/cleanup"


def test_finalizer_is_added_run_on_deletion_and_removed(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget)

    @controller.reconcile()
    def reconcile(w: Widget) -> None:
        assert w.metadata is not None and KEY in (w.metadata.finalizers or [])
        calls.hit("reconcile")

    @controller.finalize(KEY)
    def cleanup(w: Widget) -> None:
        if calls.hit("cleanup") == 1:
            raise Wait("Draining", "backend still has data", after=0.05)

    runtime = harness.run(controller, name="finalizing")
    create_widget(widgets, "w1")

    def widget() -> dict[str, object]:
        return stored(kube_emulator, "example.com", "widgets", "w1")

    assert kube_emulator.wait_for(
        lambda: conditions(widget()).get("Ready", {}).get("status") == "True", timeout=10
    )
    assert widget()["metadata"]["finalizers"] == [KEY]  # type: ignore[index]
    assert calls["reconcile"] >= 1 and calls["cleanup"] == 0
    widgets.client(Widget).raw.delete("w1")
    assert kube_emulator.wait_for(lambda: not widget(), timeout=10)
    assert calls["cleanup"] == 2  # waited once, then succeeded
    assert runtime.queue.join(10)
    assert runtime.status.errors == 0


def test_mutate_helpers_patch_live_objects_with_guards(kube_config: Config) -> None:
    api = kube_config.client(ConfigMap)
    created = api.create(ConfigMap.model_validate({"metadata": {"name": "m"}}))
    with_finalizer = ensure_finalizer(created, KEY, config=kube_config)
    assert with_finalizer.metadata is not None
    assert with_finalizer.metadata.finalizers == [KEY]
    again = ensure_finalizer(created, KEY, config=kube_config)  # no change, no write
    assert again.resource_version == with_finalizer.resource_version

    def label(cm: ConfigMap) -> None:
        assert cm.metadata is not None
        cm.metadata.labels = {"a": "b"}

    labelled = mutate(created, label, config=kube_config)
    assert labelled.metadata is not None and labelled.metadata.labels == {"a": "b"}
    with pytest.raises(TypeError):
        mutate(created, lambda cm: cm, config=kube_config)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        mutate(created, label)  # no pass on this thread, no config
    api.delete("m")
    deleting = api.get("m")
    with pytest.raises(TerminalError):
        ensure_finalizer(deleting, "example.com/other", config=kube_config)
    remove_finalizer(deleting, KEY, config=kube_config)
    with pytest.raises(Exception) as gone:
        api.get("m")
    assert type(gone.value).__name__ == "NotFound"


def test_mutate_never_overwrites_a_concurrent_change(kube_config: Config) -> None:
    api = kube_config.client(ConfigMap)
    created = api.create(ConfigMap.model_validate({"metadata": {"name": "c"}}))

    def racing(cm: ConfigMap) -> None:
        api.raw.merge_patch("c", {"data": {"other": "writer"}})  # lands between GET and PATCH
        cm.data = {"mine": "yes"}

    with pytest.raises(Invalid):
        mutate(created, racing, config=kube_config)
    assert api.get("c").data == {"other": "writer"}
