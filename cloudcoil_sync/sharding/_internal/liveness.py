"""Which shards of a ring are live, judged from their Leases on this process's clock.

A shard is live while its Lease has a holder and this process saw its record change within
one lease duration (its monotonic clock: no trust in the holder's wall clock).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Liveness"]

JSON = dict[str, Any]


class Liveness:
    """The live shard identities among a ring's Leases, on this process's monotonic clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, tuple[tuple[Any, ...], float]] = {}

    def update(self, leases: Sequence[JSON]) -> tuple[set[str], float]:
        """(live shard identities, the monotonic time the next one may expire)."""
        now = self._clock()
        live: set[str] = set()
        next_expiry = math.inf
        names = set()
        for lease in leases:
            name = (lease.get("metadata") or {}).get("name", "")
            names.add(name)
            spec = lease.get("spec") or {}
            record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"))
            seen = self._seen.get(name)
            if seen is None or seen[0] != record:
                seen = self._seen[name] = (record, now)
            holder = spec.get("holderIdentity")
            expiry = seen[1] + float(spec.get("leaseDurationSeconds") or 0)
            if holder and now < expiry:
                live.add(str(holder))
                next_expiry = min(next_expiry, expiry)
        for name in set(self._seen) - names:
            del self._seen[name]
        return live, next_expiry
