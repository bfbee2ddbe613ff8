"""The coordinator's fallback: a live shard that never claims (a Lease renewed by the test,
no process behind it) gets its objects assigned by the coordinator after the grace period;
once its Lease stops being renewed they are reassigned to the real shards, and converge."""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import ExitStack
from datetime import UTC, datetime

from cloudcoil.models.kubernetes.coordination.v1 import Lease
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.sharding import RING_LABEL, ObjectRef, pick_shard
from cloudcoil_sync.testing import Emulator

from .harness import RING, Ledger, Replica, configmap, converged, placement
from .test_emulator import moved

GHOST = "ghost"
OBJECTS = 60


def ghost_lease(config: Config, stop: threading.Event) -> threading.Thread:
    """A shard Lease held by GHOST, renewed every 0.3 s until `stop`."""
    leases = config.client(Lease).raw
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": f"{RING}-shard-{GHOST}",
            "namespace": "default",
            "labels": {RING_LABEL: RING},
        },
        "spec": {"holderIdentity": GHOST, "leaseDurationSeconds": 2},
    }

    leases.create(lease)

    def renew() -> None:
        while not stop.wait(0.3):
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            leases.merge_patch(lease["metadata"]["name"], {"spec": {"renewTime": now}})

    thread = threading.Thread(target=renew, name="ghost-lease")
    thread.start()
    return thread


def test_objects_no_shard_claims_are_assigned_then_reassigned_when_it_dies() -> None:
    ledger = Ledger()
    with Emulator() as kube, ExitStack() as stack:
        config = Config(server=kube.url, token=kube.admin_token, ca_data=kube.ca_pem)
        stack.callback(config.close)
        stop = threading.Event()
        renewing = ghost_lease(config, stop)
        stack.callback(renewing.join, 10)
        stack.callback(stop.set)
        replicas = [Replica(kube, f"r{i}", ledger, stack, grace=0.5).start() for i in range(2)]
        live = {"r0", "r1", GHOST}
        for index in range(OBJECTS):
            kube.create_object(configmap(f"cm-{index}"))
        ghosts = {
            f"cm-{index}"
            for index in range(OBJECTS)
            if pick_shard(live, ObjectRef("", "ConfigMap", "default", f"cm-{index}")) == GHOST
        }
        assert ghosts
        # The ghost never writes: its objects are placed (by the fallback), not converged.
        assert kube.wait_for(
            lambda: (
                {name for name, (shard, _) in placement(kube).items() if shard == GHOST} == ghosts
            ),
            timeout=60,
        )
        # counted once the patch has returned: the label may be seen first
        assert wait_until(lambda: moved(replicas)[0]["new"] == len(ghosts), 30), moved(replicas)

        stop.set()  # the ghost's Lease expires: its objects go to the live shards
        renewing.join(10)
        assert kube.wait_for(lambda: converged(kube, {"r0", "r1"}), timeout=60)
        assert wait_until(lambda: moved(replicas)[0]["dead"] == len(ghosts), 30), moved(replicas)
        assert Counter(shard for shard, _ in placement(kube).values()).keys() == {"r0", "r1"}
        for replica in replicas:
            assert replica.close() is None
    assert ledger.overlapping() == []
