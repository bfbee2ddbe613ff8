"""Deletion notices without a finalizer: the last known object, at most once."""

from __future__ import annotations

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller

from .conftest import Calls, Harness, Widget, create_widget


def test_a_deleted_handler_gets_the_last_known_object_once(
    widgets: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()
    last: dict[str, Widget] = {}
    controller: Controller[Widget] = Controller(Widget, events=False)

    @controller.reconcile()
    def reconcile(w: Widget) -> None:
        calls.hit(f"pass:{w.name}")

    @controller.deleted()
    def gone(w: Widget) -> None:
        if w.name == "broken":
            raise RuntimeError("cleanup failed for broken")
        last[w.name or ""] = w
        # Writes are admitted (fenced like a pass's, under the term's fence).
        widgets.client(ConfigMap).raw.create({"metadata": {"name": f"gone-{w.name}"}})
        calls.hit(f"deleted:{w.name}")

    runtime = harness.run(controller, name="deletions")
    created = create_widget(widgets, "w1", size=3)
    create_widget(widgets, "broken")
    assert calls.reached("pass:w1") and calls.reached("pass:broken")
    widgets.client(Widget).raw.merge_patch("w1", {"metadata": {"labels": {"last": "yes"}}})
    assert calls.reached("pass:w1", 2)
    api = widgets.client(Widget).raw
    api.delete("broken")
    api.delete("w1")
    assert calls.reached("deleted:w1")
    seen = last["w1"]
    assert seen.metadata is not None and seen.spec is not None
    assert seen.metadata.uid == created["metadata"]["uid"] and seen.spec.size == 3
    assert (seen.metadata.labels or {}) == {"last": "yes"}  # the last known version
    assert widgets.client(ConfigMap).raw.get("gone-w1")["metadata"]["name"] == "gone-w1"
    assert any("cleanup failed for broken" in str(r.exc_info) for r in caplog.records if r.exc_info)
    assert runtime.deletions is not None and runtime.deletions.delivered == 1
    assert runtime.queue.join(10)
    assert calls["deleted:w1"] == 1 and "deleted:broken" not in calls.counts

    runtime.stop(timeout=5)  # the pooled informer goes on: its later notices are dropped
    create_widget(widgets, "late")
    api.delete("late")
    assert wait_until(lambda: runtime.deletions is not None and runtime.deletions.dropped >= 1)
    assert "deleted:late" not in calls.counts


def test_deleted_registration_is_checked() -> None:
    controller: Controller[Widget] = Controller(Widget)
    with pytest.raises(TypeError, match="with parentheses"):
        controller.deleted(lambda w: None)

    @controller.deleted()
    def first(w: Widget) -> None: ...

    with pytest.raises(ValueError, match="already registered"):
        controller.deleted()(lambda w: None)
