"""3 sharded replicas, 2,000 objects, one replica killed and one added: every object
converges on a live shard, none is reconciled by two shards at once (the shared ledger of
pass intervals), no shard writes an object labelled for another (the emulator's event
history), and the request log, told apart by each replica's token, shows the reconcile
writes of every object sent by exactly the shards that stamped it."""

from __future__ import annotations

from contextlib import ExitStack

from waiting import wait_until

from cloudcoil_sync.controller import LeadershipLost
from cloudcoil_sync.testing import Emulator

from .harness import (
    Ledger,
    Replica,
    configmap,
    converged,
    foreign_writes,
    placement,
    reconcile_writers,
)

OBJECTS = 2000
TIMEOUT = 240.0


def test_kill_and_join_with_2000_objects_never_reconcile_an_object_twice_at_once() -> None:
    ledger = Ledger()
    with Emulator(log_size=1_000_000, history_size=1_000_000) as kube, ExitStack() as stack:
        for index in range(OBJECTS):
            kube.create_object(configmap(f"cm-{index}"))
        # Leases that a loaded machine (a whole suite beside it) does not lose by accident
        leases = {"lease_duration": 6, "renew_deadline": 4, "retry_period": 0.5}
        replicas = [Replica(kube, f"r{i}", ledger, stack, **leases).start() for i in range(3)]
        live = {"r0", "r1", "r2"}
        assert wait_until(lambda: converged(kube, live), TIMEOUT, interval=0.5)

        killed = replicas[1]
        killed.kill()  # no release: the coordinator waits its Lease out
        live.discard(killed.identity)
        assert wait_until(lambda: converged(kube, live), TIMEOUT, interval=0.5)

        joined = Replica(kube, "r3", ledger, stack, **leases).start()
        live.add(joined.identity)
        for index in range(OBJECTS, OBJECTS + 100):  # created while the ring rebalances
            kube.create_object(configmap(f"cm-{index}"))
        assert wait_until(lambda: converged(kube, live), TIMEOUT, interval=0.5)
        assert len(placement(kube)) == OBJECTS + 100

        assert isinstance(killed.close(), LeadershipLost)
        for replica in (replicas[0], replicas[2], joined):
            assert replica.close() is None

        writers = reconcile_writers(kube, {"r0", "r1", "r2", "r3"})
        foreign, stamped = foreign_writes(kube)
    assert ledger.overlapping() == []
    assert foreign == []
    assert len(writers) == OBJECTS + 100
    assert {name: set(users) for name, users in writers.items()} == stamped
    # The kill moved the killed shard's objects: whatever r1 wrote ends with another shard.
    moved = [users for users in writers.values() if "r1" in users]
    assert moved and all(users[-1] != "r1" for users in moved)
