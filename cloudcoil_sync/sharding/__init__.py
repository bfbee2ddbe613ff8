"""Sharding: N replicas of one operator, each reconciling its own share of the objects.

See docs/sharding.md. `Sharding` is passed to `Application(..., sharding=...)`; the ring
hashing and the coordinator's plan are pure and usable on their own.
"""

from cloudcoil_sync.sharding._internal.labels import RING_LABEL, drain_key, shard_key
from cloudcoil_sync.sharding._internal.plan import Action, Placement, plan
from cloudcoil_sync.sharding._internal.ring import ObjectRef, pick_shard, score
from cloudcoil_sync.sharding._internal.settings import Sharding

__all__ = [
    "RING_LABEL",
    "Action",
    "ObjectRef",
    "Placement",
    "Sharding",
    "drain_key",
    "pick_shard",
    "plan",
    "score",
    "shard_key",
]
