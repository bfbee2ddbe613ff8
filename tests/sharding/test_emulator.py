"""Sharded replicas against the emulator: each object on one live shard, reconciled by it,
moved with the drain handshake when shards join, reassigned at once when one stops."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_until

from cloudcoil_sync.sharding import ObjectRef, pick_shard
from cloudcoil_sync.testing import Emulator

from .harness import Ledger, Replica, configmap, converged, placement


def test_three_replicas_split_the_objects_and_rebalance_on_join_and_stop() -> None:
    ledger = Ledger()
    with Emulator() as kube, ExitStack() as stack:
        for index in range(90):
            kube.create_object(configmap(f"cm-{index}"))
        # grace: the coordinator's fallback never races a claim on a loaded machine
        replicas = [Replica(kube, f"r{i}", ledger, stack, grace=60).start() for i in range(3)]
        live = {"r0", "r1", "r2"}
        # r0 may claim most objects before r1 and r2 are up; they then move by drains, so
        # wait for the ring's placement, not only for every shard to hold something.
        assert kube.wait_for(lambda: settled(kube, live), timeout=60)
        shares = Counter(shard for shard, _ in placement(kube).values())
        assert min(shares.values()) > 15, shares

        before_moves, before_drains = moved(replicas)
        joined = Replica(kube, "r3", ledger, stack, grace=60).start()
        live.add("r3")
        assert kube.wait_for(lambda: settled(kube, live), timeout=60)
        shares = Counter(s for s, _ in placement(kube).values())
        assert set(shares) == live
        everyone = (*replicas, joined)
        assert wait_until(lambda: all(owned(r) == shares[r.identity] for r in everyone), 10)
        after_moves, after_drains = moved(everyone)
        moves = after_moves - before_moves
        drains = after_drains - before_drains
        # Only r3's share moved: drained from its old shard, released, then claimed by r3
        # itself (the coordinator waited for the ring to settle before draining).
        assert moves == Counter(drain=shares["r3"]), moves
        assert drains == shares["r3"]  # every drain acknowledged, and timed
        assert claims(joined) == shares["r3"]

        assert replicas[0].close() is None  # graceful: Lease released, reassigned at once
        live.discard("r0")
        assert kube.wait_for(lambda: converged(kube, live), timeout=60)
        for replica in (*replicas[1:], joined):
            assert replica.close() is None
    assert ledger.overlapping() == []


def settled(kube: Emulator, live: set[str]) -> bool:
    """Every object on the shard the ring picks among `live`, and last written by it."""
    return all(
        shard == writer == pick_shard(live, ObjectRef("", "ConfigMap", "default", name))
        for name, (shard, writer) in placement(kube).items()
    )


def samples(replica: Replica) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = replica.app.manager.metrics()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def owned(replica: Replica) -> int:
    key = ("cloudcoil_sharding_shard_objects", (("ring", "echo"), ("shard", replica.identity)))
    return int(samples(replica).get(key, -1))


def claims(replica: Replica) -> int:
    key = ("cloudcoil_sharding_claims_total", (("ring", "echo"), ("shard", replica.identity)))
    return int(samples(replica).get(key, 0))


def moved(replicas: tuple[Replica, ...] | list[Replica]) -> tuple[Counter[str], float]:
    """Label patches by reason, and drains timed, summed over the replicas' coordinators."""
    moves = Counter[str]()
    drains = 0.0
    for replica in replicas:
        for (name, labels), value in samples(replica).items():
            if name == "cloudcoil_sharding_moves_total":
                moves[dict(labels)["reason"]] += int(value)
            if name == "cloudcoil_sharding_drain_seconds_count":
                drains += value
    return moves, drains
