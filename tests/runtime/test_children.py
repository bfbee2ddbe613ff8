"""`ctx.ensure` children, owner-triggered passes and `owns(Kind, prune=True)` pruning."""

from __future__ import annotations

from typing import Any

import pytest
from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config, Conflict
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.children import prune_children
from cloudcoil_sync.controller._internal.context import Context, Request
from cloudcoil_sync.controller._internal.store import Store
from cloudcoil_sync.controller._internal.types import ResourceKey
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness, Widget, conditions, create_widget, stored


def children_of(kube: Emulator, parent: str) -> dict[str, dict[str, Any]]:
    found = {}
    for obj in kube.list_objects("", "configmaps", "default"):
        if obj["metadata"]["name"].startswith(f"{parent}-"):
            found[obj["metadata"]["name"]] = obj
    return found


def parent_controller(calls: Calls, *, prune: bool) -> Controller[Widget]:
    controller: Controller[Widget] = Controller(Widget)
    controller.owns(ConfigMap, prune=prune)

    @controller.reconcile()
    def children(w: Widget, ctx: Context[Widget]) -> None:
        calls.hit(w.name or "")
        size = w.spec.size if w.spec else 0
        for i in range(size):
            ctx.ensure(
                ConfigMap(
                    metadata=ObjectMeta(name=f"{w.name}-{i}", labels={"parent": w.name or ""}),
                    data={"index": str(i), "size": str(size)},
                )
            )

    return controller


def test_ensure_creates_and_updates_controlled_children(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    runtime = harness.run(parent_controller(calls, prune=False), name="parents")
    parent = create_widget(widgets, "w1", size=2)
    assert kube_emulator.wait_for(lambda: len(children_of(kube_emulator, "w1")) == 2, timeout=10)
    child = children_of(kube_emulator, "w1")["w1-0"]
    (reference,) = child["metadata"]["ownerReferences"]
    assert reference == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w1",
        "uid": parent["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert child["data"] == {"index": "0", "size": "2"}
    assert runtime.queue.join(10)

    # A child edited by someone else is put back (the child event enqueues its owner).
    api = widgets.client(ConfigMap).raw
    api.merge_patch("w1-0", {"data": {"index": "tampered", "extra": "kept"}})
    assert kube_emulator.wait_for(
        lambda: (
            children_of(kube_emulator, "w1")["w1-0"]["data"]
            == {"index": "0", "size": "2", "extra": "kept"}
        ),
        timeout=10,
    )
    # A deleted child is recreated.
    old_uid = children_of(kube_emulator, "w1")["w1-1"]["metadata"]["uid"]
    api.delete("w1-1")
    assert kube_emulator.wait_for(
        lambda: (
            (children_of(kube_emulator, "w1").get("w1-1") or {}).get("metadata", {}).get("uid")
            not in (None, old_uid)
        ),
        timeout=10,
    )
    # A bigger parent gets more children; without prune=True nothing is deleted.
    widgets.client(Widget).raw.merge_patch("w1", {"spec": {"size": 3}})
    assert kube_emulator.wait_for(lambda: len(children_of(kube_emulator, "w1")) == 3, timeout=10)
    widgets.client(Widget).raw.merge_patch("w1", {"spec": {"size": 1}})
    assert kube_emulator.wait_for(
        lambda: children_of(kube_emulator, "w1")["w1-0"]["data"]["size"] == "1", timeout=10
    )
    assert runtime.queue.join(10)
    assert len(children_of(kube_emulator, "w1")) == 3


def test_ensure_refuses_to_adopt_unrelated_objects(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    runtime = harness.run(parent_controller(calls, prune=True), name="careful")
    widgets.client(ConfigMap).raw.create({"metadata": {"name": "w2-0"}, "data": {"mine": "yes"}})
    create_widget(widgets, "w2", size=1)

    def refused() -> bool:
        ready = conditions(stored(kube_emulator, "example.com", "widgets", "w2")).get("Ready")
        return (ready or {}).get("reason") == "TerminalError"

    assert kube_emulator.wait_for(refused, timeout=10)
    assert runtime.queue.join(10)
    unrelated = children_of(kube_emulator, "w2")["w2-0"]
    assert unrelated["data"] == {"mine": "yes"}
    assert "ownerReferences" not in unrelated["metadata"]
    assert calls["w2"] == 1  # terminal: not retried


def test_prune_deletes_children_a_successful_pass_did_not_ensure(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    runtime = harness.run(parent_controller(calls, prune=True), name="pruner")
    create_widget(widgets, "w3", size=3)
    widgets.client(ConfigMap).raw.create({"metadata": {"name": "w3-unrelated"}})
    assert kube_emulator.wait_for(lambda: len(children_of(kube_emulator, "w3")) == 4, timeout=10)
    assert runtime.queue.join(10)
    kube_emulator.clear_log()
    widgets.client(Widget).raw.merge_patch("w3", {"spec": {"size": 1}})
    assert kube_emulator.wait_for(
        lambda: sorted(children_of(kube_emulator, "w3")) == ["w3-0", "w3-unrelated"], timeout=10
    )
    assert runtime.queue.join(10)
    deletes = sorted(e.path for e in kube_emulator.request_log if e.method == "DELETE")
    assert deletes == [
        "/api/v1/namespaces/default/configmaps/w3-1",
        "/api/v1/namespaces/default/configmaps/w3-2",
    ]


class _Services:
    """Pass services over a hand-filled cache (to make it stale on purpose)."""

    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store

    def cached(self, resource: type[Any], *, namespace: str | None = None) -> Any:
        raise NotImplementedError

    def informer_for(self, resource: type[Any]) -> Any:
        return self


def test_prune_preconditions_spare_a_child_changed_since_it_was_cached(
    kube_emulator: Emulator, widgets: Config
) -> None:
    parent = Widget.model_validate(create_widget(widgets, "w4"))
    assert parent.metadata is not None
    reference = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w4",
        "uid": parent.metadata.uid,
        "controller": True,
    }
    api = widgets.client(ConfigMap).raw
    cached = api.create({"metadata": {"name": "w4-old", "ownerReferences": [reference]}})
    store = Store()
    store.put(cached)
    api.merge_patch("w4-old", {"data": {"changed": "after caching"}})
    request: Request[Widget] = Request(
        ResourceKey("w4", "default"),
        parent,
        _Services(widgets, store),
    )
    with pytest.raises(Conflict):
        prune_children(request, (ConfigMap,))
    assert "w4-old" in children_of(kube_emulator, "w4")
    store.put(api.get("w4-old"))  # the cache caught up: now it goes
    assert prune_children(request, (ConfigMap,)) == 1
    assert children_of(kube_emulator, "w4") == {}


def test_cluster_scoped_parent_owns_children_across_namespaces(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    from cloudcoil.models.kubernetes.core.v1 import Namespace

    calls = Calls()
    controller: Controller[Namespace] = Controller(Namespace, label_selector="team")
    controller.owns(ConfigMap)

    @controller.reconcile()
    def settings(ns: Namespace, ctx: Context[Namespace]) -> None:
        calls.hit(ns.name or "")
        ctx.ensure(ConfigMap(metadata=ObjectMeta(name="settings", namespace=ns.name)))

    runtime = harness.run(controller, name="namespaces")
    kube_config.client(Namespace).raw.create(
        {"metadata": {"name": "team-a", "labels": {"team": "a"}}}
    )

    def child() -> dict[str, Any]:
        return kube_emulator.get_object("", "configmaps", "team-a", "settings") or {}

    assert kube_emulator.wait_for(lambda: bool(child()), timeout=10)
    assert child()["metadata"]["ownerReferences"][0]["kind"] == "Namespace"
    first_uid = child()["metadata"]["uid"]
    kube_config.client(ConfigMap).raw.delete("settings", namespace="team-a")
    assert kube_emulator.wait_for(
        lambda: child().get("metadata", {}).get("uid") not in (None, first_uid), timeout=10
    )
    assert runtime.queue.join(10)
    assert calls["team-a"] >= 2
