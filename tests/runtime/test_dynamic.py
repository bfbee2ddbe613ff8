"""Watches started and stopped while the controller runs, declared up front for RBAC."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace, Secret
from waiting import wait_until

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, InformerNotSynced, ResourceKey

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


def _secrets_feed_configmaps(controller: Controller[ConfigMap], calls: Calls) -> None:
    """A ConfigMap controller whose dynamic Secret watch maps a Secret to the ConfigMap it
    names in its own namespace."""

    @controller.reconcile()
    def reconcile(cm: ConfigMap) -> None:
        calls.hit(f"{cm.namespace}/{cm.name}")

    controller.may_watch(Secret)


def _feeds(secret: Secret) -> Iterable[ResourceKey]:
    metadata = secret.metadata
    assert metadata is not None
    yield ResourceKey((metadata.labels or {})["feeds"], metadata.namespace)


def _create(
    config: Config, kind: type[ConfigMap] | type[Secret], namespace: str, name: str
) -> None:
    labels = {"feeds": "x"} if kind is Secret else {}
    config.client(kind).raw.create(
        {"metadata": {"name": name, "namespace": namespace, "labels": labels}}
    )


def test_a_dynamic_watch_follows_the_listed_namespaces(
    kube_config: Config, harness: Harness
) -> None:
    for name in ("i41d-a", "i41d-b", "i41d-c"):
        kube_config.client(Namespace).raw.create({"metadata": {"name": name}})
        _create(kube_config, ConfigMap, name, "x")
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap, events=False)
    controller.watch_namespaces("i41d-a", "i41d-b")
    _secrets_feed_configmaps(controller, calls)
    runtime = harness.run(controller, name="dyn-listed")
    assert calls.reached("i41d-a/x") and calls.reached("i41d-b/x") and runtime.queue.join(10)
    _create(kube_config, Secret, "i41d-a", "before")  # exists when the watch starts

    controller.start_watching(Secret, mapper=_feeds, label_selector="feeds")
    assert calls.reached("i41d-a/x", 2)  # the first list of i41d-a maps it
    _create(kube_config, Secret, "i41d-b", "after")
    _create(kube_config, Secret, "i41d-c", "outside")
    assert calls.reached("i41d-b/x", 2) and runtime.queue.join(10)
    assert "i41d-c/x" not in calls.counts
    cached = controller.cached(Secret).list(all_namespaces=True)
    assert sorted(f"{s.namespace}/{s.name}" for s in cached) == ["i41d-a/before", "i41d-b/after"]

    controller.stop_watching(Secret)
    count = calls["i41d-a/x"]
    _create(kube_config, Secret, "i41d-a", "later")
    controller.enqueue(ResourceKey("x", "i41d-a"))  # a pass after the create, to wait on
    assert calls.reached("i41d-a/x", count + 1) and runtime.queue.join(10)
    assert calls["i41d-a/x"] == count + 1 and harness.fatal == []


def test_a_dynamic_watch_follows_the_selected_namespaces(
    kube_config: Config, harness: Harness
) -> None:
    namespaces = kube_config.client(Namespace).raw
    namespaces.create({"metadata": {"name": "i41d-s1", "labels": {"team": "d"}}})
    namespaces.create({"metadata": {"name": "i41d-s2"}})
    for name in ("i41d-s1", "i41d-s2"):
        _create(kube_config, ConfigMap, name, "x")
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap, events=False)
    controller.watch_namespaces(selector="team=d")
    _secrets_feed_configmaps(controller, calls)
    runtime = harness.run(controller, name="dyn-selected")
    assert calls.reached("i41d-s1/x") and runtime.queue.join(10)

    controller.start_watching(Secret, mapper=_feeds)
    _create(kube_config, Secret, "i41d-s1", "a")
    _create(kube_config, Secret, "i41d-s2", "b")  # not selected (yet)
    assert calls.reached("i41d-s1/x", 2) and runtime.queue.join(10)
    assert "i41d-s2/x" not in calls.counts
    namespaces.merge_patch("i41d-s2", {"metadata": {"labels": {"team": "d"}}})  # joins
    assert calls.reached("i41d-s2/x")  # the ConfigMap informer's first list
    cached = controller.cached(Secret)

    def names() -> list[str] | None:
        try:
            return sorted(s.name or "" for s in cached.list(all_namespaces=True))
        except InformerNotSynced:  # the joined namespace's first list is not in yet
            return None

    assert wait_until(lambda: names() == ["a", "b"])  # the Secret watch joined it too
    assert runtime.queue.join(10)
    count = calls["i41d-s2/x"]  # its first passes may have coalesced: count from here
    _create(kube_config, Secret, "i41d-s2", "c")
    assert calls.reached("i41d-s2/x", count + 1)  # a Secret there now maps to a pass

    controller.stop_watching(Secret)
    selection = runtime._selection
    assert selection is not None and selection._sets == [runtime.caches.informers[ConfigMap]]
    assert harness.fatal == []
