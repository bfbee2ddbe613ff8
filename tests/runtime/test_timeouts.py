"""Passes that outlive `reconcile_timeout`: abandoned, fenced, retried (emulator over HTTPS)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from fake_clock import FakeClock
from waiting import wait_until

from cloudcoil_sync.client import Config, WriteFenced
from cloudcoil_sync.client._internal import gate as write_gate
from cloudcoil_sync.controller import Context, Controller
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.term import Term
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness, Widget, conditions, create_widget

LIMIT = 0.5


def marked(kube: Emulator, name: str) -> bool:
    found = kube.get_object("", "configmaps", "default", name) or {}
    return (found.get("data") or {}).get("managed") == "yes"


def test_writes_of_an_abandoned_pass_are_refused_and_the_key_is_retried(
    kube_emulator: Emulator,
    kube_config: Config,
    harness: Harness,
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = Calls()
    refused: list[BaseException] = []
    controller: Controller[ConfigMap] = Controller(ConfigMap, reconcile_timeout=LIMIT)

    @controller.reconcile()
    def late(cm: ConfigMap, ctx: Context[ConfigMap]) -> ConfigMap:
        if calls.hit(cm.name or "") == 1:
            guard = write_gate.current()
            assert isinstance(guard, WriteFence)
            assert guard.wait(LIMIT + 10)  # hang until the pass is abandoned
            try:
                ctx.client(ConfigMap).raw.create({"metadata": {"name": "late-child"}})
            except WriteFenced as error:
                refused.append(error)
                raise
        cm.data = {"managed": "yes"}
        return cm

    caplog.set_level(logging.INFO, "cloudcoil_sync")
    runtime = harness.run(controller, name="late")
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "slow"}})
    assert kube_emulator.wait_for(lambda: marked(kube_emulator, "slow"), timeout=10)
    assert len(refused) == 1 and "POST" in str(refused[0])
    assert kube_emulator.get_object("", "configmaps", "default", "late-child") is None
    assert runtime.queue.join(10)
    status = runtime.status
    assert status.cancellations == 1 and status.errors == 1 and calls["slow"] >= 2
    assert "Reconcile of default/slow timed out" in caplog.text  # logged as a timeout
    assert "Traceback" not in caplog.text  # the refusal is the timeout, not a handler bug


def test_a_hung_pass_releases_its_key_at_reconcile_timeout(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    release = threading.Event()
    controller: Controller[ConfigMap] = Controller(
        ConfigMap, reconcile_timeout=LIMIT, shutdown_timeout=0.5
    )

    @controller.reconcile()
    def hangs_once(cm: ConfigMap) -> ConfigMap:
        if calls.hit(cm.name or "") == 1:
            release.wait(30)  # never returns within the test
        cm.data = {"managed": "yes"}
        return cm

    harness.run(controller, name="hung")
    try:
        kube_config.client(ConfigMap).raw.create({"metadata": {"name": "hung"}})
        assert calls.reached("hung")
        # Abandoned at LIMIT, retried after the first backoff (harness: 0.05 s) while the
        # first handler is still blocked; the retry's write lands.
        assert calls.reached("hung", 2, timeout=LIMIT + 5)
        assert kube_emulator.wait_for(lambda: marked(kube_emulator, "hung"), timeout=10)
    finally:
        release.set()


def test_a_hung_pass_is_counted_as_an_error_at_the_timeout(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    calls = Calls()
    release = threading.Event()
    controller: Controller[ConfigMap] = Controller(
        ConfigMap, reconcile_timeout=LIMIT, shutdown_timeout=0.5
    )

    @controller.reconcile()
    def hangs_once(cm: ConfigMap) -> ConfigMap:
        if calls.hit(cm.name or "") == 1:
            release.wait(30)  # never returns within the test
        cm.data = {"managed": "yes"}
        return cm

    runtime = harness.run(controller, name="counted")
    try:
        kube_config.client(ConfigMap).raw.create({"metadata": {"name": "hung"}})
        assert calls.reached("hung", 2, timeout=LIMIT + 5)  # abandoned, then retried
        assert kube_emulator.wait_for(lambda: marked(kube_emulator, "hung"), timeout=10)
        assert runtime.queue.join(10)
        # The handler still hangs: the abandoned pass is already an error, a timeout, and no
        # longer an active worker (dashboards must not wait for a return that never comes).
        status = runtime.status
        assert (status.errors, status.cancellations, status.processing) == (1, 1, 0)
        text = harness.metrics.render().decode()
        assert 'controller_runtime_reconcile_timeouts_total{controller="counted"} 1.0' in text
        assert 'controller_runtime_active_workers{controller="counted"} 0.0' in text
    finally:
        release.set()


class Records(logging.Handler):
    """Log records of one logger tree, waited on with a timeout (no sleeps)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen = threading.Condition()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        with self.seen:
            self.records.append(record)
            self.seen.notify_all()

    def wait(self, *texts: str, timeout: float = 10.0) -> list[logging.LogRecord]:
        """The records whose message holds every one of ``texts``, once there is one."""

        def matching() -> list[logging.LogRecord]:
            return [r for r in self.records if all(t in r.getMessage() for t in texts)]

        with self.seen:
            self.seen.wait_for(lambda: bool(matching()), timeout)
            return matching()


def test_a_pass_past_its_timeout_is_visible_on_the_object(
    kube_emulator: Emulator, widgets: Config, harness: Harness
) -> None:
    release, calls = threading.Event(), Calls()
    controller: Controller[Widget] = Controller(Widget, reconcile_timeout=LIMIT)

    @controller.stage(condition="Sized")
    def sized(item: Widget) -> None:
        if calls.hit(item.name or "") == 1:
            release.wait(30)

    harness.run(controller, name="visible")
    create_widget(widgets, "w")

    def ready() -> dict[str, Any]:
        found = kube_emulator.get_object("example.com", "widgets", "default", "w") or {}
        return conditions(found).get("Ready", {})

    assert kube_emulator.wait_for(lambda: ready().get("reason") == "ReconcileTimedOut", 10)
    assert ready()["status"] == "False" and f"({LIMIT:g}s)" in ready()["message"]

    def warned() -> bool:
        events = kube_emulator.list_objects("events.k8s.io", "events", "default")
        return any(e["reason"] == "ReconcileTimedOut" and e["type"] == "Warning" for e in events)

    try:
        assert kube_emulator.wait_for(warned, 10)
    finally:
        release.set()  # the retry completes: Ready again
    assert kube_emulator.wait_for(lambda: ready().get("status") == "True", 10)


def test_a_slow_pass_is_logged_once_with_its_stack(kube_config: Config, harness: Harness) -> None:
    records = Records()
    logger = logging.getLogger("cloudcoil_sync.controller.sluggish")
    logger.addHandler(records)
    release = threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap, slow_pass_warning=0.2)

    @controller.reconcile()
    def stuck_in_here(cm: ConfigMap) -> None:
        release.wait(30)

    try:
        runtime = harness.run(controller, name="sluggish")
        kube_config.client(ConfigMap).raw.create({"metadata": {"name": "slow"}})
        (warning,) = records.wait("has been running for")
        release.set()
        assert runtime.queue.join(10)
    finally:
        release.set()
        logger.removeHandler(records)
    assert warning.levelno == logging.WARNING
    text = warning.getMessage()
    assert "default/slow" in text and "stuck_in_here" in text  # where the pass is blocked
    assert len(records.wait("has been running for")) == 1


def test_fence_causes_are_reported_as_what_they_are(
    kube_config: Config, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    lease = WriteFence(cause="shutdown", deadline_cause="renew_deadline")
    started, go = threading.Event(), threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap)

    @controller.reconcile()
    def write(cm: ConfigMap) -> ConfigMap:
        started.set()
        go.wait(30)
        cm.data = {"managed": "yes"}
        return cm

    harness.run(controller, name="fenced", term=Term(lease))
    kube_config.client(ConfigMap).raw.create({"metadata": {"name": "x"}})
    assert started.wait(10)
    lease.deadline = time.monotonic() - 1  # the Lease's renew deadline passed mid-pass
    records = Records()
    logging.getLogger("cloudcoil_sync.controller.fenced").addHandler(records)
    go.set()
    (line,) = records.wait("stopped writing")
    assert "(renew_deadline)" in line.getMessage() and "timed out" not in line.getMessage()
    text = harness.metrics.render().decode()
    assert 'cloudcoil_fenced_passes_total{cause="renew_deadline",controller="fenced"} 1.0' in text
    assert 'controller_runtime_reconcile_timeouts_total{controller="fenced"} 0.0' in text


def test_an_idle_slow_pass_watchdog_sleeps_until_a_pass_starts(
    kube_config: Config, harness: Harness
) -> None:
    records = Records()
    logger = logging.getLogger("cloudcoil_sync.controller.idle-watchdog")
    logger.addHandler(records)
    release = threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap, slow_pass_warning=0.2)

    @controller.reconcile()
    def maybe_stuck(cm: ConfigMap) -> None:
        if cm.name == "slow":
            release.wait(30)

    try:
        runtime = harness.run(controller, name="idle-watchdog")
        api = kube_config.client(ConfigMap).raw
        api.create({"metadata": {"name": "quick"}})
        assert runtime.queue.join(10)
        # Nothing running: the watchdog waits without a deadline (no timed wake) ...
        assert wait_until(lambda: runtime.workers._watch_idle, timeout=10)
        api.create({"metadata": {"name": "slow"}})
        # ... and the pass that starts wakes it: logged at its threshold. (On a loaded
        # machine the quick pass may have crossed 0.2 s too: only the slow one is asked.)
        assert len(records.wait("has been running for", "default/slow")) == 1
        release.set()
        assert runtime.queue.join(10)
    finally:
        release.set()
        logger.removeHandler(records)


def test_reconcile_timeout_is_read_on_the_runtime_clock(
    kube_config: Config, harness: Harness
) -> None:
    entered, release = threading.Event(), threading.Event()
    controller: Controller[ConfigMap] = Controller(ConfigMap, reconcile_timeout=30, workers=2)

    @controller.reconcile()
    def hang_once(cm: ConfigMap) -> None:
        if cm.name == "stuck" and not entered.is_set():
            entered.set()
            release.wait(30)

    clock = FakeClock()
    try:
        runtime = harness.run(controller, name="clocked", clock=clock)
        api = kube_config.client(ConfigMap).raw
        api.create({"metadata": {"name": "stuck"}})
        assert entered.wait(10)
        api.create({"metadata": {"name": "before"}})
        # Its pass settled (only the stuck key is still held): the clock may move.
        assert wait_until(
            lambda: runtime.status.successes >= 1 and runtime.queue.processing == 1, timeout=10
        )
        assert runtime.workers.timed_out == 0  # 30 s have not passed on the runtime's clock
        clock.advance(31)
        api.create({"metadata": {"name": "after"}})  # a pass starts: the watchdog looks again
        assert wait_until(lambda: runtime.workers.timed_out == 1, timeout=10)
        # Counted by the releaser, once the pass's report is on the object.
        assert wait_until(lambda: runtime.status.cancellations == 1, timeout=10)
    finally:
        release.set()
