"""`Manager`: validation, shared informers, metrics, fatal errors stopping siblings."""

from __future__ import annotations

import threading
from typing import Literal

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret
from cloudcoil.resources import Resource
from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import (
    Controller,
    LeaderElection,
    LeadershipLost,
    Manager,
    ResourceKey,
)
from cloudcoil_sync.crd import custom_resource
from cloudcoil_sync.testing import Emulator

from .conftest import LABEL, LEASES, Calls, configmap, released_lease


@custom_resource(api_version="example.com/v1", plural="widgets")
class Widget(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Widget"] = "Widget"


def nothing(request: object) -> None:
    return None


def widgets(**options: object) -> Controller[Widget]:
    """A controller for Widgets, whose CRD the emulator does not have."""
    return Controller(Widget, nothing, name="widgets", **options)  # type: ignore[arg-type]


class ManagerThread:
    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.manager.run(self.stop)
        except BaseException as error:
            self.error = error

    def join(self, timeout: float = 20) -> BaseException | None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive()
        return self.error


def labelled(calls: Calls, name: str) -> Controller[ConfigMap]:
    controller = Controller(ConfigMap, name=name, label_selector=f"{LABEL}=true")

    @controller.reconcile()
    def reconcile(config: ConfigMap) -> None:
        calls.add((name, config.name))

    return controller


def test_definition_checks() -> None:
    with pytest.raises(ValueError, match="at least one controller"):
        Manager()
    one = Controller(ConfigMap)
    with pytest.raises(ValueError, match="cannot be registered twice"):
        Manager(one, one)
    with pytest.raises(ValueError, match="distinct metric names"):
        Manager(Controller(ConfigMap, name="same"), Controller(Secret, name="same"))
    # Unnamed controllers get <kind>-<position>.
    assert Manager(Controller(ConfigMap), Controller(Secret)).names == ("configmap-1", "secret-2")
    # Two controllers of one kind whose objects may overlap would run concurrent passes.
    with pytest.raises(ValueError, match=r"unnamed ConfigMap controller #1 and .* #2"):
        Manager(Controller(ConfigMap), Controller(ConfigMap))
    Manager(  # disjoint scopes are fine
        Controller(ConfigMap, label_selector="tier=a"),
        Controller(ConfigMap, label_selector="tier=b"),
        Controller(ConfigMap, namespace="other"),
    )


def test_shared_informer_metrics_and_run_once(kube_emulator: Emulator, kube_config: Config) -> None:
    calls = Calls()
    first: Controller[ConfigMap] = Controller(ConfigMap, name="first")
    second: Controller[Secret] = Controller(Secret, name="second")

    @first.reconcile()
    def reconcile(config: ConfigMap) -> None:
        calls.add(("first", config.name))

    @second.watch(ConfigMap)  # the same view as `first`'s primary informer
    def note(config: ConfigMap) -> list[ResourceKey]:
        calls.add(("second", config.name))
        return []

    @second.reconcile()
    def ignore(secret: Secret) -> None:
        pass

    manager = Manager(first, second, config=kube_config)
    assert not manager.ready and not manager.healthy() and manager.informer_count == 0
    running = ManagerThread(manager)
    try:
        assert manager.wait_ready(timeout=15)
        assert manager.healthy() and first.ready and second.ready
        # ConfigMaps: one informer for both (same kind, namespace and selector); Secrets
        assert manager.informer_count == 2
        kube_emulator.create_object(configmap("shared"))
        assert calls.wait(lambda log: {("first", "shared"), ("second", "shared")} <= set(log))
        families = {f.name: f for f in text_string_to_metric_families(manager.metrics())}
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in families.values()
            for s in f.samples
        }
        assert samples[("cloudcoil_manager_ready", ())] == 1.0
        assert samples[("cloudcoil_manager_informers", ())] == 2.0
        assert samples[("cloudcoil_controller_ready", (("controller", "first"),))] == 1.0
        assert "controller_runtime_reconcile" in families
        with pytest.raises(RuntimeError, match="Manager instances can only run once"):
            manager.run(threading.Event())
    finally:
        assert running.join() is None
    assert not manager.ready and not manager.healthy()
    with pytest.raises(RuntimeError, match="Manager stopped before becoming ready"):
        manager.wait_ready(timeout=1)


def test_a_fatal_controller_error_stops_its_siblings(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    calls = Calls()
    sibling = labelled(calls, "sibling")
    failing: Controller[Secret] = Controller(Secret, name="failing")

    @failing.reconcile()
    def reconcile(secret: Secret) -> None:
        calls.add(("failing", secret.name))

    manager = Manager(sibling, failing, config=kube_config)
    running = ManagerThread(manager)
    try:
        assert manager.wait_ready(timeout=15)
        sibling_runtime = sibling.runtime
        assert sibling_runtime is not None and sibling_runtime.ready
        # The Secret informer's next watch is denied (RBAC changed under it): fatal.
        kube_emulator.faults.inject(403, count=100, method="GET", path="/secrets$")
        kube_emulator.drop_watches()
        running.thread.join(20)
        assert not running.thread.is_alive()
    finally:
        error = running.join()
        kube_emulator.faults.clear()
    assert error is not None and "403" in str(error)
    assert manager.failure is error and not manager.healthy() and not manager.ready
    # The sibling's workers and the shared informers were stopped.
    assert not sibling_runtime.ready
    assert not sibling_runtime.primary.running
    with pytest.raises(type(error)):
        manager.wait_ready(timeout=1)


def test_an_informer_failure_during_sync_is_raised(kube_config: Config) -> None:
    calls = Calls()
    manager = Manager(labelled(calls, "ok"), widgets(), config=kube_config)
    running = ManagerThread(manager)
    running.thread.join(20)
    error = running.join()
    assert error is not None and "is its CRD installed" in str(error)


def test_a_warm_standby_whose_informer_fails_stops_standing_by(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    kube_config.client(("coordination.k8s.io", "v1", "leases")).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "warm"},
            "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 3600},
        }
    )
    election = LeaderElection(
        "warm", warm=True, lease_duration=6, renew_deadline=5, retry_period=0.1
    )
    running = ManagerThread(Manager(widgets(), config=kube_config, leader_election=election))
    running.thread.join(20)  # ends by itself: the standby does not wait to lead to fail
    error = running.join()
    assert error is not None and "is its CRD installed" in str(error)
    assert not election.leading.is_set()


class Exits:
    """An on_exit callback: what ended the manager, once."""

    def __init__(self) -> None:
        self.errors: list[BaseException | None] = []
        self.called = threading.Event()

    def __call__(self, error: BaseException | None) -> None:
        self.errors.append(error)
        self.called.set()


def term_threads() -> list[str]:
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith(("cloudcoil-leader-work-", "cloudcoil-manager")) and t.is_alive()
    ]


def test_a_standby_manager_runs_no_thread_of_its_own_and_stops_as_a_service(
    kube_config: Config,
) -> None:
    kube_config.client(LEASES).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "held"},
            "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 3600},
        }
    )
    election = LeaderElection("held", lease_duration=6, renew_deadline=5, retry_period=0.1)
    manager = Manager(labelled(Calls(), "standby"), config=kube_config, leader_election=election)
    exits = Exits()
    before = term_threads()
    manager.start(exits)
    assert election.wait_ready(15) and not election.is_leader  # knows it stands by
    assert manager.healthy() and not manager.ready and manager.informer_count == 0
    assert term_threads() == before  # no term before leading: only the lease thread
    assert manager.stop(timeout=30) is True
    assert exits.errors == [] and not manager.healthy() and manager.failure is None


def test_a_loss_ends_the_started_manager_through_on_exit_once(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    released_lease(kube_config, "lost")
    election = LeaderElection("lost", lease_duration=6, renew_deadline=5, retry_period=0.1)
    calls = Calls()
    manager = Manager(labelled(calls, "leader"), config=kube_config, leader_election=election)
    exits = Exits()
    manager.start(exits)
    assert manager.wait_ready(timeout=15)
    assert [name for name in term_threads() if name == "cloudcoil-leader-work-lost"]
    kube_emulator.create_object(configmap("before-loss"))
    assert calls.wait(lambda log: ("leader", "before-loss") in log)
    kube_config.client(LEASES).delete("lost")
    assert exits.called.wait(15)
    assert manager.stop(timeout=30) is True  # the term drained; the election stopped
    assert len(exits.errors) == 1 and isinstance(exits.errors[0], LeadershipLost)
    assert "Lost leadership of Lease lost" in str(exits.errors[0])
    assert manager.failure is exits.errors[0] and not manager.healthy()
    assert "cloudcoil-leader-work-lost" not in term_threads()
