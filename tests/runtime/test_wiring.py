"""Informer sharing, mapped watches, cached reads, external triggers and fatal errors."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret

from cloudcoil_sync._internal.service import Service
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, ResourceKey
from cloudcoil_sync.controller._internal.context import Context
from cloudcoil_sync.controller._internal.informer import InformerFailed
from cloudcoil_sync.controller._internal.runtime import SyncTimeout
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness, Widget, create_widget


def counting(calls: Calls, label: str, **options: object) -> Controller[ConfigMap]:
    controller: Controller[ConfigMap] = Controller(ConfigMap, **options)  # type: ignore[arg-type]

    @controller.reconcile()
    def count(cm: ConfigMap) -> None:
        calls.hit(f"{label}:{cm.name}")

    return controller


def test_controllers_share_informers_of_the_same_view(
    kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    first = harness.runtime(counting(calls, "first", events=False), name="first")
    second = harness.runtime(counting(calls, "second", events=False), name="second")
    labelled = harness.runtime(
        counting(calls, "labelled", events=False, label_selector="team=a"), name="labelled"
    )
    assert len(harness.pool) == 2  # (configmaps, default) and (configmaps, default, team=a)
    for runtime in (first, second, labelled):
        runtime.start()
    for runtime in (first, second, labelled):
        runtime.wait_synced(timeout=10)
        runtime.start_workers()
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "x"}})
    api.create({"metadata": {"name": "y", "labels": {"team": "a"}}})
    assert calls.reached("first:x") and calls.reached("second:x") and calls.reached("second:y")
    assert calls.reached("labelled:y")
    for runtime in (first, second, labelled):
        assert runtime.queue.join(10)
    assert calls["labelled:x"] == 0


def test_mapped_watches_and_cached_reads(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    calls = Calls()
    seen: dict[str, list[str]] = {}
    controller: Controller[Widget] = Controller(Widget)

    @controller.watch(ConfigMap)
    def by_label(cm: ConfigMap) -> Iterable[ResourceKey]:
        name = ((cm.metadata and cm.metadata.labels) or {}).get("widget")
        if name and controller.cached(Widget).get(name, namespace="default") is not None:
            yield ResourceKey(name, "default")

    @controller.reconcile()
    def reconcile(w: Widget, ctx: Context[Widget]) -> None:
        configs = ctx.cached(ConfigMap).list(label_selector=f"widget={w.name}")
        seen[w.name or ""] = sorted(c.name or "" for c in configs)
        calls.hit(w.name or "")
        with pytest.raises(ValueError, match="Secret is not watched by this controller"):
            ctx.cached(Secret)
        live = ctx.get(Widget, w.name or "")
        assert live.metadata is not None and w.metadata is not None
        assert live.metadata.uid == w.metadata.uid

    runtime = harness.run(controller, name="mapped")
    create_widget(widgets, "w1")
    assert calls.reached("w1")
    api = widgets.client(ConfigMap).raw
    api.create({"metadata": {"name": "c1", "labels": {"widget": "w1"}}})
    assert calls.wait(lambda: seen.get("w1") == ["c1"])
    api.create({"metadata": {"name": "c2", "labels": {"widget": "w1"}}})
    assert calls.wait(lambda: seen.get("w1") == ["c1", "c2"])
    api.create({"metadata": {"name": "c3", "labels": {"widget": "nobody"}}})
    runtime.enqueue(ResourceKey("w1", "default"))  # external trigger
    controller.enqueue(ResourceKey("w1", "default"))
    assert runtime.queue.join(10)
    assert seen["w1"] == ["c1", "c2"]
    assert harness.fatal == []


def test_a_failing_mapper_is_logged_and_the_controller_goes_on(
    kube_config: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.watch(Secret)
    def broken(secret: Secret) -> Iterable[ResourceKey]:
        if secret.name == "bad":
            raise LookupError(f"cannot map {secret.name}")
        yield ResourceKey("cm", "default")

    @controller.reconcile()
    def reconcile(cm: ConfigMap) -> None:
        calls.hit(cm.name or "")

    runtime = harness.run(controller, name="mapped-errors")
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "cm"}})
    assert calls.reached("cm")
    secrets = kube_config.client(Secret).raw
    secrets.create({"metadata": {"name": "bad"}})
    secrets.create({"metadata": {"name": "good"}})
    assert calls.reached("cm", 2)  # the event after the failing one still maps
    assert harness.fatal == [] and runtime.ready
    failures = [r for r in caplog.records if "Watch mapper" in r.getMessage()]
    assert failures and "Secret default/bad" in failures[0].getMessage()
    assert failures[0].exc_info is not None  # its traceback, for the mapper's author
    text = harness.metrics.render().decode()
    assert 'cloudcoil_mapper_errors_total{controller="mapped-errors"} 1.0' in text


def test_informer_failures_and_sync_timeouts_surface_from_wait_synced(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    kube_emulator.faults.inject(403, count=1, method="GET", path="/configmaps$")
    denied = harness.runtime(counting(Calls(), "denied"), name="denied")
    denied.start()
    with pytest.raises(InformerFailed):
        denied.wait_synced(timeout=10)
    assert denied.fatal_error is not None and not denied.ready
    assert harness.fatal and "403" in str(harness.fatal[0])

    kube_emulator.faults.add_latency(0.5, method="GET", path="/secrets$")
    slow: Controller[Secret] = Controller(Secret, sync_timeout=0.1)

    @slow.reconcile()
    def reconcile(secret: Secret) -> None:
        pass

    runtime = harness.runtime(slow, name="slow")
    runtime.start()
    with pytest.raises(SyncTimeout, match=r"did not sync within 0\.1s"):
        runtime.wait_synced()
    assert not runtime.ready
    kube_emulator.faults.clear()


def test_a_controller_runs_once_and_reports_its_status(
    kube_config: Config, harness: Harness
) -> None:
    controller = counting(Calls(), "once")
    runtime = harness.runtime(controller, name="once")
    assert controller.runtime is runtime
    assert not runtime.ready and not controller.ready
    with pytest.raises(RuntimeError, match="only run once"):
        harness.runtime(controller, name="twice")
    with pytest.raises(RuntimeError, match=r"start\(\) the controller"):
        runtime.wait_synced()
    runtime.start(wait=True)
    assert controller.ready
    status = runtime.status
    assert (status.ready, status.queued, status.processing, status.errors) == (True, 0, 0, 0)
    assert runtime.stop() and not runtime.ready
    assert runtime.stop()  # idempotent


def test_the_runtime_and_its_workers_follow_the_service_contract(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    runtime = harness.runtime(counting(calls, "svc"), name="svc")
    assert isinstance(runtime, Service) and isinstance(runtime.workers, Service)
    assert runtime.healthy() and not runtime.workers.healthy()  # workers not started yet
    runtime.start()
    # Waiting has no side effect: synced, but its workers start only when asked.
    assert not runtime.wait_ready(10) and runtime.synced and not runtime.workers.healthy()
    assert runtime.start_workers() and runtime.wait_ready(0) and runtime.ready
    assert runtime.workers.healthy() and runtime.workers.wait_ready(0)
    kube_emulator.create_object(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "q"}}
    )
    assert calls.wait(lambda: calls["svc:q"] >= 1)
    assert runtime.stop(timeout=5) is True
    assert not runtime.workers.healthy() and runtime.healthy()  # stopped, not failed


def test_a_pass_lists_a_cluster_wide_cache_whole(kube_config: Config, harness: Harness) -> None:
    """`list()` from a pass defaults to the pass's namespace; `all_namespaces=True` reads every
    namespace the cache holds."""
    calls = Calls()
    seen: dict[str, dict[str, list[str]]] = {}
    controller: Controller[ConfigMap] = Controller(ConfigMap, all_namespaces=True, events=False)

    @controller.reconcile()
    def reconcile(cm: ConfigMap, ctx: Context[ConfigMap]) -> None:
        cached = ctx.cached(ConfigMap)
        seen[f"{cm.namespace}/{cm.name}"] = {
            "own": sorted(c.name or "" for c in cached.list()),
            "all": sorted(f"{c.namespace}/{c.name}" for c in cached.list(all_namespaces=True)),
        }
        with pytest.raises(ValueError, match="not both"):
            cached.list(namespace="default", all_namespaces=True)
        calls.hit(f"{cm.namespace}/{cm.name}")

    api = kube_config.client(("", "v1", "namespaces")).raw
    api.create({"metadata": {"name": "other"}})
    configs = kube_config.client(ConfigMap).raw
    configs.create({"metadata": {"name": "a"}}, namespace="default")
    configs.create({"metadata": {"name": "b"}}, namespace="other")
    harness.run(controller, name="cluster-wide")
    assert calls.reached("default/a") and calls.reached("other/b")
    configs.merge_patch("a", {"data": {"x": "1"}}, namespace="default")
    assert calls.reached("default/a", 2)
    assert seen["default/a"] == {"own": ["a"], "all": ["default/a", "other/b"]}
    assert seen["other/b"]["own"] == ["b"]
