"""An API latency model: the service times of a real kube-apiserver, added by the emulator.

The emulator answers in tens of microseconds, so an operator that is fast on it may still be
latency-bound on a real server, where a PATCH takes milliseconds and a 2-core machine serves
only a few requests at once. ``Emulator(latency="kube-apiserver-1.32")`` makes each request
take one of ``slots`` server slots for its verb's service time (sleeping, not burning CPU)
before it is answered, so the latency seen by one client and the throughput that many
clients can get both follow the server measured. ``bench/apilatency.py`` measures a server
(real or emulated) the same way, to derive a profile or check one.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass

__all__ = ["PROFILES", "LatencyModel", "ServiceSlots", "latency_model"]


@dataclass(frozen=True)
class LatencyModel:
    """Service times in seconds per verb; `slots` requests are served at once.

    A list costs ``list_base`` plus ``list_per_kib`` for each KiB of the answer. Watches
    are not delayed (their events leave as the writes that cause them are answered).
    """

    name: str
    get: float
    list_base: float
    list_per_kib: float
    create: float
    update: float
    patch: float
    delete: float
    slots: int = 2

    def __post_init__(self) -> None:
        times = (self.get, self.list_base, self.list_per_kib, self.create, self.update)
        if min((*times, self.patch, self.delete)) < 0 or self.slots < 1:
            raise ValueError(f"latency model {self.name!r}: times must be >= 0 and slots >= 1")

    def service_time(self, verb: str, size: int = 0) -> float:
        """Seconds a request of `verb` (and, for a list, `size` bytes answered) takes."""
        if verb == "list":
            return self.list_base + self.list_per_kib * size / 1024
        return float(getattr(self, verb, 0.0) if verb in _VERBS else 0.0)


class ServiceSlots:
    """One emulator's server slots under a model (each emulator has its own)."""

    def __init__(self, model: LatencyModel) -> None:
        self.model = model
        self._slots = threading.BoundedSemaphore(model.slots)
        self._lock = threading.Lock()
        self._busy = 0
        self.peak = 0  # most requests in service at once
        self.served: collections.Counter[str] = collections.Counter()

    def serve(self, verb: str, size: int = 0) -> None:
        """Hold a slot for the verb's service time (the request's thread sleeps)."""
        seconds = self.model.service_time(verb, size)
        if seconds <= 0:
            return
        with self._slots:
            with self._lock:
                self._busy += 1
                self.peak = max(self.peak, self._busy)
                self.served[verb] += 1
            try:
                time.sleep(seconds)
            finally:
                with self._lock:
                    self._busy -= 1


_VERBS = frozenset({"get", "create", "update", "patch", "delete"})

# Measured with bench/apilatency.py against kube-apiserver v1.32.0-beta.0 + etcd 3.4 on
# loopback, 2 cores, client-certificate admin (bench/results-real.md): medians at one client,
# mean of two runs; two slots, as the 2 cores give the floor's PATCH loop about 300/s at 16
# clients (2 / 6.3 ms = 317/s) and GETs about 400-570/s.
PROFILES: dict[str, LatencyModel] = {
    "kube-apiserver-1.32": LatencyModel(
        "kube-apiserver-1.32",
        get=0.0035,
        list_base=0.0035,
        list_per_kib=0.000045,
        create=0.0060,
        update=0.0066,
        patch=0.0063,
        delete=0.0072,
        slots=2,
    ),
}


def latency_model(value: str | LatencyModel | None) -> LatencyModel | None:
    """The model for an `Emulator(latency=...)` argument (a profile name or a model)."""
    if value is None or isinstance(value, LatencyModel):
        return value
    try:
        return PROFILES[value]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown latency profile {value!r} (known: {known})") from None
