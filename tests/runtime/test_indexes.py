"""User indexes on the shared cache: declared, kept with every event, read by mappers."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, ResourceKey
from cloudcoil_sync.controller._internal.context import Context
from cloudcoil_sync.controller._internal.store import Store

from .conftest import Calls, Harness, Widget


def config_of(widget: Widget) -> str | None:
    labels = (widget.metadata and widget.metadata.labels) or {}
    name = labels.get("config")
    return f"{widget.namespace}/{name}" if name else None


def widget(config: Config, name: str, uses: str | None) -> None:
    labels = {"config": uses} if uses else {}
    config.client(Widget).raw.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": name, "labels": labels},
            "spec": {"size": 1},
        }
    )


def test_a_mapper_finds_referencing_primaries_through_an_index(
    widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    listed: dict[str, list[str]] = {}
    controller: Controller[Widget] = Controller(Widget, events=False)
    controller.index(Widget, "config", config_of)

    @controller.watch(ConfigMap)
    def users(cm: ConfigMap) -> Iterable[ResourceKey]:
        return controller.cached(Widget).keys(index="config", value=f"{cm.namespace}/{cm.name}")

    @controller.reconcile()
    def reconcile(w: Widget, ctx: Context[Widget]) -> None:
        found = ctx.cached(Widget).list(index="config", value="default/a")
        listed[w.name or ""] = sorted(f.name or "" for f in found)
        calls.hit(w.name or "")

    runtime = harness.run(controller, name="indexed")
    for name, uses in (("w1", "a"), ("w2", "a"), ("w3", "b"), ("w4", None)):
        widget(widgets, name, uses)
    assert all(calls.reached(name) for name in ("w1", "w2", "w3", "w4"))
    assert runtime.queue.join(10)
    widgets.client(ConfigMap).raw.create({"metadata": {"name": "a"}})
    assert calls.reached("w1", 2) and calls.reached("w2", 2)
    assert runtime.queue.join(10)
    assert calls["w3"] == 1 and calls["w4"] == 1  # the index named only w1 and w2
    assert listed["w1"] == ["w1", "w2"]

    cached = controller.cached(Widget)
    api = widgets.client(Widget).raw
    api.merge_patch("w2", {"metadata": {"labels": {"config": "b"}}})
    assert wait_until(
        lambda: (
            cached.keys(index="config", value="default/b")
            == [
                ResourceKey("w2", "default"),
                ResourceKey("w3", "default"),
            ]
        )
    )
    assert cached.keys(index="config", value="default/a") == [ResourceKey("w1", "default")]
    api.delete("w3")
    assert wait_until(
        lambda: cached.keys(index="config", value="default/b") == [ResourceKey("w2", "default")]
    )
    assert cached.keys(index="config", value="default/b", namespace="other") == []
    assert [w.name for w in cached.list(index="config", value="default/a")] == ["w1"]
    with pytest.raises(ValueError, match=r"no index named 'nope' \(declared: config\)"):
        cached.list(index="nope", value="x")
    with pytest.raises(ValueError, match="index and value together"):
        cached.list(index="config")
    assert harness.fatal == []


def test_an_index_function_that_raises_files_that_object_under_nothing(
    widgets: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget, events=False)

    @controller.index(Widget, "config")
    def picky(w: Widget) -> str | None:
        if w.name == "bad":
            raise LookupError("no config for bad")
        return config_of(w)

    @controller.reconcile()
    def reconcile(w: Widget) -> None:
        calls.hit(w.name or "")

    runtime = harness.run(controller, name="picky")
    widget(widgets, "bad", "a")
    widget(widgets, "good", "a")
    assert calls.reached("bad") and calls.reached("good")
    keys = controller.cached(Widget).keys(index="config", value="default/a")
    assert keys == [ResourceKey("good", "default")]
    assert runtime.ready and harness.fatal == []
    assert any("no config for bad" in str(r.exc_info) for r in caplog.records if r.exc_info)


def test_index_declarations_are_checked(widgets: Config, harness: Harness) -> None:
    controller: Controller[Widget] = Controller(Widget)
    with pytest.raises(TypeError, match="index expects a Resource class"):
        controller.index("Widget", "x", config_of)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty string"):
        controller.index(Widget, " ", config_of)
    controller.index(Widget, "config", config_of)
    with pytest.raises(ValueError, match="already declared"):
        controller.index(Widget, "config", config_of)
    controller.index(Secret, "type", lambda s: s.type)

    @controller.reconcile()
    def reconcile(w: Widget) -> None: ...

    with pytest.raises(ValueError, match="Secret is not watched by controller unwatched"):
        harness.runtime(controller, name="unwatched")


def test_controllers_sharing_an_informer_share_an_index_of_the_same_function(
    widgets: Config, harness: Harness
) -> None:
    def make(name: str, function: object) -> Controller[Widget]:
        controller: Controller[Widget] = Controller(Widget, events=False)
        controller.index(Widget, "config", function)  # type: ignore[arg-type]
        controller.reconcile()(lambda w: None)
        harness.runtime(controller, name=name)
        return controller

    make("one", config_of)
    make("two", config_of)
    with pytest.raises(ValueError, match="'config' is already defined on this cache"):
        make("three", lambda w: "other")


def _by_value(obj: dict[str, object]) -> list[str]:
    return [str(obj["v"])] if "v" in obj else []


def test_the_store_keeps_an_added_index_through_puts_removes_and_relists() -> None:
    store = Store()
    store.put({"metadata": {"name": "a"}, "v": 1})
    store.put({"metadata": {"name": "b"}, "v": 2})
    store.add_indexer("v", _by_value)
    store.add_indexer("v", _by_value)  # the same function again: no-op
    with pytest.raises(ValueError, match="already defined"):
        store.add_indexer("v", lambda obj: [])
    assert store.index_keys("v", "1") == [("", "a")]
    store.put({"metadata": {"name": "b"}, "v": 1})
    assert store.index_keys("v", "1") == [("", "a"), ("", "b")]
    assert store.index_keys("v", "2") == []
    store.remove(("", "a"))
    assert store.index_keys("v", "1") == [("", "b")]
    store.replace([{"metadata": {"name": "c"}, "v": 1}, {"metadata": {"name": "b"}, "v": 3}])
    assert store.index_keys("v", "1") == [("", "c")]
    assert [o["metadata"] for o in store.by_index("v", "3")] == [{"name": "b"}]
    assert store.indexes() == ["v"]


def test_an_object_that_no_longer_yields_an_index_value_leaves_the_index() -> None:
    store = Store()
    store.add_indexer("v", _by_value)
    store.put({"metadata": {"name": "a"}, "v": 1})
    store.put({"metadata": {"name": "a"}})  # no value now: filed under nothing
    assert store.index_keys("v", "1") == []
    store.put({"metadata": {"name": "a"}, "v": 2})
    store.replace([{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "v": 2}])
    assert store.index_keys("v", "2") == [("", "b")]
