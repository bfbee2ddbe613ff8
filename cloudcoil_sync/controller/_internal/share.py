"""`Share`: what a controller's runtime needs of a sharded replica's share of the objects.

A Protocol, so that the controller layer does not import the sharding package above it
(`cloudcoil_sync.sharding`'s `ShardFilter` is the one implementation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cloudcoil.resources import Resource

    from cloudcoil_sync.client import ResourceClient
    from cloudcoil_sync.controller._internal.informer import Informer

__all__ = ["Share"]


class Share(Protocol):
    """Narrows informers to this replica's objects and answers drain requests."""

    def selector(self, base: str | None) -> str:
        """`base` label selector (or None) with this shard's assignment label added."""
        ...

    def count(self, informer: Informer) -> None:
        """Report the objects `informer` holds as this shard's (the shard_objects gauge)."""
        ...

    def release(self, client: ResourceClient[Any], working: Resource) -> bool:
        """Give `working` up if a drain was asked for it; whether it was released."""
        ...
