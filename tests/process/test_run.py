"""`Application.run(stop=)` against the emulator: reconcile, readiness, drain, Config ownership."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Manager
from cloudcoil_sync.testing import Emulator

from .apps import settings_app
from .conftest import Calls, StartApp, configmap, managed, write_kubeconfig


def test_run_reconciles_selected_configmaps(
    kube_emulator: Emulator, kube_config: Config, running: StartApp
) -> None:
    kube_emulator.create_object(configmap("selected", data={"a": "1"}))
    kube_emulator.create_object(configmap("ignored", labelled=False))
    calls = Calls()
    app = settings_app(config=kube_config, calls=calls)
    assert not app.ready and not app.healthy and app.manager is None

    run = running(app)
    app.wait_ready(timeout=15)
    assert app.ready and app.healthy
    assert isinstance(app.manager, Manager) and app.manager.ready
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "selected"), timeout=15)
    assert kube_emulator.get_object("", "configmaps", "default", "selected")["data"]["a"] == "1"

    kube_emulator.create_object(configmap("later"))
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "later"), timeout=15)
    assert not managed(kube_emulator, "ignored")
    assert ("reconcile", "ignored") not in calls.log

    assert run.close() is None
    assert not app.ready and not app.healthy
    # A supplied Config stays open and usable.
    assert not kube_config.transport.closed
    assert kube_config.client(ConfigMap).get("selected").name == "selected"


def test_stop_lets_the_pass_in_flight_finish(kube_emulator: Emulator, kube_config: Config) -> None:
    entered, release = threading.Event(), threading.Event()
    order = Calls()

    def block(config: ConfigMap) -> None:
        if config.name == "slow":
            entered.set()
            assert release.wait(20)
            order.add("pass finished")

    app = settings_app(config=kube_config, hook=block)
    stop = threading.Event()

    def target() -> None:
        app.run(stop=stop)
        order.add("run returned")

    thread = threading.Thread(target=target)
    thread.start()
    try:
        app.wait_ready(timeout=15)
        kube_emulator.create_object(configmap("slow"))
        assert entered.wait(15)
        stop.set()
        # Readiness is withdrawn at once, but run() waits for the pass.
        assert kube_emulator.wait_for(lambda: not app.ready, timeout=5)
        assert kube_emulator.wait_for(lambda: not app.manager.ready, timeout=5)
        assert thread.is_alive() and order.log == []
        release.set()
        thread.join(20)
        assert not thread.is_alive()
    finally:
        release.set()
        stop.set()
        thread.join(20)
    # (A pass queued before the queue closed may also drain; run() returns last.)
    assert order.log[0] == "pass finished" and order.log[-1] == "run returned"
    # The pass's write went through before the Config could be torn down.
    assert managed(kube_emulator, "slow")


def test_an_application_runs_once(kube_config: Config, running: StartApp) -> None:
    app = settings_app(config=kube_config)
    run = running(app)
    app.wait_ready(timeout=15)
    with pytest.raises(RuntimeError, match=r"^Application instances can only run once$"):
        app.run(stop=threading.Event())
    assert run.close() is None
    with pytest.raises(RuntimeError, match=r"^Application instances can only run once$"):
        app.run(stop=threading.Event())
    with pytest.raises(RuntimeError, match="Register application components before running"):
        app.controller(ConfigMap)


def test_owned_config_is_loaded_and_closed(
    kube_emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, running: StartApp
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(kube_emulator, tmp_path / "kubeconfig")))
    monkeypatch.delenv("CLOUDCOIL_NAMESPACE", raising=False)
    kube_emulator.create_object(configmap("owned"))
    app = settings_app()
    run = running(app)
    app.wait_ready(timeout=15)
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "owned"), timeout=15)
    config = app.manager.config
    assert isinstance(config, Config) and config.namespace == "default"
    assert not config.transport.closed
    assert run.close() is None
    assert config.transport.closed


def test_stop_before_start_returns_and_wait_ready_reports_it(kube_config: Config) -> None:
    app = settings_app(config=kube_config)
    stop = threading.Event()
    stop.set()
    app.run(stop=stop)
    assert app.manager is None
    with pytest.raises(RuntimeError, match="Application stopped before becoming ready"):
        app.wait_ready(timeout=5)


def test_wait_ready_raises_the_failure(kube_config: Config, running: StartApp) -> None:
    from .test_manager import widgets  # a kind whose CRD is not installed

    app = settings_app(config=kube_config)
    app.include(widgets(sync_timeout=10))
    run = running(app)
    with pytest.raises(Exception, match="is its CRD installed"):
        app.wait_ready(timeout=15)
    assert run.done.wait(15)
    assert run.error is not None and "is its CRD installed" in str(run.error)
    assert not app.healthy and not app.ready


def test_wait_ready_times_out(kube_config: Config, running: StartApp) -> None:
    from cloudcoil_sync.controller import LeaderElection

    kube_config.client(("coordination.k8s.io", "v1", "leases")).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "settings"},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600},
        }
    )
    election = LeaderElection("settings", lease_duration=3, renew_deadline=2, retry_period=0.2)
    app = settings_app(config=kube_config, leader_election=election)
    running(app)
    with pytest.raises(TimeoutError, match=r"did not become ready within 0\.3s"):
        app.wait_ready(timeout=0.3)
    assert app.healthy and not app.ready
    assert app.manager.informer_count == 0


def test_a_component_ending_by_itself_fails_the_run(
    kube_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ends_at_once(self: Manager, on_exit: ExitCallback | None = None) -> None:
        assert on_exit is not None
        on_exit(None)  # the manager ended without error and without being asked to

    monkeypatch.setattr(Manager, "start", ends_at_once)
    app = settings_app(config=kube_config)
    stop = threading.Event()
    with pytest.raises(RuntimeError, match=r"^An operator component stopped unexpectedly$"):
        app.run(stop=stop)
    assert stop.is_set()  # the exit callback woke run() through its one stop event
    assert not app.healthy
    with pytest.raises(RuntimeError, match="An operator component stopped unexpectedly"):
        app.wait_ready(timeout=1)


def test_drain_is_bounded_by_shutdown_timeout(
    kube_emulator: Emulator,
    kube_config: Config,
    running: StartApp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    entered, release = threading.Event(), threading.Event()

    def stuck(config: ConfigMap) -> None:
        entered.set()
        release.wait(30)

    app = settings_app(config=kube_config, hook=stuck, controller_options={"shutdown_timeout": 0.5})
    run = running(app)
    try:
        app.wait_ready(timeout=15)
        kube_emulator.create_object(configmap("stuck"))
        assert entered.wait(15)
        run.stop.set()
        # run() gives up on the pass after shutdown_timeout instead of hanging.
        assert run.done.wait(15) and run.error is None
        assert not release.is_set()
        assert "still running after shutdown_timeout" in caplog.text
    finally:
        release.set()
