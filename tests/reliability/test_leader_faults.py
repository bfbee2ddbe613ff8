"""Leader handoffs of a whole operator under API faults: replicas hand over one after the
other while objects change and the Lease endpoint fails now and then; reconcile passes of
two replicas never interleave, and the last leader converges everything.
(Lease-level checks over many forced handoffs live in tests/leader.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import LeaderElection
from cloudcoil_sync.testing import Emulator

from .conftest import CONFIGMAPS, Record, Running, configmap, converge, echo_operator, same_view

LEASES = ("coordination.k8s.io", "v1", "leases")
LEASE_PATH = r"^/apis/coordination\.k8s\.io/v1/namespaces/default/leases"


class Passes:
    """(monotonic time, replica) of every reconcile pass entry, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[float, int]] = []

    def hook(self, replica: int) -> Callable[[ConfigMap], None]:
        def enter(cm: ConfigMap) -> None:
            with self.lock:
                self.entries.append((time.monotonic(), replica))

        return enter

    def seen(self, replica: int) -> bool:
        with self.lock:
            return any(entry[1] == replica for entry in self.entries)

    def order(self) -> list[int]:
        """Replica ids in time order, runs collapsed: [0, 1, 2] when nobody interleaved."""
        with self.lock:
            entries = sorted(self.entries)
        runs: list[int] = []
        for _, replica in entries:
            if not runs or runs[-1] != replica:
                runs.append(replica)
        return runs


def test_handoffs_under_faults_never_interleave_and_converge(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    kube = kube_emulator
    kube_config.client(LEASES).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "reliability"},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 0},
        }
    )
    passes = Passes()
    configs: list[Config] = []
    replicas: list[Running] = []

    def replica(index: int) -> Running:
        config = kube.config()
        configs.append(config)
        election = LeaderElection(
            "reliability",
            identity=f"replica-{index}",
            lease_duration=6,
            renew_deadline=5,
            retry_period=0.1,
        )
        app, _ = echo_operator(
            config,
            Record(),
            hook=passes.hook(index),
            election=election,
        )
        running = Running(app)
        running.thread.start()  # a standby is not ready: do not wait here
        replicas.append(running)
        return running

    def holder() -> str:
        lease = kube.get_object("coordination.k8s.io", "leases", "default", "reliability")
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    api = kube_config.client(CONFIGMAPS)
    expected = {f"cm-{i:02d}": "v0" for i in range(60)}
    try:
        first = replica(0)
        first.app.wait_ready(timeout=20)
        for name, value in expected.items():
            kube.create_object(configmap(name, value))
        for index in (1, 2):
            standby = replica(index)
            # Renewals and the standby's polls fail for a while (the client retries them).
            kube.faults.inject(503, count=4, method="PUT", path=LEASE_PATH)
            kube.faults.inject(500, count=4, method="GET", path=LEASE_PATH)
            for i, name in enumerate(sorted(expected)[index * 10 : index * 10 + 20]):
                expected[name] = f"v{index}-{i}"
                api.merge_patch(name, {"data": {"value": expected[name]}})
            leader = replicas[index - 1]
            # A stop starts no new pass (queued keys are left to the successor): let the
            # leader run one first, so that every replica appears in the order below.
            assert wait_until(lambda: passes.seen(index - 1), 15)  # noqa: B023
            assert leader.close(timeout=30) is None  # in-flight passes end, Lease released
            successor = f"replica-{index}"
            assert kube.wait_for(lambda: holder() == successor, timeout=15)  # noqa: B023
            standby.app.wait_ready(timeout=15)
            kube.drop_watches(abort=True)
        assert converge(kube, expected, timeout=20) == []
        assert same_view(kube, replicas[-1].app.controllers[0], timeout=10)
        assert passes.order() == [0, 1, 2], "passes of two replicas interleaved"
    finally:
        for running in replicas:
            if running.thread.is_alive():
                running.close()
        for config in configs:
            config.close()
    assert holder() == ""  # the last leader released the Lease on stop
