"""One replica's side of a ring: its shard Lease, its informers' selector, drain answers.

`ShardElection` is a `LeaderElection` on the replica's own Lease, created first with the ring
label (the coordinator finds shards by it); holding it gives the replica's controllers the
same renew-deadline write fence as a leader's. `ShardFilter` is what a `ControllerRuntime`
asks: the selector of this shard's informers, and whether a pass is a drain request to
acknowledge instead of a reconcile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cloudcoil.models.kubernetes.coordination.v1 import Lease
from cloudcoil.resources import Resource
from prometheus_client import CollectorRegistry, Gauge

from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync.client import AlreadyExists, Config
from cloudcoil_sync.controller import LeaderElection
from cloudcoil_sync.sharding._internal.labels import (
    RING_LABEL,
    SHARD_MANAGER,
    drain_key,
    release_patch,
)
from cloudcoil_sync.sharding._internal.settings import Sharding

if TYPE_CHECKING:
    from cloudcoil_sync.client import ResourceClient
    from cloudcoil_sync.controller._internal.informer import Informer

__all__ = ["ShardElection", "ShardFilter"]

log = logging.getLogger("cloudcoil_sync.sharding")


class ShardElection(LeaderElection):
    """The replica's hold on its own shard Lease (labelled with the ring's name)."""

    def __init__(self, sharding: Sharding, config: Config | None = None) -> None:
        super().__init__(
            sharding.shard_lease,
            namespace=sharding.namespace,
            identity=sharding.identity,
            lease_duration=sharding.lease_duration,
            renew_deadline=sharding.renew_deadline,
            retry_period=sharding.retry_period,
            config=config,
        )
        self.ring = sharding.ring_name

    def start(
        self,
        on_exit: ExitCallback | Config | None = None,
        *,
        config: Config | None = None,
    ) -> None:
        """Label (or create) the shard Lease, then elect as `LeaderElection.start` does."""
        if isinstance(on_exit, Config):  # start(config), as LeaderElection accepts
            config, on_exit = on_exit if config is None else config, None
        chosen = config if config is not None else self.config
        if chosen is None:
            raise ValueError("ShardElection needs a Config")
        self._label_lease(chosen)
        super().start(on_exit, config=chosen)

    def _label_lease(self, config: Config) -> None:
        """Create the Lease unheld and labelled, or label an existing one."""
        leases = config.client(Lease).raw
        namespace = self.namespace or config.namespace
        labels = {RING_LABEL: self.ring}
        try:
            leases.create(
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": namespace, "labels": labels},
                    "spec": {},
                },
                namespace=namespace,
            )
        except AlreadyExists:
            leases.merge_patch(self.name, {"metadata": {"labels": labels}}, namespace=namespace)


class ShardFilter:
    """What a controller runtime of a sharded replica asks of its shard."""

    def __init__(self, sharding: Sharding) -> None:
        self.ring = sharding.ring_name
        self.identity = sharding.identity
        self._selector = sharding.selector
        self._drain = drain_key(self.ring)
        self._lock = threading.Lock()
        self._informers: list[Informer] = []
        self.released = 0

    def selector(self, base: str | None) -> str:
        """`base` (a controller's own selector) narrowed to this shard's objects."""
        return f"{base},{self._selector}" if base else self._selector

    def count(self, informer: Informer) -> None:
        """Count `informer`'s objects as this shard's (its primary informers)."""
        with self._lock:
            if informer not in self._informers:
                self._informers.append(informer)

    @property
    def objects(self) -> int:
        with self._lock:
            informers = list(self._informers)
        return sum(len(informer.store) for informer in informers)

    def bind_metrics(self, registry: CollectorRegistry) -> None:
        """``cloudcoil_sharding_shard_objects{ring,shard}``: the objects this replica owns."""
        gauge = Gauge(
            "cloudcoil_sharding_shard_objects",
            "Objects in this shard's primary informers",
            ("ring", "shard"),
            registry=registry,
        )
        gauge.labels(ring=self.ring, shard=self.identity).set_function(lambda: self.objects)

    def release(self, client: ResourceClient[Any], working: Resource) -> bool:
        """If `working` is asked to drain, let go of it (True): no reconcile for it here.

        Called at the start of a pass, so never while another pass of the object runs; the
        patch is guarded by the object's resourceVersion and fenced like the pass's writes.
        """
        metadata = working.metadata
        labels: Mapping[str, str] = (metadata.labels if metadata is not None else None) or {}
        if labels.get(self._drain) is None:
            return False
        assert metadata is not None and metadata.name is not None
        body = {
            "metadata": {
                "uid": metadata.uid,
                "resourceVersion": metadata.resource_version,
                "labels": dict(labels),
            }
        }
        client.raw.json_patch(
            metadata.name,
            release_patch(body, self.ring),
            namespace=metadata.namespace,
            field_manager=SHARD_MANAGER,
        )
        with self._lock:
            self.released += 1
        log.debug(
            "Shard %s released %s/%s for the ring %s",
            self.identity,
            metadata.namespace or "",
            metadata.name,
            self.ring,
        )
        return True
