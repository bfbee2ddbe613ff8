"""Stop budgets: how long each step of a stop may take, in one place.

The stop order (docs/architecture.md): passes drain within the controllers'
`shutdown_timeout`; the term's write fence closes and waits `WRITE_GRACE` for writes on the
wire; informers stop within `INFORMER_STOP`; the leader work as a whole gets
`leader_work(shutdown_timeout)`; then the election releases the Lease within
`lease_release(http_timeout)`; the health server stops within `HEALTH_STOP`.
`operator_stop` is the sum a Pod's `terminationGracePeriodSeconds` must cover so that the
kubelet never kills the process before the Lease is released.
"""

from __future__ import annotations

__all__ = [
    "HEALTH_STOP",
    "INFORMER_STOP",
    "LEADER_WORK_MARGIN",
    "MANAGER_STOP_MARGIN",
    "WRITE_GRACE",
    "leader_work",
    "lease_release",
    "manager_stop",
    "operator_stop",
]

#: How long a write already on the wire may take to be answered once a fence closes (the
#: client's default read timeout); past it the Lease is left to expire, not released.
WRITE_GRACE = 30.0
#: The term's informers (one pool per Config), after the passes.
INFORMER_STOP = 10.0
#: Beyond `shutdown_timeout + INFORMER_STOP`: leader lifespans and the write grace's tail.
LEADER_WORK_MARGIN = 20.0
#: The health server's threads (waitress's loop and its task threads).
HEALTH_STOP = 5.0
#: What the application grants a Manager (and the sharding claimer and ring) beyond the
#: controllers' shutdown_timeout: informers, lifespans, the Lease release.
MANAGER_STOP_MARGIN = 40.0


def leader_work(shutdown_timeout: float) -> float:
    """The leader work's stop: passes (`shutdown_timeout`), informers, lifespans."""
    return shutdown_timeout + INFORMER_STOP + LEADER_WORK_MARGIN


def lease_release(http_timeout: float) -> float:
    """The election's stop: the release call, and the lease thread's call in flight."""
    return 3 * http_timeout + 1


def manager_stop(shutdown_timeout: float) -> float:
    """The application's budget for its Manager's stop."""
    return shutdown_timeout + MANAGER_STOP_MARGIN


def operator_stop(shutdown_timeout: float, http_timeout: float) -> float:
    """The longest a Manager's stop may take, step by step, in order."""
    return leader_work(shutdown_timeout) + lease_release(http_timeout) + HEALTH_STOP
