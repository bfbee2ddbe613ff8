"""A controller scoped to a list of namespaces: an informer per namespace, Roles, a log line."""

from __future__ import annotations

import logging

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace, Secret
from waiting import wait_until

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Context, Controller

from .conftest import Calls, Harness


def test_a_controller_watches_only_its_listed_namespaces(
    kube_config: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for name in ("i41-a", "i41-b", "i41-c"):
        kube_config.client(Namespace).raw.create({"metadata": {"name": name}})
    calls = Calls()
    seen: dict[str, list[str]] = {}
    controller: Controller[ConfigMap] = Controller(ConfigMap, events=False)
    controller.watch_namespaces("i41-a", "i41-b").owns(Secret)

    @controller.reconcile()
    def reconcile(cm: ConfigMap, ctx: Context[ConfigMap]) -> None:
        seen[f"{cm.namespace}/{cm.name}"] = [c.name or "" for c in ctx.cached(ConfigMap).list()]
        calls.hit(f"{cm.namespace}/{cm.name}")

    runtime = harness.run(controller, name="scoped")
    api = kube_config.client(ConfigMap).raw
    for namespace in ("i41-a", "i41-b", "i41-c"):
        api.create({"metadata": {"name": "x", "namespace": namespace}})
    assert calls.reached("i41-a/x") and calls.reached("i41-b/x")
    assert runtime.queue.join(10)
    assert "i41-c/x" not in calls.counts
    assert seen["i41-a/x"] == ["x"]  # a pass reads its own namespace
    assert sorted(f"{c.namespace}/{c.name}" for c in controller.cached(ConfigMap).list()) == [
        "i41-a/x",
        "i41-b/x",
    ]
    assert controller.cached(ConfigMap).get("x", namespace="i41-c") is None
    assert len(harness.pool) == 4  # (configmaps, secrets) x (i41-a, i41-b)
    lines = [r.getMessage() for r in caplog.records]
    assert (
        "Controller scoped watches ConfigMap only in namespaces i41-a, i41-b (not the others)"
        in lines
    )


def test_listed_namespaces_get_roles_and_no_cluster_role() -> None:
    app = Application("scoped", namespace="ops")
    controller = app.controller(ConfigMap, events=False)
    controller.watch_namespaces("team-a", "team-b")
    controller.reconcile()(lambda cm: None)
    documents = app.manifests(image="example/scoped:v1")
    roles = {
        (d["kind"], d["metadata"].get("namespace")): d
        for d in documents
        if d["kind"] in ("Role", "ClusterRole")
    }
    for namespace in ("team-a", "team-b"):
        rules = roles[("Role", namespace)]["rules"]
        assert any("configmaps" in rule["resources"] for rule in rules)
    assert not any(
        "configmaps" in rule["resources"]
        for (kind, _), role in roles.items()
        if kind == "ClusterRole"
        for rule in role["rules"]
    )


def test_watch_namespaces_is_checked() -> None:
    with pytest.raises(ValueError, match="at least one namespace"):
        Controller(ConfigMap).watch_namespaces()
    with pytest.raises(ValueError, match="excludes namespace= and all_namespaces="):
        Controller(ConfigMap, namespace="x").watch_namespaces("a")
    with pytest.raises(ValueError, match="Controller namespace"):
        Controller(ConfigMap).watch_namespaces("Not_A_Label")


def test_namespaces_join_and_leave_by_label_while_running(
    kube_config: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    namespaces = kube_config.client(Namespace).raw
    namespaces.create({"metadata": {"name": "i41-s1", "labels": {"team": "a"}}})
    namespaces.create({"metadata": {"name": "i41-s2"}})
    api = kube_config.client(ConfigMap).raw
    for namespace in ("i41-s1", "i41-s2"):
        api.create({"metadata": {"name": "x", "namespace": namespace}})
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap, events=False)
    controller.watch_namespaces(selector="team=a")
    controller.index(ConfigMap, "name", lambda cm: cm.name)

    @controller.reconcile()
    def reconcile(cm: ConfigMap) -> None:
        calls.hit(f"{cm.namespace}/{cm.name}")

    runtime = harness.run(controller, name="selected")
    assert calls.reached("i41-s1/x") and runtime.queue.join(10)
    assert "i41-s2/x" not in calls.counts
    namespaces.merge_patch("i41-s2", {"metadata": {"labels": {"team": "a"}}})  # joins
    assert calls.reached("i41-s2/x")
    cached = controller.cached(ConfigMap)
    assert wait_until(lambda: len(cached.keys(index="name", value="x")) == 2)
    namespaces.merge_patch("i41-s1", {"metadata": {"labels": {"team": None}}})  # leaves
    selection = runtime._selection
    assert selection is not None
    assert wait_until(lambda: selection.left == ["i41-s1"])
    assert cached.get("x", namespace="i41-s1") is None  # its cache is dropped
    api.create({"metadata": {"name": "y", "namespace": "i41-s1"}})
    api.create({"metadata": {"name": "z", "namespace": "i41-s2"}})
    assert calls.reached("i41-s2/z") and runtime.queue.join(10)
    assert "i41-s1/y" not in calls.counts and harness.fatal == []
    lines = [r.getMessage() for r in caplog.records]
    assert (
        "Controller selected watches ConfigMap in the namespaces labelled team=a, joining and "
        "leaving while running (RBAC: a ClusterRole)" in lines
    )


def test_a_namespace_selector_grants_a_cluster_role() -> None:
    app = Application("selected", namespace="ops")
    controller = app.controller(ConfigMap, events=False)
    controller.watch_namespaces(selector="team=a")
    controller.reconcile()(lambda cm: None)
    documents = app.manifests(image="example/selected:v1")
    cluster = [d for d in documents if d["kind"] == "ClusterRole"]
    resources = {r for role in cluster for rule in role["rules"] for r in rule["resources"]}
    assert {"configmaps", "namespaces"} <= resources
    assert not any(
        "configmaps" in rule["resources"]
        for d in documents
        if d["kind"] == "Role"
        for rule in d["rules"]
    )
