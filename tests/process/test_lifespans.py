"""Process and leader lifespans: order around the components and the event types at exit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application, LifecycleEvent, LifecycleType
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import LeadershipLost
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime
from cloudcoil_sync.testing import Emulator

from .apps import settings_app
from .conftest import (
    LEASES,
    Calls,
    StartApp,
    configmap,
    fast_election,
    lease,
    managed,
    released_lease,
)
from .test_manager import widgets


def record_lifespans(app: Application, kube: Emulator, log: Calls) -> None:
    """Log each lifespan's entry and exit with what the runtime looked like then."""

    def holder() -> str:
        return str(lease(kube).get("spec", {}).get("holderIdentity"))

    def informers() -> tuple[int, bool] | None:
        """(informers created, whether any of them still runs)."""
        if app.manager is None:
            return None
        runtimes = [cast(ControllerRuntime, c.runtime) for c in app.controllers if c.runtime]
        live = any(r.informer_for(kind).running for r in runtimes for kind in r.controller.kinds)
        return app.manager.informer_count, live

    @app.lifespan()
    def process(event: LifecycleEvent) -> Iterator[None]:
        log.add(("process", "enter", event.type, event.identity))
        try:
            yield
        finally:
            log.add(("process", "exit", event.type, type(event.error).__name__, holder()))

    if app.leader_election is not None:

        @app.lifespan(scope="leader")
        def leader(event: LifecycleEvent) -> Iterator[None]:
            log.add(("leader", "enter", event.type, informers()))
            try:
                yield
            finally:
                log.add(
                    (
                        "leader",
                        "exit",
                        event.type,
                        type(event.error).__name__,
                        holder(),
                        informers(),
                    )
                )


def entries(log: Calls, scope: str) -> list[tuple[Any, ...]]:
    return [item for item in log.log if item[0] == scope]


def test_normal_stop(kube_emulator: Emulator, kube_config: Config, running: StartApp) -> None:
    released_lease(kube_config)
    log = Calls()
    entered, release = threading.Event(), threading.Event()

    def slow(config: ConfigMap) -> None:
        entered.set()
        assert release.wait(20)
        log.add(("pass finished", config.name))

    election = fast_election()
    app = settings_app(config=kube_config, leader_election=election, hook=slow)
    record_lifespans(app, kube_emulator, log)
    run = running(app)
    app.wait_ready(timeout=15)
    kube_emulator.create_object(configmap("one"))
    assert entered.wait(15)
    run.stop.set()
    assert kube_emulator.wait_for(lambda: not app.manager.ready, timeout=5)
    assert lease(kube_emulator)["spec"]["holderIdentity"] == election.identity
    release.set()
    assert run.close() is None

    me = election.identity
    assert log.log[0] == ("process", "enter", LifecycleType.STARTUP, me)
    # Leader work starts after the Lease, before any informer.
    assert log.log[1] == ("leader", "enter", LifecycleType.LEADERSHIP_ACQUIRED, (0, False))
    # The pass in flight finished, then the informers stopped, then the leader cleanup ran
    # while the Lease was still held; it was released before the process cleanup.
    assert log.log[2] == ("pass finished", "one")
    assert log.log[-2] == ("leader", "exit", LifecycleType.SHUTDOWN, "NoneType", me, (1, False))
    assert log.log[-1] == ("process", "exit", LifecycleType.SHUTDOWN, "NoneType", "")
    assert managed(kube_emulator, "one")
    assert not election.is_leader


def test_leadership_lost(kube_emulator: Emulator, kube_config: Config, running: StartApp) -> None:
    released_lease(kube_config)
    log = Calls()
    app = settings_app(config=kube_config, leader_election=fast_election())
    record_lifespans(app, kube_emulator, log)
    run = running(app)
    app.wait_ready(timeout=15)
    kube_config.client(LEASES).delete("settings")
    assert run.done.wait(15)
    assert isinstance(run.error, LeadershipLost)
    assert "Lost leadership of Lease settings" in str(run.error)
    assert [item[:4] for item in entries(log, "leader")] == [
        ("leader", "enter", LifecycleType.LEADERSHIP_ACQUIRED, (0, False)),
        ("leader", "exit", LifecycleType.LEADERSHIP_LOST, "LeadershipLost"),
    ]
    assert entries(log, "process")[-1][:4] == (
        "process",
        "exit",
        LifecycleType.LEADERSHIP_LOST,
        "LeadershipLost",
    )
    assert not app.healthy and not app.ready


def test_failure_of_leader_work(
    kube_emulator: Emulator, kube_config: Config, running: StartApp
) -> None:
    released_lease(kube_config)
    log = Calls()
    app = settings_app(config=kube_config, leader_election=fast_election())
    app.include(widgets(sync_timeout=10))  # its CRD is missing: fatal at sync
    record_lifespans(app, kube_emulator, log)
    run = running(app)
    assert run.done.wait(20)
    assert run.error is not None and "is its CRD installed" in str(run.error)
    leader = entries(log, "leader")
    assert [item[:4] for item in leader] == [
        ("leader", "enter", LifecycleType.LEADERSHIP_ACQUIRED, (0, False)),
        ("leader", "exit", LifecycleType.FAILURE, "InformerFailed"),
    ]
    assert leader[-1][4] == app.leader_election.identity  # released only after cleanup
    assert log.log[-1] == ("process", "exit", LifecycleType.FAILURE, "InformerFailed", "")


def test_process_lifespan_without_election(
    kube_emulator: Emulator, kube_config: Config, running: StartApp
) -> None:
    log = Calls()
    app = settings_app(config=kube_config)
    record_lifespans(app, kube_emulator, log)
    run = running(app)
    app.wait_ready(timeout=15)
    assert log.log == [("process", "enter", LifecycleType.STARTUP, None)]
    assert run.close() is None
    assert log.log[-1][:3] == ("process", "exit", LifecycleType.SHUTDOWN)


def test_failing_setup_runs_nothing(kube_config: Config) -> None:
    app = settings_app(config=kube_config)

    @app.lifespan()
    def broken() -> Iterator[None]:
        raise OSError("database unavailable")
        yield

    with pytest.raises(OSError, match="database unavailable"):
        app.run()
    assert app.manager is None and not app.healthy
