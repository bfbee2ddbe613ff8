"""Passes that outlive `reconcile_timeout`: abandoned, fenced, retried (emulator over HTTPS)."""

from __future__ import annotations

import logging
import threading

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config, WriteFenced
from cloudcoil_sync.client._internal import fence as write_fence
from cloudcoil_sync.controller import Context, Controller
from cloudcoil_sync.testing import Emulator

from .conftest import Calls, Harness

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
            guard = write_fence.current()
            assert guard is not None
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
