"""`RouteSlots`: each admission route runs at most its own number of handlers at once.

A route whose handlers block (a stuck dependency) uses up its own slots only: its next
requests wait for one until their deadline and are answered 504, while every other route
keeps its slots. Saturation shows in the logs (a warning per route at most every 10 s) and,
registered on a Prometheus registry, in `cloudcoil_webhook_handlers_in_flight`,
`cloudcoil_webhook_handler_slots` and `cloudcoil_webhook_handlers_rejected_total`, each
labelled `webhook` with the route path.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["RouteSlots"]

log = logging.getLogger("cloudcoil_sync.admission")

_WARNING_INTERVAL = 10.0


class _Slots:
    """One route's tokens; SimpleQueue's get/put are C calls, cheaper than a Semaphore."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.free: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(capacity):
            self.free.put(None)
        self.rejected = 0
        self.next_warning = 0.0


class RouteSlots:
    """Handler slots per route path: `capacity` each, unless the route sets its own."""

    def __init__(self, capacity: int = 16) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError("Handler slots per route must be a positive integer")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._routes: dict[str, _Slots] = {}

    def acquire(self, path: str, capacity: int | None, timeout: float) -> bool:
        """Take a slot of `path` within `timeout` seconds; False (counted, logged) if none."""
        slots = self._routes.get(path) or self._create(path, capacity)
        try:
            slots.free.get(timeout=max(0.0, timeout))
            return True
        except queue.Empty:
            self._rejected(path, slots)
            return False

    def release(self, path: str) -> None:
        self._routes[path].free.put(None)

    def in_flight(self, path: str) -> int:
        slots = self._routes.get(path)
        return 0 if slots is None else max(0, slots.capacity - slots.free.qsize())

    def rejected(self, path: str) -> int:
        slots = self._routes.get(path)
        return 0 if slots is None else slots.rejected

    def _create(self, path: str, capacity: int | None) -> _Slots:
        with self._lock:
            slots = self._routes.get(path)
            if slots is None:
                slots = self._routes[path] = _Slots(capacity or self.capacity)
            return slots

    def _rejected(self, path: str, slots: _Slots) -> None:
        with self._lock:
            slots.rejected += 1
            now = time.monotonic()
            if now < slots.next_warning:
                return
            slots.next_warning = now + _WARNING_INTERVAL
        log.warning(
            "Admission route %s has all %d of its handler slots busy; a request waited "
            "until its deadline and was answered 504 (%d so far)",
            path,
            slots.capacity,
            slots.rejected,
        )

    # -- a Prometheus collector (read at scrape time) ----------------------------------------

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        in_flight = GaugeMetricFamily(
            "cloudcoil_webhook_handlers_in_flight",
            "Admission handlers running per route",
            labels=["webhook"],
        )
        capacity = GaugeMetricFamily(
            "cloudcoil_webhook_handler_slots",
            "Admission handlers a route may run at once",
            labels=["webhook"],
        )
        rejected = CounterMetricFamily(
            "cloudcoil_webhook_handlers_rejected",
            "Admission requests answered 504 for want of a free handler slot of their route",
            labels=["webhook"],
        )
        for path, slots in sorted(self._routes.items()):
            in_flight.add_metric([path], self.in_flight(path))
            capacity.add_metric([path], slots.capacity)
            rejected.add_metric([path], slots.rejected)
        yield from (in_flight, capacity, rejected)
