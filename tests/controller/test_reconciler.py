"""Worker passes end to end: informer → queue → handler → guarded patches, on the emulator."""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.resources import Resource
from runtime.widgets import Widget

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.informer import ClientListWatch, Informer
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.queue import WorkQueue
from cloudcoil_sync.controller._internal.reconciler import STALE_SNAPSHOT_DELAY, Reconciler
from cloudcoil_sync.controller._internal.status import set_condition, update_status
from cloudcoil_sync.controller._internal.types import ResourceKey, Result, TerminalError, Wait
from cloudcoil_sync.controller._internal.workers import Workers
from cloudcoil_sync.crd import CRD
from cloudcoil_sync.testing import Emulator


class Loop:
    """A minimal controller runtime around one kind, for tests of the reconciler's pass."""

    def __init__(
        self,
        config: Config,
        kind: type[Resource],
        handler: Callable[[ResourceKey, Any], object],
        *,
        workers: int = 2,
        reconcile_timeout: float | None = None,
        hooks: Any = None,
    ) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Condition()
        self.metrics = OperatorMetrics()
        controller = self.metrics.controller("test", workers=workers)
        self.queue: WorkQueue[ResourceKey] = WorkQueue(
            base_delay=0.01, max_delay=0.05, metrics=controller.queue
        )
        self.informer = Informer(
            ClientListWatch(config.client(kind), namespace="default"), name="t"
        )
        enqueue = self._enqueue
        self.informer.add_handler(
            on_add=enqueue, on_update=lambda old, new: enqueue(new), on_delete=enqueue
        )

        def counted(key: ResourceKey, obj: Any, snapshot: Any) -> object:
            with self.lock:
                self.calls[key.name] += 1
                self.lock.notify_all()
            return handler(key, obj)

        self.runner = Reconciler(
            kind,
            counted,
            lookup=lambda key: self.informer.store.get_json(key.namespace, key.name),
            client=lambda key: config.client(kind, namespace=key.namespace),
            name="test",
            metrics=controller,
            hooks=hooks,
        )
        self.pool = Workers(
            self.runner,
            self.queue,
            workers=workers,
            reconcile_timeout=reconcile_timeout,
            metrics=controller,
        )

    def _enqueue(self, obj: dict[str, Any]) -> None:
        self.queue.add(ResourceKey.from_resource(obj))

    def start(self) -> Loop:
        self.informer.start()
        assert self.informer.wait_synced(timeout=10)
        self.pool.start()
        return self

    def stop(self) -> None:
        assert self.pool.stop(timeout=5)
        assert self.informer.stop(timeout=5)

    def idle(self, timeout: float = 10) -> bool:
        return self.queue.join(timeout)

    def called(self, name: str, times: int = 1, timeout: float = 10) -> bool:
        """Wait until the handler ran `times` for `name`, then until the queue is idle."""
        with self.lock:
            if not self.lock.wait_for(lambda: self.calls[name] >= times, timeout):
                return False
        return self.idle(timeout)


@pytest.fixture
def loops() -> Iterator[list[Loop]]:
    running: list[Loop] = []
    yield running
    for loop in running:
        loop.stop()


def run(loops: list[Loop], *args: Any, **kwargs: Any) -> Loop:
    loop = Loop(*args, **kwargs)
    loops.append(loop)
    return loop.start()


def mark_managed(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
    if cm is None:
        return None
    cm.data = {**(cm.data or {}), "managed": "yes"}
    return cm


def configmaps(kube: Emulator) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in kube.list_objects("", "configmaps", "default")}


def test_objects_converge_with_one_write_each(
    kube_emulator: Emulator, kube_config: Config, loops: list[Loop]
) -> None:
    api = kube_config.client(ConfigMap).raw
    for i in range(10):
        api.create({"metadata": {"name": f"before-{i}"}})
    loop = run(loops, kube_config, ConfigMap, mark_managed)
    for i in range(10):
        api.create({"metadata": {"name": f"after-{i}"}, "data": {"keep": "me"}})

    def converged() -> bool:
        objects = configmaps(kube_emulator)
        return len(objects) == 20 and all(
            (o.get("data") or {}).get("managed") == "yes" for o in objects.values()
        )

    assert kube_emulator.wait_for(converged, timeout=10)
    assert loop.idle()
    assert loop.runner.writes == 20  # the watch echo of our own write is a no-op
    assert configmaps(kube_emulator)["after-3"]["data"] == {"keep": "me", "managed": "yes"}
    assert loop.runner.counts["error"] == 0


def test_handler_errors_back_off_per_key(
    kube_emulator: Emulator, kube_config: Config, loops: list[Loop]
) -> None:
    def flaky(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
        if key.name == "bad" and loop.calls["bad"] < 3:
            raise RuntimeError("transient")
        return mark_managed(key, cm)

    loop = run(loops, kube_config, ConfigMap, flaky)
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "bad"}})
    api.create({"metadata": {"name": "good"}})
    assert kube_emulator.wait_for(
        lambda: all(
            (configmaps(kube_emulator)[n].get("data") or {}).get("managed") for n in ("bad", "good")
        )
    )
    assert loop.idle()
    assert loop.calls["bad"] >= 3
    assert loop.runner.counts["error"] == 2
    assert loop.queue.num_retries(ResourceKey("bad", "default")) == 0  # forgotten on success
    text = loop.metrics.render().decode()
    assert 'controller_runtime_reconcile_errors_total{controller="test"} 2.0' in text


def test_terminal_errors_are_not_retried(kube_config: Config, loops: list[Loop]) -> None:
    done = threading.Event()

    def terminal(key: ResourceKey, cm: ConfigMap | None) -> None:
        if cm is not None and (cm.data or {}).get("fixed"):
            done.set()
            return
        raise TerminalError("cannot handle this object")

    loop = run(loops, kube_config, ConfigMap, terminal)
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "x"}})
    assert loop.called("x")
    assert loop.calls["x"] == 1
    assert loop.runner.counts["terminal"] == 1
    api.merge_patch("x", {"data": {"fixed": "1"}})  # a later event still reconciles
    assert done.wait(timeout=10)
    text = loop.metrics.render().decode()
    assert 'controller_runtime_terminal_reconcile_errors_total{controller="test"} 1.0' in text


@pytest.mark.parametrize("style", ["raise", "return", "result"])
def test_wait_and_requeue_after_schedule_another_pass(
    kube_config: Config, loops: list[Loop], style: str
) -> None:
    again = threading.Event()

    def waiting(key: ResourceKey, cm: ConfigMap | None) -> object:
        if loop.calls[key.name] >= 2:
            again.set()
            return None
        if style == "raise":
            raise Wait("Pending", "not yet", after=0.05)
        if style == "return":
            return Wait("Pending", after=0.05)
        return Result(requeue_after=0.05)

    loop = run(loops, kube_config, ConfigMap, waiting)
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "w"}})
    assert again.wait(timeout=10)
    assert loop.runner.counts["error"] == 0
    assert loop.queue.num_retries(ResourceKey("w", "default")) == 0
    text = loop.metrics.render().decode()
    assert (
        'controller_runtime_reconcile_total{controller="test",result="requeue_after"} 1.0' in text
    )


def test_concurrent_change_is_never_overwritten(
    kube_emulator: Emulator, kube_config: Config, loops: list[Loop]
) -> None:
    api = kube_config.client(ConfigMap).raw

    def racing(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
        if cm is None or (cm.data or {}).get("managed"):
            return None
        if loop.calls[key.name] == 1:
            api.merge_patch(key.name, {"data": {"concurrent": "change"}})  # someone else
        return mark_managed(key, cm)

    loop = run(loops, kube_config, ConfigMap, racing)
    api.create({"metadata": {"name": "race"}})
    assert kube_emulator.wait_for(
        lambda: (configmaps(kube_emulator)["race"].get("data") or {}).get("managed") == "yes"
    )
    assert configmaps(kube_emulator)["race"]["data"] == {"concurrent": "change", "managed": "yes"}
    assert loop.idle()
    assert loop.runner.counts["error"] == 1  # the guarded patch was refused once
    assert loop.runner.writes == 1


def test_a_refused_guard_is_logged_as_a_change_and_retried(
    kube_emulator: Emulator,
    kube_config: Config,
    loops: list[Loop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cloudcoil_sync.controller.test")
    api = kube_config.client(ConfigMap).raw
    read_at: list[str] = []

    def racing(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
        if cm is None or (cm.data or {}).get("managed"):
            return None
        if not read_at:
            read_at.append(cm.resource_version or "")
            api.merge_patch(key.name, {"data": {"concurrent": "change"}})
        return mark_managed(key, cm)

    loop = run(loops, kube_config, ConfigMap, racing)
    api.create({"metadata": {"name": "race"}})
    assert kube_emulator.wait_for(
        lambda: (configmaps(kube_emulator)["race"].get("data") or {}).get("managed") == "yes"
    )
    assert loop.idle()
    retry = next(r for r in caplog.records if "will retry" in r.getMessage())
    assert retry.levelno == logging.INFO and retry.exc_info is None
    assert (
        f"ConfigMap default/race changed after this pass read it at resourceVersion "
        f"{read_at[0]}; the write was refused, not merged, and the pass will be retried "
        "against the newer object"
    ) in retry.getMessage()


def test_debug_logs_one_line_per_pass(
    kube_config: Config, loops: list[Loop], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="cloudcoil_sync.controller.test")
    loop = run(loops, kube_config, ConfigMap, mark_managed)
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "logged"}})
    assert loop.called("logged", 2)  # the write's echo brings a second pass
    passes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Pass for ")]
    key = "default/logged"
    first = next(m for m in passes if key in m and "wrote" in m)
    assert re.fullmatch(rf"Pass for .*{key}.*: success in [0-9.]+ ms, wrote /data", first), first
    assert any(key in m and m.endswith("nothing to write") for m in passes), passes
    assert all(r.levelno == logging.DEBUG for r in caplog.records if "Pass for" in r.getMessage())


def test_wrong_return_values_are_errors(kube_config: Config, loops: list[Loop]) -> None:
    failures: list[BaseException] = []

    class Hooks:
        def failed(self, key: ResourceKey, snapshot: Any, error: BaseException) -> None:
            failures.append(error)

        def settled(self, key: ResourceKey, succeeded: bool) -> None:
            pass

    def wrong(key: ResourceKey, cm: ConfigMap | None) -> object:
        if loop.calls[key.name] == 1:
            return "yes"
        if loop.calls[key.name] == 2:
            return Widget(metadata=ObjectMeta(name="w"))
        return None

    loop = run(loops, kube_config, ConfigMap, wrong, hooks=Hooks())
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "x"}})
    assert loop.called("x", 3)
    assert [str(e) for e in failures] == [
        "Reconcile must return its resource, Result, Wait, or None",
        "Reconcile must return its primary resource type",
    ]
    assert loop.calls["x"] == 3


@pytest.fixture
def widgets(kube_emulator: Emulator, kube_config: Config) -> Config:
    crds = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    kube_config.client(crds).create(CRD(Widget).manifest())

    def established() -> bool:
        crd = kube_emulator.get_object(
            "apiextensions.k8s.io", "customresourcedefinitions", "", "widgets.example.com"
        )
        conditions = ((crd or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    assert kube_emulator.wait_for(established)
    return kube_config


def widget(config: Config, name: str) -> None:
    config.client(Widget).raw.create(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {}}
    )


def test_status_goes_to_the_status_subresource(
    kube_emulator: Emulator, widgets: Config, loops: list[Loop]
) -> None:
    def reconcile(key: ResourceKey, obj: Widget | None) -> Widget | None:
        if obj is None or (obj.status and obj.status.phase):
            return None
        obj.metadata.labels = {"seen": "yes"}  # type: ignore[union-attr]
        update_status(obj, phase="Ready")
        set_condition(obj, "Ready", True, reason="Reconciled")
        return obj

    loop = run(loops, widgets, Widget, reconcile)
    widget(widgets, "w1")
    assert kube_emulator.wait_for(
        lambda: (
            (kube_emulator.get_object("example.com", "widgets", "default", "w1") or {})
            .get("status", {})
            .get("phase")
            == "Ready"
        )
    )
    stored = kube_emulator.get_object("example.com", "widgets", "default", "w1")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"seen": "yes"}
    assert stored["status"]["conditions"][0]["type"] == "Ready"
    assert loop.idle()
    patches = [e.path for e in kube_emulator.request_log if e.method == "PATCH"]
    assert patches[:2] == [
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        "/apis/example.com/v1/namespaces/default/widgets/w1/status",
    ]


def test_failures_report_status_only(
    kube_emulator: Emulator, widgets: Config, loops: list[Loop]
) -> None:
    class Hooks:
        def failed(self, key: ResourceKey, snapshot: Any, error: BaseException) -> Widget:
            report = snapshot.model_copy(deep=True)
            report.metadata.labels = {"must-not": "be-written"}
            return set_condition(
                report, "Ready", False, reason="ReconcileFailed", message=type(error).__name__
            )

        def settled(self, key: ResourceKey, succeeded: bool) -> None:
            pass

    def broken(key: ResourceKey, obj: Widget | None) -> Widget:
        raise TerminalError("no")

    loop = run(loops, widgets, Widget, broken, hooks=Hooks())
    widget(widgets, "w2")
    assert kube_emulator.wait_for(
        lambda: bool(
            (kube_emulator.get_object("example.com", "widgets", "default", "w2") or {})
            .get("status", {})
            .get("conditions")
        )
    )
    stored = kube_emulator.get_object("example.com", "widgets", "default", "w2")
    assert stored is not None
    assert stored["status"]["conditions"][0]["message"] == "TerminalError"
    assert "labels" not in stored["metadata"]
    assert loop.idle()


def test_stuck_pass_times_out_without_blocking_others(
    kube_emulator: Emulator, kube_config: Config, loops: list[Loop]
) -> None:
    release = threading.Event()
    stuck = threading.Event()

    def slow(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
        if key.name == "slow" and loop.calls["slow"] == 1:
            stuck.set()
            assert release.wait(timeout=10)
            cm.data = {"written": "late"}  # type: ignore[union-attr]
            return cm
        return mark_managed(key, cm)

    loop = run(loops, kube_config, ConfigMap, slow, workers=1, reconcile_timeout=0.2)
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "slow"}})
    assert stuck.wait(timeout=10)
    api.create({"metadata": {"name": "other"}})  # served by the replacement thread
    assert kube_emulator.wait_for(
        lambda: (configmaps(kube_emulator)["other"].get("data") or {}).get("managed") == "yes"
    )
    assert loop.pool.timed_out == 1
    release.set()
    assert loop.called("slow", 2)
    counts, seconds, _ = loop.runner.stats()
    assert counts["cancelled"] == 1 and counts["error"] == 1 and seconds > 0.2
    assert kube_emulator.wait_for(
        lambda: (configmaps(kube_emulator)["slow"].get("data") or {}).get("managed") == "yes"
    )
    assert "written" not in configmaps(kube_emulator)["slow"]["data"]  # discarded
    assert loop.idle()
    text = loop.metrics.render().decode()
    assert 'controller_runtime_reconcile_timeouts_total{controller="test"} 1.0' in text


def test_stop_lets_the_pass_in_flight_finish(kube_emulator: Emulator, kube_config: Config) -> None:
    entered, release = threading.Event(), threading.Event()

    def blocking(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
        entered.set()
        assert release.wait(timeout=10)
        return mark_managed(key, cm)

    loop = Loop(kube_config, ConfigMap, blocking, workers=1).start()
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "inflight"}})
    assert entered.wait(timeout=10)
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(loop.pool.stop(timeout=10)))
    stopper.start()
    release.set()
    stopper.join(timeout=15)
    assert stopped == [True]
    assert configmaps(kube_emulator)["inflight"]["data"] == {"managed": "yes"}  # not cut short
    assert loop.informer.stop(timeout=5)


def test_api_error_storm_backs_off_then_converges(
    kube_emulator: Emulator, kube_config: Config, loops: list[Loop]
) -> None:
    api = kube_config.client(ConfigMap).raw
    for i in range(5):
        api.create({"metadata": {"name": f"storm-{i}"}})
    # Every write fails for a while (PATCH is not idempotent: the client does not retry 5xx).
    kube_emulator.faults.inject(503, count=15, method="PATCH")
    loop = run(loops, kube_config, ConfigMap, mark_managed, workers=2)

    def converged() -> bool:
        objects = configmaps(kube_emulator)
        return all((o.get("data") or {}).get("managed") == "yes" for o in objects.values())

    assert kube_emulator.wait_for(converged, timeout=20)
    assert loop.idle()
    assert loop.runner.counts["error"] == 15
    assert loop.runner.writes == 5
    assert all(loop.queue.num_retries(ResourceKey(f"storm-{i}", "default")) == 0 for i in range(5))


def test_many_workers_never_share_a_key(kube_config: Config, loops: list[Loop]) -> None:
    active: set[str] = set()
    overlaps: list[str] = []
    guard = threading.Lock()

    def observed(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
        with guard:
            if key.name in active:
                overlaps.append(key.name)
            active.add(key.name)
        try:
            return mark_managed(key, cm) if cm is not None and loop.calls[key.name] % 3 else None
        finally:
            with guard:
                active.discard(key.name)

    loop = run(loops, kube_config, ConfigMap, observed, workers=6)
    api = kube_config.client(ConfigMap).raw
    for i in range(8):
        api.create({"metadata": {"name": f"k{i}"}})
    for round_ in range(5):
        for i in range(8):
            api.merge_patch(f"k{i}", {"metadata": {"labels": {"round": str(round_)}}})
    assert loop.called("k7", 1)
    assert overlaps == []


def test_a_snapshot_older_than_our_write_is_not_reconciled_again(
    kube_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = kube_config.client(ConfigMap).raw
    created = api.create({"metadata": {"name": "echo"}})
    stale = created  # what a lagging informer would still hold after our write
    calls: list[str] = []

    def handler(key: ResourceKey, cm: ConfigMap | None, _: Any) -> ConfigMap | None:
        calls.append(key.name)
        return mark_managed(key, cm)

    runner = Reconciler(
        ConfigMap,
        handler,
        lookup=lambda key: stale,
        client=lambda key: kube_config.client(ConfigMap, namespace=key.namespace),
        name="echo",
    )
    key = ResourceKey("echo", "default")
    assert runner.reconcile(key).wrote
    # The informer has not seen our write yet: no handler call, a look again later.
    skipped = runner.reconcile(key)
    assert skipped.kind == "stale" and skipped.requeue_after == STALE_SNAPSHOT_DELAY
    assert calls == ["echo"]
    # Once it has (a newer version), passes run normally.
    stale = api.get("echo")
    assert runner.reconcile(key).kind == "success"
    assert calls == ["echo", "echo"]
    # A write the server found to be a no-op (same resourceVersion) defers nothing.
    snapshot = ConfigMap.model_validate(stale)
    runner._remember_write(
        key, snapshot, {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}}
    )
    assert not runner._is_stale(key, snapshot)
    # Deferral is bounded: after the patience, a stale snapshot is reconciled (and refused).
    monkeypatch.setattr(
        "cloudcoil_sync.controller._internal.reconciler.STALE_SNAPSHOT_PATIENCE", 0.0
    )
    stale = created
    runner._remember_write(
        key, ConfigMap.model_validate(created), {"metadata": {"resourceVersion": "new"}}
    )
    outcome = runner.reconcile(key)
    assert outcome.kind == "error" and "422" in str(outcome.error)


def test_stuck_threads_are_bounded(kube_config: Config, loops: list[Loop]) -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    def stuck(key: ResourceKey, cm: ConfigMap | None) -> None:
        if loop.calls[key.name] == 1:
            entered.release()
            assert release.wait(timeout=10)

    loop = run(loops, kube_config, ConfigMap, stuck, workers=1, reconcile_timeout=0.05)
    api = kube_config.client(ConfigMap).raw
    for name in ("s1", "s2", "s3"):
        api.create({"metadata": {"name": name}})
    assert entered.acquire(timeout=10) and entered.acquire(timeout=10)
    # One worker: its replacement got stuck too, and no third thread was added.
    assert not entered.acquire(timeout=0.3)
    assert loop.pool.timed_out == 2
    release.set()
    assert loop.called("s3", 1)


def test_failure_logs_match_their_cause(
    kube_emulator: Emulator,
    kube_config: Config,
    loops: list[Loop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cloudcoil_sync")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "conflicted"}})
    api.create({"metadata": {"name": "unavailable"}})
    api.create({"metadata": {"name": "buggy"}})
    kube_emulator.faults.inject(409, count=1, method="PATCH", path="conflicted")
    kube_emulator.faults.inject(503, count=1, method="PATCH", path="unavailable")
    raised = threading.Event()

    def handler(key: ResourceKey, cm: ConfigMap | None) -> ConfigMap | None:
        if key.name == "buggy" and not raised.is_set():
            raised.set()
            raise KeyError("a bug in the handler")
        return mark_managed(key, cm)

    loop = run(loops, kube_config, ConfigMap, handler)
    assert loop.called("conflicted", 2) and loop.called("unavailable", 2)
    assert loop.called("buggy", 2)
    outcomes = [r for r in caplog.records if "Reconcile of" in r.getMessage()]
    by_key = {
        name: next(r for r in outcomes if name in r.getMessage())
        for name in ("conflicted", "unavailable", "buggy")
    }
    # A 409 is optimistic concurrency working: INFO, no traceback.
    assert by_key["conflicted"].levelno == logging.INFO and by_key["conflicted"].exc_info is None
    # An API failure is a one-line warning; a handler bug keeps its traceback.
    assert by_key["unavailable"].levelno == logging.WARNING
    assert by_key["unavailable"].exc_info is None
    assert by_key["buggy"].levelno == logging.WARNING and by_key["buggy"].exc_info is not None
