"""Watches started and stopped while the controller runs, declared up front for RBAC."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret
from waiting import wait_until

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, ResourceKey

from .conftest import Calls, Harness, Widget, create_widget


def test_a_watch_started_and_stopped_while_running(widgets: Config, harness: Harness) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget, events=False)
    controller.may_watch(ConfigMap)

    @controller.reconcile()
    def reconcile(w: Widget) -> None:
        calls.hit(w.name or "")

    def feeds(cm: ConfigMap) -> Iterable[ResourceKey]:
        yield ResourceKey(((cm.metadata and cm.metadata.labels) or {})["feeds"], "default")

    with pytest.raises(RuntimeError, match="need a running controller"):
        controller.start_watching(ConfigMap, mapper=feeds)
    runtime = harness.run(controller, name="dynamic")
    create_widget(widgets, "w1")
    assert calls.reached("w1") and runtime.queue.join(10)
    api = widgets.client(ConfigMap).raw
    api.create({"metadata": {"name": "before", "labels": {"feeds": "w1"}}})
    assert runtime.queue.join(10) and calls["w1"] == 1  # not watched yet
    with pytest.raises(ValueError, match="ConfigMap is not watched by this controller"):
        runtime.cached(ConfigMap)

    controller.start_watching(ConfigMap, mapper=feeds, label_selector="feeds")
    assert calls.reached("w1", 2)  # its first list maps the existing ConfigMap
    assert wait_until(lambda: runtime.caches.informers[ConfigMap].synced)
    assert [c.name for c in controller.cached(ConfigMap).list()] == ["before"]
    api.create({"metadata": {"name": "after", "labels": {"feeds": "w1"}}})
    assert calls.reached("w1", 3)
    with pytest.raises(ValueError, match="already watched"):
        controller.start_watching(ConfigMap, mapper=feeds)

    controller.stop_watching(ConfigMap)
    with pytest.raises(ValueError, match="ConfigMap is not watched by this controller"):
        runtime.cached(ConfigMap)
    assert runtime.queue.join(10)
    count = calls["w1"]
    api.create({"metadata": {"name": "later", "labels": {"feeds": "w1"}}})
    controller.enqueue(ResourceKey("w1", "default"))  # a pass after the create, to wait on
    assert calls.reached("w1", count + 1) and runtime.queue.join(10)
    assert calls["w1"] == count + 1  # the ConfigMap created after stop_watching mapped to none
    with pytest.raises(ValueError, match="not declared with may_watch"):
        controller.start_watching(Secret, mapper=feeds)
    assert harness.fatal == []


def test_may_watch_kinds_get_read_access() -> None:
    app = Application("dynamic", namespace="ops")
    controller = app.controller(ConfigMap, events=False).may_watch(Secret)
    controller.reconcile()(lambda cm: None)
    rules = [
        rule
        for d in app.manifests(image="example/dynamic:v1")
        if d["kind"] in ("Role", "ClusterRole")
        for rule in d["rules"]
        if "secrets" in rule["resources"]
    ]
    assert rules and {"get", "list", "watch"} <= set(rules[0]["verbs"])
