"""Rendezvous hashing: stable, balanced, and minimal movement when shards join or leave."""

from __future__ import annotations

from collections import Counter

from cloudcoil_sync.sharding import ObjectRef, pick_shard

REFS = [ObjectRef("", "ConfigMap", f"ns-{i % 7}", f"cm-{i}") for i in range(3000)]


def owners(shards: list[str]) -> dict[ObjectRef, str | None]:
    return {ref: pick_shard(shards, ref) for ref in REFS}


def test_no_shard_owns_nothing() -> None:
    assert pick_shard([], REFS[0]) is None


def test_stable_across_orderings_and_known_value() -> None:
    shards = ["a", "b", "c"]
    assert owners(shards) == owners(list(reversed(shards)))
    # BLAKE2b, not hash(): the same answer in every process (recorded once).
    assert pick_shard(shards, ObjectRef("", "ConfigMap", "default", "x")) == "a"


def test_balanced_within_ten_percent() -> None:
    counts = Counter(owners(["a", "b", "c"]).values())
    assert set(counts) == {"a", "b", "c"}
    for count in counts.values():
        assert abs(count - 1000) < 100, counts


def test_join_moves_only_to_the_new_shard_about_one_in_n() -> None:
    before, after = owners(["a", "b", "c"]), owners(["a", "b", "c", "d"])
    moved = [ref for ref in REFS if before[ref] != after[ref]]
    assert all(after[ref] == "d" for ref in moved)
    assert abs(len(moved) - 750) < 100, len(moved)


def test_leave_moves_only_the_leavers_objects() -> None:
    before, after = owners(["a", "b", "c"]), owners(["a", "c"])
    for ref in REFS:
        if before[ref] != "b":
            assert after[ref] == before[ref]
        else:
            assert after[ref] in {"a", "c"}


def test_group_and_kind_take_part_in_the_hash() -> None:
    shards = [f"s{i}" for i in range(8)]
    differs = sum(
        pick_shard(shards, ref)
        != pick_shard(shards, ObjectRef("apps", "Deployment", ref.namespace, ref.name))
        for ref in REFS[:200]
    )
    assert differs > 100
