"""`Placer`: the placing admission webhook's decision, a new object's shard at its creation.

With `Sharding(placing_webhook=True)` every replica serves a mutating webhook on CREATE of
each controller's primary kind (selected by the controller's label selector and by the
shard label's absence) whose answer labels the object for its target among the live shards,
as this replica last saw them. The object is then born placed: no replica ever decodes it as
unplaced and nobody patches it to claim it, so the cost of placing falls on the one replica
the API server's call reaches (≈1/N each behind a Service). Whatever the webhook does not
place (no answer in time, an object with generateName, whose name the API server makes
after admission, a replica not settled yet) is claimed as without it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.sharding._internal.kinds import ShardedKind, placement
from cloudcoil_sync.sharding._internal.labels import place_patch
from cloudcoil_sync.sharding._internal.ring import pick_shard

__all__ = ["LiveView", "Placer"]

JSON = dict[str, Any]
#: The live shards as the running replica sees them, or None while it cannot place.
LiveView = Callable[[], frozenset[str] | None]


def _nothing() -> frozenset[str] | None:
    return None


class Placer:
    """Labels created objects for their target shard once a running replica attached its
    view of the ring; places nothing before."""

    def __init__(self, ring: Callable[[], str]) -> None:
        self._ring = ring
        self._lock = threading.Lock()
        self._view: LiveView = _nothing

    def attach(self, view: LiveView | None) -> None:
        """Place by `view` from now on (None: stop placing; a run attaches, then detaches)."""
        with self._lock:
            self._view = view or _nothing

    def target(self, obj: JSON, kind: ShardedKind, namespace: str = "") -> str | None:
        """The shard `obj` (being created, of `kind`, in `namespace` if its metadata has
        none) belongs to, or None when it is not this webhook's to place."""
        with self._lock:
            view = self._view
        live = view()
        metadata = obj.get("metadata")
        if not live or not isinstance(metadata, dict) or not metadata.get("name"):
            return None
        if namespace and not metadata.get("namespace"):
            obj = {**obj, "metadata": {**metadata, "namespace": namespace}}
        found = placement(obj, kind, self._ring())
        if found is None or found.shard is not None:
            return None  # not placed by hash, or labelled already
        return pick_shard(live, found.ref)

    def patch(self, obj: JSON, kind: ShardedKind, namespace: str = "") -> list[JSON] | None:
        """The JSON patch that labels `obj` for its target, or None."""
        shard = self.target(obj, kind, namespace)
        return None if shard is None else place_patch(obj, self._ring(), shard)
