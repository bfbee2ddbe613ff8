"""``install`` creates the leader-election Lease released on a first install, so the first
replica leads at once (a Lease it created itself would be held a lease duration first)."""

from __future__ import annotations

import threading
from typing import Any

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.testing import Emulator

from .apps import NAMESPACE, gadgets
from .conftest import ROLLOUTS, Lines

pytestmark = ROLLOUTS

LEASES = ("coordination.k8s.io", "v1", "leases")


def lease(kube: Emulator) -> dict[str, Any] | None:
    return kube.get_object("coordination.k8s.io", "leases", NAMESPACE, "gadgets")


def test_first_install_creates_a_released_lease_the_first_replica_takes_at_once(
    kube: Emulator, config: Config, progress: Any, lines: Lines
) -> None:
    gadgets(None).install(image="gadgets:v1", config=config, progress=progress)
    created = lease(kube)
    assert created is not None and not created["spec"].get("holderIdentity")
    assert any(line.startswith("created Lease operators/gadgets: released") for line in lines.lines)

    # The operator's own identity (generated RBAC only) with the default 15 s lease.
    token = kube.service_account_token(NAMESPACE, "gadgets")
    leading, stop = threading.Event(), threading.Event()
    election = LeaderElection("gadgets", identity="replica-1")
    assert election.lease_duration_seconds == 15
    failures: list[BaseException] = []

    def work(work_stop: threading.Event) -> None:
        leading.set()
        work_stop.wait(30)

    with kube.config(namespace=NAMESPACE, token=token) as operator:

        def run() -> None:
            try:
                election.run(work, stop=stop, config=operator)
            except BaseException as error:  # asserted below
                failures.append(error)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            # Within 10 s: a Lease it had to wait out would take the 15 s lease duration.
            assert leading.wait(10)
        finally:
            stop.set()
            thread.join(30)
    assert failures == [] and not thread.is_alive()
    held = lease(kube)
    assert held is not None and held["spec"]["leaseTransitions"] == 1
    assert held["metadata"]["uid"] == created["metadata"]["uid"]


def test_an_existing_lease_is_never_touched(kube: Emulator, config: Config, progress: Any) -> None:
    config.client(LEASES).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "gadgets", "namespace": NAMESPACE},
            "spec": {"holderIdentity": "live-leader", "leaseDurationSeconds": 15},
        }
    )
    before = lease(kube)
    gadgets(None).install(image="gadgets:v1", config=config, progress=progress)
    assert lease(kube) == before


def test_an_upgrade_leaves_a_missing_lease_to_the_candidates(
    kube: Emulator, config: Config, progress: Any
) -> None:
    gadgets(None).install(image="gadgets:v1", config=config, progress=progress)
    # A Lease gone while the Deployment runs may hide a live leader: not recreated released.
    config.client(LEASES).delete("gadgets", namespace=NAMESPACE)
    gadgets(None).install(image="gadgets:v2", config=config, progress=progress)
    assert lease(kube) is None


def test_no_lease_without_election_nor_in_a_dry_run(
    kube: Emulator, config: Config, progress: Any
) -> None:
    gadgets(None).install(image="gadgets:v1", config=config, progress=progress, dry_run=True)
    assert lease(kube) is None
    app = gadgets(None, leader_election=False)
    app.install(image="gadgets:v1", config=config, progress=progress)
    assert lease(kube) is None
