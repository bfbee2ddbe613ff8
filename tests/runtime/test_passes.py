"""Event flow and pass semantics of a running controller, against the emulator over HTTPS."""

from __future__ import annotations

import threading
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from fake_clock import FakeClock
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, ResourceKey, Result, TerminalError, Wait
from cloudcoil_sync.controller._internal.context import Request
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness


def configmaps(kube: Emulator) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in kube.list_objects("", "configmaps", "default")}


def managed(kube: Emulator, *names: str) -> bool:
    found = configmaps(kube)
    return all((found.get(n) or {}).get("data", {}).get("managed") == "yes" for n in names)


def marking_controller(calls: Calls | None = None, **options: Any) -> Controller[ConfigMap]:
    controller: Controller[ConfigMap] = Controller(ConfigMap, **options)

    @controller.reconcile()
    def mark(cm: ConfigMap) -> ConfigMap:
        if calls is not None:
            calls.hit(cm.name or "")
        cm.data = {**(cm.data or {}), "managed": "yes"}
        return cm

    return controller


def test_preexisting_and_new_objects_are_reconciled(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    api = kube_config.client(ConfigMap).raw
    for i in range(5):
        api.create({"metadata": {"name": f"old-{i}"}, "data": {"keep": str(i)}})
    runtime = harness.run(marking_controller())
    api.create({"metadata": {"name": "new"}})
    names = [f"old-{i}" for i in range(5)] + ["new"]
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, *names), timeout=10)
    assert configmaps(kube_emulator)["old-3"]["data"] == {"keep": "3", "managed": "yes"}
    assert runtime.queue.join(10)
    status = runtime.status
    assert status.ready and status.errors == 0 and status.successes >= 6


def test_create_update_and_delete_events_reach_the_reconciler(
    kube_config: Config, harness: Harness
) -> None:
    seen: list[tuple[str, str | None]] = []
    calls = Calls()

    def reconcile(request: Request[ConfigMap]) -> None:
        obj = request.resource
        seen.append((request.name, None if obj is None else (obj.data or {}).get("v")))
        calls.hit(request.name)

    harness.run(Controller(ConfigMap, reconcile))
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "x"}, "data": {"v": "1"}})
    assert calls.wait(lambda: ("x", "1") in seen)
    api.merge_patch("x", {"data": {"v": "2"}})
    assert calls.wait(lambda: ("x", "2") in seen)
    api.delete("x")
    assert calls.wait(lambda: seen[-1] == ("x", None))


def test_events_during_a_pass_coalesce_into_one_more_pass(
    kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    release = threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def slow(cm: ConfigMap) -> None:
        if calls.hit(cm.name or "") == 1:
            assert release.wait(10)

    runtime = harness.run(controller, name="coalesce")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "a"}})
    assert calls.reached("a")
    for i in range(5):
        api.merge_patch("a", {"data": {"n": str(i)}})
    # The informer has seen every update once the last one is cached (no event announces it;
    # the handler, blocked, hits nothing).
    assert wait_until(
        lambda: (runtime.primary.store.get("default", "a") or {}).get("data", {}).get("n") == "4",
        timeout=10,
    )
    release.set()
    assert calls.reached("a", 2)
    assert runtime.queue.join(10)
    assert calls["a"] == 2


def test_the_echo_of_our_own_write_starts_no_pass(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    runtime = harness.run(marking_controller(calls), name="echo")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "e"}})
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "e"), timeout=10)
    written = configmaps(kube_emulator)["e"]["metadata"]["resourceVersion"]
    # The informer has the echo once the write's version is cached; then the queue is idle.
    assert wait_until(
        lambda: (
            (runtime.primary.store.get("default", "e") or {})
            .get("metadata", {})
            .get("resourceVersion")
            == written
        ),
        timeout=10,
    )
    assert runtime.queue.join(10)
    assert calls["e"] == 1
    assert runtime.reconciler.stats()[2] == 1
    # Anyone else's change (here a label) still reconciles, and finds nothing to write.
    api.merge_patch("e", {"metadata": {"labels": {"other": "change"}}})
    assert calls.reached("e", 2)
    assert runtime.queue.join(10)
    assert runtime.reconciler.stats()[2] == 1


def test_one_key_is_never_processed_by_two_workers(kube_config: Config, harness: Harness) -> None:
    lock = threading.Lock()
    active: dict[str, int] = {}
    peak = {"key": 0, "total": 0}
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap, workers=4)

    @controller.reconcile()
    def busy(cm: ConfigMap) -> None:
        name = cm.name or ""
        with lock:
            active[name] = active.get(name, 0) + 1
            peak["key"] = max(peak["key"], active[name])
            peak["total"] = max(peak["total"], sum(active.values()))
        threading.Event().wait(0.005)  # simulated work, not a wait for a condition
        with lock:
            active[name] -= 1
        calls.hit(name)

    runtime = harness.run(controller, name="exclusive")
    api = kube_config.client(ConfigMap).raw
    names = [f"k{i}" for i in range(4)]
    for name in names:
        api.create({"metadata": {"name": name}})
    for round_ in range(10):
        for name in names:
            api.merge_patch(name, {"data": {"round": str(round_)}})
    assert calls.wait(lambda: all(calls[n] >= 2 for n in names))
    assert runtime.queue.join(10)
    assert peak["key"] == 1
    assert peak["total"] > 1


def test_failing_key_backs_off_while_other_keys_flow(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    fixed = threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def flaky(cm: ConfigMap) -> ConfigMap:
        if cm.name == "bad" and not fixed.is_set():
            calls.hit("bad")
            raise RuntimeError("backend unavailable")
        cm.data = {"managed": "yes"}
        return cm

    clock = FakeClock()
    runtime = harness.run(controller, name="flaky", base_delay=0.05, max_delay=1.0, clock=clock)
    api = kube_config.client(ConfigMap).raw
    bad = ResourceKey("bad", "default")
    api.create({"metadata": {"name": "bad"}})
    for attempt in range(4):
        assert calls.reached("bad", attempt + 1)
        assert wait_until(lambda: runtime.queue.due(bad) is not None, timeout=10)
        due = runtime.queue.due(bad)
        assert due is not None
        # Each retry is scheduled at its backoff, 0.05 → 0.1 → 0.2 → 0.4 s (± 10 % jitter),
        # read on the runtime's clock: no wall-clock gap is measured.
        expected = 0.05 * 2**attempt
        assert expected * 0.9 <= due - clock() <= expected * 1.1, (attempt, due - clock())
        if attempt == 1:  # the clock stands still: the failing key waits, the others flow
            for i in range(5):
                api.create({"metadata": {"name": f"good-{i}"}})
            assert kube_emulator.wait_for(
                lambda: managed(kube_emulator, *(f"good-{i}" for i in range(5))), timeout=10
            )
            assert calls["bad"] == 2 and runtime.queue.due(bad) == due
        clock.advance(due - clock())
    assert calls.reached("bad", 5)
    fixed.set()
    assert wait_until(lambda: runtime.queue.due(bad) is not None, timeout=10)
    clock.advance(1.0)
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "bad"), timeout=10)
    assert runtime.queue.join(10)
    assert runtime.queue.num_retries(bad) == 0
    assert runtime.status.errors >= 5


def test_wait_and_requeue_after_schedule_passes_without_backoff(
    kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    retries: list[int] = []
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def pending(cm: ConfigMap) -> Result | None:
        name = cm.name or ""
        count = calls.hit(name)
        retries.append(runtime.queue.num_retries(ResourceKey(name, "default")))
        if name == "waits" and count < 3:
            raise Wait("Provisioning", "the backend is not ready", after=0.05)
        if name == "requeues" and count < 3:
            return Result(requeue_after=0.05)
        return None

    runtime = harness.run(controller, name="waiting")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "waits"}})
    api.create({"metadata": {"name": "requeues"}})
    assert calls.reached("waits", 3) and calls.reached("requeues", 3)
    assert runtime.queue.join(10)
    assert calls["waits"] == 3 and calls["requeues"] == 3
    assert set(retries) == {0}
    assert runtime.status.errors == 0


def test_terminal_errors_are_not_retried_until_the_object_changes(
    kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def strict(cm: ConfigMap) -> None:
        calls.hit(cm.name or "")
        if not (cm.data or {}).get("valid"):
            raise TerminalError("data.valid is required")

    runtime = harness.run(controller, name="strict")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "x"}})
    assert calls.reached("x")
    assert runtime.queue.join(10)
    assert calls["x"] == 1
    assert runtime.status.terminal_errors == 1
    api.merge_patch("x", {"data": {"valid": "yes"}})
    assert calls.reached("x", 2)
    assert runtime.queue.join(10)
    assert runtime.status.terminal_errors == 1


def test_stuck_handler_is_bounded_by_reconcile_timeout(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    release = threading.Event()
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap, reconcile_timeout=0.3, workers=1)

    @controller.reconcile()
    def sometimes_stuck(cm: ConfigMap) -> ConfigMap:
        if cm.name == "stuck" and calls.hit("stuck") == 1:
            assert release.wait(10)
        cm.data = {"managed": "yes"}
        return cm

    harness.run(controller, name="stuck")
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "stuck"}})
    assert calls.reached("stuck")
    api.create({"metadata": {"name": "free"}})  # the single worker was replaced
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "free"), timeout=10)
    assert not managed(kube_emulator, "stuck")
    release.set()  # the late result is discarded, then the key is retried
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "stuck"), timeout=10)
    assert calls["stuck"] >= 2
    text = harness.metrics.render().decode()
    assert 'controller_runtime_reconcile_timeouts_total{controller="stuck"} 1.0' in text


def test_stop_drains_in_flight_passes_and_joins_threads(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    before = set(threading.enumerate())
    started, release = threading.Event(), threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def slow(cm: ConfigMap) -> ConfigMap:
        started.set()
        assert release.wait(10)
        cm.data = {"managed": "yes"}
        return cm

    runtime = harness.run(controller, name="drain")
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "x"}})
    assert started.wait(10)
    result: list[bool] = []
    stopper = threading.Thread(target=lambda: result.append(runtime.stop(timeout=10)))
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive()  # waiting for the pass in flight
    assert not runtime.ready
    release.set()
    stopper.join(10)
    assert result == [True]
    assert managed(kube_emulator, "x")  # the write was not cancelled half way
    harness.close()
    harness.runtimes.clear()
    ours = [t for t in set(threading.enumerate()) - before if not t.name.startswith("emulator")]
    assert [t.name for t in ours if t.is_alive()] == []


def test_stop_leaves_queued_keys_and_drain_processes_them(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    def blocking(label: str) -> tuple[ControllerRuntime, list[str], threading.Event]:
        seen: list[str] = []
        started, release = threading.Event(), threading.Event()
        controller: Controller[ConfigMap] = Controller(
            ConfigMap, workers=1, label_selector=f"lane={label}"
        )

        @controller.reconcile()
        def hold(cm: ConfigMap) -> None:
            seen.append(cm.name or "")
            started.set()
            assert release.wait(10)

        runtime = harness.run(controller, name=label)
        for index in range(3):
            kube_emulator.create_object(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"{label}-{index}", "labels": {"lane": label}},
                }
            )
        assert started.wait(10)  # one pass in flight, the other keys queued behind it
        assert wait_until(lambda: runtime.queue.pending == 2, timeout=10)
        return runtime, seen, release

    stopped, stopped_seen, stopped_release = blocking("stop")
    drained, drained_seen, drained_release = blocking("drain")
    results: list[bool] = []
    stopper = threading.Thread(target=lambda: results.append(stopped.stop(timeout=10)))
    drainer = threading.Thread(target=lambda: results.append(drained.drain(timeout=10)))
    stopper.start()
    drainer.start()
    stopped_release.set()
    drained_release.set()
    stopper.join(15)
    drainer.join(15)
    assert results == [True, True]
    assert len(stopped_seen) == 1  # the queued keys were left unstarted
    assert sorted(drained_seen) == ["drain-0", "drain-1", "drain-2"]  # processed first
