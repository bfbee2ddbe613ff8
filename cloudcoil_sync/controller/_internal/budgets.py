"""Stop budgets: how long each step of an operator's stop may take, in one place, and the
Pod's ``terminationGracePeriodSeconds`` derived from them.

The stop after SIGTERM, in order (docs/architecture.md), each step bounded by its budget:

1. a sharded replica's claimer, then its bid for the ring Lease: `SHARDING_STOP` each;
2. the Manager (`StopPlan.manager`):
   - the leader work (`leader_work`): passes drain within the controllers' longest
     ``shutdown_timeout``; the term's write fence waits `WRITE_GRACE` for a write on the wire;
     informers stop within `INFORMER_STOP`; the leader lifespan exits within
     `LEADER_LIFESPAN_STOP`;
   - the election releases its Lease within `lease_release` of its request timeout;
   - the health server stops within `HEALTH_STOP`;
3. the webhook host, draining since the stop began (answers close their connections), stops
   accepting once steps 1-2 are done and ``WebhookServer.drain_delay`` has passed since the
   stop began, then lets its requests finish within ``WebhookServer.shutdown_timeout``.

`StopPlan.total` is their sum, the drain delay counting only where it outlasts steps 1-2;
`StopPlan.termination_grace` adds `EXIT_MARGIN` (the process lifespan's exit, the Config's
close, the interpreter's exit), so the kubelet never kills the process before its own
budgets run out (a held Lease is released, not left to expire).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "DEFAULT_GRACE",
    "EXIT_MARGIN",
    "HEALTH_STOP",
    "INFORMER_STOP",
    "LEADER_LIFESPAN_STOP",
    "SHARDING_STOP",
    "WRITE_GRACE",
    "StopPlan",
    "leader_work",
    "lease_release",
    "lease_request_timeout",
]

#: How long a write already on the wire may take to be answered once a fence closes (the
#: client's default read timeout); past it the Lease is left to expire, not released.
WRITE_GRACE = 30.0
#: The term's informers (one pool per Config), after the passes.
INFORMER_STOP = 10.0
#: The leader lifespan's cleanup, after the informers.
LEADER_LIFESPAN_STOP = 10.0
#: The health server's threads (waitress's loop and its task threads).
HEALTH_STOP = 5.0
#: A sharded replica's claimer, and its bid for the ring Lease (each), before the Manager.
SHARDING_STOP = 40.0
#: After the last budget: the process lifespan's exit, closing the Config, the exit itself.
EXIT_MARGIN = 5.0
#: Kubernetes' default terminationGracePeriodSeconds: the generated one is never shorter.
DEFAULT_GRACE = 30


def lease_request_timeout(renew_deadline: float) -> float:
    """A Lease elector's request timeout, as controller-runtime: max(1 s, renew_deadline / 2)."""
    return max(1.0, renew_deadline / 2)


def lease_release(http_timeout: float) -> float:
    """The election's stop: the release call, and the lease thread's call in flight."""
    return 3 * http_timeout + 1


def leader_work(shutdown_timeout: float) -> float:
    """The leader work's stop: passes, a write on the wire, informers, the leader lifespan."""
    return shutdown_timeout + WRITE_GRACE + INFORMER_STOP + LEADER_LIFESPAN_STOP


@dataclass(frozen=True)
class StopPlan:
    """What one operator process stops after SIGTERM, as the inputs of the budgets.

    ``shutdown_timeout``: the controllers' longest (None: no controllers, no Manager);
    ``lease_timeout``: the request timeout of the Manager's Lease elector (None: no Lease);
    ``health``: the Manager runs a HealthServer; ``webhook``: the webhook server's
    ``shutdown_timeout`` (None: no webhook host); ``sharded``: a sharded replica;
    ``drain_delay``: the webhook server's (it runs alongside the steps before it).
    """

    shutdown_timeout: float | None = None
    lease_timeout: float | None = None
    health: bool = False
    webhook: float | None = None
    sharded: bool = False
    drain_delay: float = 0.0

    def manager(self) -> float:
        """The Manager's stop: leader work, then the Lease's release, then the health server."""
        if self.shutdown_timeout is None:
            return 0.0
        release = 0.0 if self.lease_timeout is None else lease_release(self.lease_timeout)
        return leader_work(self.shutdown_timeout) + release + (HEALTH_STOP if self.health else 0.0)

    def total(self) -> float:
        """Every step of the stop, in order: the longest it may take before the process exits."""
        sharding = 2 * SHARDING_STOP if self.sharded and self.shutdown_timeout is not None else 0.0
        if self.webhook is None:
            return sharding + self.manager()
        # The webhook host stops once the steps before it are done and its drain delay
        # (counted from the stop's start) has passed.
        return max(sharding + self.manager(), self.drain_delay) + self.webhook

    def termination_grace(self) -> int:
        """The Pod's ``terminationGracePeriodSeconds``: the whole stop and `EXIT_MARGIN`, at
        least `DEFAULT_GRACE`."""
        return max(DEFAULT_GRACE, math.ceil(self.total() + EXIT_MARGIN))
