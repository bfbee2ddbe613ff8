"""The coordinator's plan: assignments, drains, dead shards and children following owners."""

from __future__ import annotations

from cloudcoil_sync.sharding import Action, ObjectRef, Placement, pick_shard, plan

A, B, C = "a", "b", "c"


def ref(name: str, kind: str = "Widget") -> ObjectRef:
    return ObjectRef("example.com", kind, "default", name)


def moving(shards: list[str], new: list[str]) -> ObjectRef:
    """An object whose target differs between the two shard sets."""
    for index in range(1000):
        candidate = ref(f"w-{index}")
        if pick_shard(shards, candidate) != pick_shard(new, candidate):
            return candidate
    raise AssertionError("no object moves")


def test_nothing_without_live_shards() -> None:
    assert plan([], [Placement(ref("w"))]) == []


def test_unassigned_objects_get_their_target() -> None:
    target = pick_shard([A, B], ref("w"))
    assert target is not None
    assert plan([A, B], [Placement(ref("w"))]) == [Action(ref("w"), "assign", target, "new")]


def test_objects_in_place_are_left_alone() -> None:
    target = pick_shard([A, B], ref("w"))
    assert plan([A, B], [Placement(ref("w"), shard=target)]) == []


def test_a_move_between_live_shards_drains_first_then_waits() -> None:
    obj = moving([A, B], [A, B, C])
    old = pick_shard([A, B], obj)
    assert old is not None
    assert plan([A, B, C], [Placement(obj, shard=old)]) == [Action(obj, "drain", old, "drain")]
    # Drain requested: wait for the old shard's acknowledgement (no second drain, no assign).
    assert plan([A, B, C], [Placement(obj, shard=old, draining=True)]) == []
    # Acknowledged (both labels gone): assigned to the new target.
    new = pick_shard([A, B, C], obj)
    assert new is not None and new != old
    assert plan([A, B, C], [Placement(obj)]) == [Action(obj, "assign", new, "new")]


def test_objects_of_a_dead_shard_are_reassigned_at_once() -> None:
    obj = moving([A, B, C], [A, C])
    assert pick_shard([A, B, C], obj) == B
    target = pick_shard([A, C], obj)
    assert target is not None
    for draining in (False, True):
        placement = Placement(obj, shard=B, draining=draining)
        assert plan([A, C], [placement]) == [Action(obj, "assign", target, "dead")]


def test_children_follow_their_owners_current_shard() -> None:
    owner, child = ref("w"), ref("w", kind="ConfigMap")
    assert plan([A, B], [Placement(child, shard=A, owner=owner)], {owner: B}) == [
        Action(child, "assign", B, "owner")
    ]
    assert plan([A, B], [Placement(child, shard=B, owner=owner)], {owner: B}) == []


def test_a_child_waits_while_its_owner_is_between_shards() -> None:
    owner, child = ref("w"), ref("w", kind="ConfigMap")
    assert plan([A, B], [Placement(child, shard=A, owner=owner)], {owner: None}) == []


def test_a_child_of_an_unseen_owner_is_hashed_by_the_owner() -> None:
    owner, child = ref("w"), ref("w", kind="ConfigMap")
    target = pick_shard([A, B, C], owner)
    assert target is not None
    assert plan([A, B, C], [Placement(child, owner=owner)]) == [
        Action(child, "assign", target, "owner")
    ]


def test_join_plans_drains_for_about_one_in_n_and_nothing_else() -> None:
    refs = [ref(f"w-{i}") for i in range(900)]
    placed = [Placement(r, shard=pick_shard([A, B], r)) for r in refs]
    actions = plan([A, B, C], placed)
    assert {action.verb for action in actions} == {"drain"}
    assert all(pick_shard([A, B, C], action.ref) == C for action in actions)
    assert 250 < len(actions) < 350
