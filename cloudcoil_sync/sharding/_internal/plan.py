"""The coordinator's plan: given the live shards and what it sees of each object, which
label patches to send. Pure: no I/O, no clock.

Primary objects move with a drain handshake: an object on a live shard other than its target
is first marked to drain; its shard acknowledges by removing both labels; an unassigned
object (or one on a dead shard) is assigned at once. Children follow their controller owner's
current shard, directly (they are never reconciled on their own).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from cloudcoil_sync.sharding._internal.ring import ObjectRef, pick_shard

__all__ = ["Action", "Placement", "plan"]


@dataclass(frozen=True)
class Placement:
    """One object as the coordinator sees it."""

    ref: ObjectRef
    shard: str | None = None  # the assignment label's value
    draining: bool = False  # the drain label is set
    owner: ObjectRef | None = None  # the controller owner, for a child of a sharded kind


@dataclass(frozen=True)
class Action:
    """`assign`: set the shard label to `shard` (and drop a drain label); `drain`: ask
    `shard` (the current one) to let go of the object."""

    ref: ObjectRef
    verb: Literal["assign", "drain"]
    shard: str
    reason: Literal["new", "dead", "drain", "owner"]


def plan(
    shards: Collection[str],
    objects: Iterable[Placement],
    owners: Mapping[ObjectRef, str | None] | None = None,
) -> list[Action]:
    """The patches that move every object towards its target among `shards`.

    `owners` maps primary objects to their current shard (children follow it); an owner
    not in it is hashed as if it were assigned.
    """
    live = frozenset(shards)
    if not live:
        return []
    owners = owners or {}
    actions: list[Action] = []
    for placement in objects:
        action = (
            _child(live, placement, owners)
            if placement.owner is not None
            else _primary(live, placement)
        )
        if action is not None:
            actions.append(action)
    return actions


def _primary(live: frozenset[str], placement: Placement) -> Action | None:
    target = pick_shard(live, placement.ref)
    assert target is not None
    current = placement.shard
    if current is None:
        return Action(placement.ref, "assign", target, "new")
    if current not in live:
        return Action(placement.ref, "assign", target, "dead")
    if current == target or placement.draining:
        return None  # in place, or waiting for the old shard's acknowledgement
    return Action(placement.ref, "drain", current, "drain")


def _child(
    live: frozenset[str], placement: Placement, owners: Mapping[ObjectRef, str | None]
) -> Action | None:
    owner = placement.owner
    assert owner is not None
    if owner in owners:
        target = owners[owner]
        if target is None or target not in live:
            return None  # the owner is between shards: its child moves once it landed
    else:
        target = pick_shard(live, owner)
    assert target is not None
    if placement.shard == target:
        return None
    return Action(placement.ref, "assign", target, "owner")
