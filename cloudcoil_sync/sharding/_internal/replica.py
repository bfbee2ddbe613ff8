"""What an application builds for a sharded replica, in one place: its shard Lease and the
controllers' filter, then its claimer and its bid for the ring Lease (which coordinates).

The application reaches the sharding package's parts through this module only (and
`kinds`, for the placing webhook's routes): one seam instead of one per part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.sharding._internal.claim import Claimer
from cloudcoil_sync.sharding._internal.coordinator import CoordinatorMetrics
from cloudcoil_sync.sharding._internal.election import RingElection
from cloudcoil_sync.sharding._internal.kinds import sharded_kinds
from cloudcoil_sync.sharding._internal.settings import Sharding
from cloudcoil_sync.sharding._internal.shard import ShardElection, ShardFilter

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import Controller, LeaderElection

__all__ = ["RingElection", "ring_members", "shard_members"]


def shard_members(
    sharding: Sharding, config: Config, registry: CollectorRegistry
) -> tuple[ShardElection, ShardFilter]:
    """The replica's own shard Lease (its Manager's election) and the controllers' filter."""
    election, shard = ShardElection(sharding, config), ShardFilter(sharding)
    shard.bind_metrics(registry)
    return election, shard


def ring_members(
    sharding: Sharding,
    config: Config,
    controllers: Sequence[Controller[Any]],
    election: LeaderElection,
    registry: CollectorRegistry,
) -> tuple[Claimer, RingElection]:
    """The claimer (labels this replica's new objects; the placing webhook's view) and the
    bid for the ring Lease, in the order they start."""
    claimer = Claimer(
        sharding, config, sharded_kinds(controllers, config.namespace), election, registry
    )
    sharding.placer.attach(claimer.placing_view)  # the placing webhook, if served
    metrics = CoordinatorMetrics(sharding.ring_name, registry)
    return claimer, RingElection(sharding, config, claimer, metrics)
