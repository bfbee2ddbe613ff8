"""Event filters: field selectors sent to the server, changed= predicates, when=, counted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, ResourceKey

from .conftest import Calls, Harness, Widget, create_widget


def filtered(harness: Harness, controller: str, name: str) -> float:
    value = harness.metrics.registry.get_sample_value(
        "cloudcoil_filtered_events_total", {"controller": controller, "filter": name}
    )
    return value or 0.0


def counting(calls: Calls) -> Controller[Widget]:
    controller: Controller[Widget] = Controller(Widget, events=False)

    @controller.reconcile()
    def reconcile(w: Widget) -> None:
        calls.hit(w.name or "")

    return controller


def patch(config: Config, name: str, body: dict[str, Any]) -> None:
    config.client(Widget).raw.merge_patch(name, body)


def test_an_annotation_only_change_starts_no_pass_under_generation_changed(
    widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    controller = counting(calls).filter(changed="generation")
    runtime = harness.run(controller, name="generation")
    create_widget(widgets, "w1")
    assert calls.reached("w1") and runtime.queue.join(10)
    patch(widgets, "w1", {"metadata": {"annotations": {"note": "x"}}})
    patch(widgets, "w1", {"metadata": {"labels": {"team": "a"}}})
    assert wait_until(lambda: filtered(harness, "generation", "generation") == 2)
    assert runtime.queue.join(10) and calls["w1"] == 1
    patch(widgets, "w1", {"spec": {"size": 2}})
    assert calls.reached("w1", 2)
    assert runtime.queue.join(10) and calls["w1"] == 2
    assert filtered(harness, "generation", "generation") == 2


def test_label_and_annotation_changes_and_a_when_predicate(
    widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    controller = counting(calls).filter(
        changed=("labels", "annotations"), when=lambda old, new: new.name != "frozen"
    )
    runtime = harness.run(controller, name="metadata")
    create_widget(widgets, "w1")
    create_widget(widgets, "frozen")
    assert calls.reached("w1") and calls.reached("frozen") and runtime.queue.join(10)
    patch(widgets, "w1", {"spec": {"size": 5}})  # no label or annotation changed
    assert wait_until(lambda: filtered(harness, "metadata", "labels,annotations") == 1)
    patch(widgets, "w1", {"metadata": {"annotations": {"note": "x"}}})
    assert calls.reached("w1", 2)
    patch(widgets, "w1", {"metadata": {"labels": {"team": "a"}}})
    assert calls.reached("w1", 3)
    patch(widgets, "frozen", {"metadata": {"labels": {"team": "a"}}})
    assert wait_until(lambda: filtered(harness, "metadata", "when") == 1)
    assert runtime.queue.join(10) and calls["w1"] == 3 and calls["frozen"] == 1


def test_a_field_selector_is_sent_to_the_server(widgets: Config, harness: Harness) -> None:
    calls = Calls()
    controller = counting(calls).filter(field_selector="metadata.name!=hidden")
    runtime = harness.run(controller, name="fields")
    create_widget(widgets, "hidden")
    create_widget(widgets, "shown")
    assert calls.reached("shown") and runtime.queue.join(10)
    assert calls["hidden"] == 0
    assert controller.cached(Widget).get("hidden", namespace="default") is None
    assert [i.name for i in runtime.caches.informers.values()] == [
        "widgets@default?metadata.name!=hidden"
    ]


def test_watch_filters_and_a_raising_when(
    widgets: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()
    controller = counting(calls)

    def broken(old: ConfigMap, new: ConfigMap) -> bool:
        if new.name == "odd":
            raise LookupError("cannot judge odd")
        return True

    @controller.watch(ConfigMap, label_selector="feeds", changed="labels", when=broken)
    def feeds(cm: ConfigMap) -> Iterable[ResourceKey]:
        labels = (cm.metadata and cm.metadata.labels) or {}
        yield ResourceKey(labels["feeds"], "default")

    runtime = harness.run(controller, name="watching")
    create_widget(widgets, "w1")
    assert calls.reached("w1") and runtime.queue.join(10)
    api = widgets.client(ConfigMap).raw
    api.create({"metadata": {"name": "ignored"}})  # not selected: never cached
    api.create({"metadata": {"name": "c1", "labels": {"feeds": "w1"}}})
    assert calls.reached("w1", 2) and runtime.queue.join(10)
    api.merge_patch("c1", {"data": {"k": "v"}})  # labels unchanged: dropped
    assert wait_until(lambda: filtered(harness, "watching", "ConfigMap:labels") == 1)
    api.create({"metadata": {"name": "odd", "labels": {"feeds": "w1"}}})
    assert calls.reached("w1", 3) and runtime.queue.join(10)
    api.merge_patch("odd", {"metadata": {"labels": {"x": "y"}}})  # when raises: it passes
    assert calls.reached("w1", 4)
    assert any("cannot judge odd" in str(r.exc_info) for r in caplog.records if r.exc_info)
    assert controller.cached(ConfigMap).get("ignored", namespace="default") is None
    assert harness.fatal == []


def test_filter_arguments_are_checked() -> None:
    controller: Controller[Widget] = Controller(Widget)
    with pytest.raises(ValueError, match="Unknown change 'spec': changed takes generation"):
        controller.filter(changed="spec")
    with pytest.raises(TypeError, match="field_selector must be a non-empty string"):
        controller.filter(field_selector="")
    with pytest.raises(TypeError, match="unexpected keyword argument 'selector'"):
        controller.watch(ConfigMap, mapper=lambda cm: [], selector="a")
    with pytest.raises(TypeError, match="when predicates must be callable"):
        controller.filter(when=3)  # type: ignore[arg-type]
