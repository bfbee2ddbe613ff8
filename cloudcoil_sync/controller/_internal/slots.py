"""`HandlerSlots`: what a controller's `workers` bounds — its handlers running at once.

A pass takes a slot before it takes a key and gives it back as soon as its handler returns
(or when it ends without one: stale, invalid, refused); its own guarded write, the failure
report and the Events' flush come after, on the same thread, outside the bound. A worker
blocked on its write's answer (~6-12 ms against a real API server) then no longer holds a
handler back: with ``workers=4`` four handlers run while more writes are in flight, as kopf
runs its patches outside its handler executor. The pool has `pass_threads(workers)` threads.

One key is still in one pass at a time (the queue's rule), so a pass's write always
completes before the next pass of the same key begins.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["MIN_PASS_THREADS", "HandlerSlots", "Slot", "pass_threads"]

#: Passes in flight at least, whatever `workers` is. A real API server's CPU per write falls
#: with writes in flight (etcd and the apiserver batch them): twelve beat eight in 8 of 8
#: paired rounds and sixteen in 7 of 8 (bench/results-real.md, issue 45, eighth session).
MIN_PASS_THREADS = 12


def pass_threads(workers: int) -> int:
    """The pool's threads for `workers` handler slots: writes in flight beyond the handlers."""
    return max(workers, MIN_PASS_THREADS)


class HandlerSlots:
    """`size` slots taken and given back by the pool's threads; closing wakes every taker."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._closed = False
        self._waiting = 0
        # `with self._lock` where nothing waits: a Condition's own `with` is Python code.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def take(self) -> Slot | None:
        """Wait for a free slot; None once closed (the pool is stopping)."""
        with self._lock:
            while not self._free and not self._closed:
                self._waiting += 1
                try:
                    self._changed.wait()
                finally:
                    self._waiting -= 1
            if self._closed:
                return None
            self._free -= 1
        return Slot(self)

    def close(self) -> None:
        """Stop handing out slots: every thread waiting in `take` gets None."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    def _give(self) -> None:
        with self._lock:
            self._free += 1
            if self._waiting:
                self._changed.notify()


class Slot:
    """One taken slot; `give` returns it once, whichever of the worker (its handler
    returned, or its pass ended) and the watchdog (the pass was abandoned) comes first."""

    __slots__ = ("_once", "_slots", "then")

    def __init__(self, slots: HandlerSlots) -> None:
        self._slots = slots
        self._once = threading.Lock()
        self.then: Callable[[], None] | None = None  # once given (the busy-workers gauge)

    def give(self) -> None:
        if self._once.acquire(blocking=False):
            self._slots._give()
            if self.then is not None:
                self.then()
