"""Per-object daemons and timers: a thread per object, stopped on deletion and shutdown."""

from __future__ import annotations

import threading

import pytest
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, DaemonStop

from .conftest import Calls, Harness, Widget, create_widget


def running(harness: Harness, controller: str, handler: str) -> float:
    value = harness.metrics.registry.get_sample_value(
        "cloudcoil_object_threads", {"controller": controller, "handler": handler}
    )
    return value or 0.0


def test_a_daemon_per_object_stops_on_deletion_and_on_shutdown(
    widgets: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget, events=False)
    controller.reconcile()(lambda w: None)
    failures = {"flaky": 0}

    @controller.daemon(retry=0.01)
    def watcher(w: Widget, stop: threading.Event) -> None:
        if w.name == "flaky" and failures["flaky"] == 0:
            failures["flaky"] += 1
            raise RuntimeError("flaky daemon failed once")
        calls.hit(f"started:{w.name}")
        stop.wait()  # until the object goes or the operator stops
        calls.hit(f"stopped:{w.name}")

    runtime = harness.run(controller, name="daemons")
    for name in ("a", "b", "flaky"):
        create_widget(widgets, name)
    assert all(calls.reached(f"started:{n}") for n in ("a", "b", "flaky"))
    assert wait_until(lambda: running(harness, "daemons", "watcher") == 3)
    assert any("flaky daemon failed once" in str(r.exc_info) for r in caplog.records if r.exc_info)
    widgets.client(Widget).raw.delete("a")
    assert calls.reached("stopped:a")
    assert runtime.daemons is not None and wait_until(lambda: runtime.daemons.running == 2)  # type: ignore[union-attr]
    assert calls["stopped:b"] == 0
    assert runtime.stop(timeout=5)
    assert calls["stopped:b"] == 1 and calls["stopped:flaky"] == 1
    assert runtime.daemons.running == 0 and calls["started:a"] == 1


def test_a_daemon_reads_the_object_as_it_is_now(widgets: Config, harness: Harness) -> None:
    calls = Calls()
    sizes: list[tuple[int | None, int | None]] = []
    controller: Controller[Widget] = Controller(Widget, events=False)
    controller.reconcile()(lambda w: None)

    @controller.daemon()
    def follow(w: Widget, stop: DaemonStop) -> None:
        while not stop.wait(0.01):
            latest = stop.latest()
            if latest is None:  # gone (or marked for deletion)
                calls.hit("gone")
                stop.wait()
                return
            size = latest.spec.size if latest.spec else None
            if not sizes or sizes[-1][1] != size:
                sizes.append((w.spec.size if w.spec else None, size))
                calls.hit(f"size:{size}")

    runtime = harness.run(controller, name="live")
    create_widget(widgets, "l1", size=1)
    assert calls.reached("size:1")
    widgets.client(Widget).raw.merge_patch("l1", {"spec": {"size": 5}})
    assert calls.reached("size:5")
    assert sizes == [(1, 1), (1, 5)]  # the argument stays the version it started with
    assert runtime.stop(timeout=5)


def test_timers_tick_per_object_and_idle_waits_for_quiet(widgets: Config, harness: Harness) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget, events=False)
    controller.reconcile()(lambda w: None)

    @controller.timer(interval=0.01)
    def tick(w: Widget) -> None:
        assert w.spec is not None
        calls.hit(f"tick:{w.name}:{w.spec.size}")

    @controller.timer(interval=0.01, idle=3600)
    def quiet(w: Widget) -> None:
        calls.hit(f"quiet:{w.name}")

    runtime = harness.run(controller, name="timers")
    create_widget(widgets, "t1", size=1)
    assert calls.reached("tick:t1:1", 3)
    widgets.client(Widget).raw.merge_patch("t1", {"spec": {"size": 2}})
    assert calls.reached("tick:t1:2", 2)  # the latest cached version
    assert runtime.stop(timeout=5)
    assert "quiet:t1" not in calls.counts  # changed less than an hour ago


def test_daemon_threads_are_bounded(widgets: Config, harness: Harness) -> None:
    calls = Calls()
    controller: Controller[Widget] = Controller(Widget, events=False)
    controller.max_object_threads = 2
    controller.reconcile()(lambda w: None)

    @controller.daemon()
    def hold(w: Widget, stop: threading.Event) -> None:
        calls.hit(f"started:{w.name}")
        stop.wait()

    runtime = harness.run(controller, name="bounded")
    for name in ("a", "b", "c"):
        create_widget(widgets, name)
    assert calls.wait(lambda: len(calls.counts) == 2)
    assert runtime.daemons is not None and runtime.daemons.running == 2
    first = calls.log[0].partition(":")[2]
    widgets.client(Widget).raw.delete(first)  # frees a thread: the waiting object gets it
    assert calls.wait(lambda: len(calls.counts) == 3)
    assert runtime.stop(timeout=5)


def test_daemon_and_timer_options_are_checked() -> None:
    controller: Controller[Widget] = Controller(Widget)
    with pytest.raises(ValueError, match="interval must be finite and positive"):
        controller.timer(interval=0)
    with pytest.raises(ValueError, match="initial_delay must not be negative"):
        controller.timer(interval=1, initial_delay=-1)
    with pytest.raises(ValueError, match="retry must be finite and positive"):
        controller.daemon(retry=float("inf"))
