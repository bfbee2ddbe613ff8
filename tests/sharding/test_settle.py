"""Replicas started together with objects already there: the ring settles before anyone
claims, so every object is placed once (claimed by its target) and none is drained."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

from cloudcoil_sync.testing import Emulator

from .harness import Ledger, Replica, configmap, converged, placement
from .test_emulator import claims, moved

OBJECTS = 300


def test_replicas_started_together_place_every_object_once() -> None:
    ledger = Ledger()
    with Emulator() as kube, ExitStack() as stack:
        for index in range(OBJECTS):
            kube.create_object(configmap(f"cm-{index}"))
        # settle: longer than the replicas take to hold their Leases on a loaded machine;
        # grace: no fallback assignment by the coordinator while the claims run
        settings = {"lease_duration": 8, "renew_deadline": 6, "retry_period": 0.5}
        replicas = [
            Replica(kube, f"r{i}", ledger, stack, settle=3.0, grace=60, **settings)
            for i in range(3)
        ]
        for replica in replicas:
            replica.thread.start()  # together: nobody waits for another to be ready
        for replica in replicas:
            replica.app.wait_ready(timeout=30)
        live = {"r0", "r1", "r2"}
        assert kube.wait_for(lambda: converged(kube, live), timeout=60)
        shares = Counter(shard for shard, _ in placement(kube).values())
        moves, drains = moved(replicas)
        assert sum(moves.values()) == 0 and drains == 0, moves  # nothing moved, nor assigned
        assert {r.identity: claims(r) for r in replicas} == shares  # each claimed its own
        for replica in replicas:
            assert replica.close() is None
    assert ledger.overlapping() == []
