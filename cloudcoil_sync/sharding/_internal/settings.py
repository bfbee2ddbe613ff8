"""`Sharding`: the settings of one ring, passed to `Application(..., sharding=...)`."""

from __future__ import annotations

import math
import os
import socket
from typing import TYPE_CHECKING

from cloudcoil_sync._internal.names import dns_label
from cloudcoil_sync.sharding._internal.labels import shard_key, shard_label_value
from cloudcoil_sync.sharding._internal.placer import Placer

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["IDENTITY_ENV", "Sharding"]

#: Overrides the host name as the shard identity (e.g. the Pod name from the downward API).
IDENTITY_ENV = "CLOUDCOIL_SHARD_IDENTITY"


class Sharding:
    """Spread an Application's controllers over its replicas (see docs/sharding.md).

    Every replica holds the Lease ``<ring>-shard-<identity>`` and reconciles the objects
    labelled ``shard.sharding.cloudcoil.dev/<ring>=<identity>``; the holder of the Lease
    ``<ring>`` also assigns objects to live shards. ``ring`` defaults to the Application's
    name, ``identity`` to ``$CLOUDCOIL_SHARD_IDENTITY`` or the host name (a Pod's name).
    Durations are the Leases' (as `LeaderElection`'s: 15/10/2 s). New objects are labelled
    by their target shard; the coordinator assigns one that no shard claimed within
    ``grace`` seconds (default one lease duration). At start-up a replica claims nothing
    until the ring's live shards stayed the same for ``settle`` seconds (default two retry
    periods; at most four times that), so replicas started together do not shuffle objects.
    With ``placing_webhook`` (needs ``Application(webhook=...)``) a mutating webhook labels
    each new object of the controllers' primary kinds at its creation, so nobody claims it;
    the API server waits ``placing_timeout`` seconds for it, then creates the object as it
    is (failurePolicy Ignore) and a claim places it.
    """

    def __init__(
        self,
        ring: str | None = None,
        *,
        identity: str | None = None,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        assign_workers: int = 4,
        grace: float | None = None,
        settle: float | None = None,
        placing_webhook: bool = False,
        placing_timeout: int = 2,
    ) -> None:
        self.ring = dns_label(ring, "Sharding ring") if ring is not None else None
        chosen = identity or os.environ.get(IDENTITY_ENV) or socket.gethostname().lower()
        self.identity = shard_label_value(chosen)
        for label, value in (("lease_duration", lease_duration), ("retry_period", retry_period)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{label} must be a number of seconds")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{label} must be a positive number of seconds")
        grace = lease_duration if grace is None else grace
        settle = 2 * retry_period if settle is None else settle
        for label, value in (("grace", grace), ("settle", settle)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{label} must be a number of seconds")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{label} must be zero or a positive number of seconds")
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("Require 0 < retry_period < renew_deadline < lease_duration")
        if isinstance(assign_workers, bool) or not isinstance(assign_workers, int):
            raise TypeError("assign_workers must be an int")
        if assign_workers < 1:
            raise ValueError("assign_workers must be at least 1")
        if not isinstance(placing_webhook, bool):
            raise TypeError("placing_webhook must be True or False")
        if (
            isinstance(placing_timeout, bool)
            or not isinstance(placing_timeout, int)
            or not 1 <= placing_timeout <= 30
        ):
            raise ValueError("placing_timeout must be an integer between 1 and 30 (seconds)")
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.assign_workers = assign_workers
        self.grace = float(grace)
        self.settle = float(settle)
        self.placing_webhook = placing_webhook
        self.placing_timeout = placing_timeout
        #: The placing webhook's decisions (fed by the running replica's view of the ring).
        self.placer = Placer(lambda: self.ring_name)
        self.namespace: str | None = None
        self.config: Config | None = None

    def bind(self, name: str, namespace: str) -> None:
        """Called by the Application: the default ring name and the Leases' namespace."""
        self.ring = self.ring or name
        self.namespace = namespace

    @property
    def ring_name(self) -> str:
        if self.ring is None:
            raise RuntimeError("Sharding is not bound to an Application")
        return self.ring

    @property
    def shard_lease(self) -> str:
        """This replica's Lease."""
        return f"{self.ring_name}-shard-{self.identity.lower().replace('_', '-')}"

    @property
    def selector(self) -> str:
        """The label selector of this replica's share."""
        return f"{shard_key(self.ring_name)}={self.identity}"

    def __repr__(self) -> str:
        return f"<Sharding ring={self.ring!r} identity={self.identity!r}>"
