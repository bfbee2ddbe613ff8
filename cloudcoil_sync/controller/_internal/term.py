"""`Term`: the stop semantics of leader work, in one place.

A term is one span of leader work: a leadership term under leader election, or the whole run
without it. Its controllers share one `Term`:

- `admits()` says whether a pass may *start* now: not once a stop was asked (any of the
  term's stop events, read directly, so a stop needs no polling round to take effect) and
  not while the term's write fence is closed (under election: the renew deadline passed).
  A worker that took a key in that moment gives it back unstarted (`PassRefused`).
- `fence` is the parent of every pass's own write fence: closing it refuses every further
  API write of the term's passes, and `close` waits for the writes already on the wire.

`shut_down(runtimes)` is the order on every stop (SIGTERM, `run(stop=)`, leadership loss,
a fatal error): the queues hand out no new key (queued keys are dropped: the next leader
lists them again), in-flight passes finish within their `shutdown_timeout` or are
abandoned, then the fence closes (waiting for writes on the wire). Only after it returns do
informers stop, leader lifespans exit and the Lease get released.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from cloudcoil_sync.client._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.queue import WorkQueue

__all__ = ["WRITE_GRACE", "PassRefused", "Term"]

log = logging.getLogger("cloudcoil_sync.manager")


class _Runtime(Protocol):
    """What shutting down uses of a `runtime.ControllerRuntime` (a protocol: no cycle)."""

    name: str
    queue: WorkQueue[Any]

    def stop(self, *, drain: bool = True, timeout: float | None = None) -> bool: ...


# How long a write already on the wire may take to be answered once the fence closes (the
# client's default read timeout); past it the Lease is left to expire, not released.
WRITE_GRACE = 30.0


class PassRefused(Exception):
    """A pass was not started: its term is stopping or its write fence is closed."""


class Term:
    """Admission of new passes and the write fence of one span of leader work."""

    def __init__(
        self,
        fence: WriteFence | None = None,
        stops: Sequence[threading.Event] = (),
    ) -> None:
        self.fence = fence if fence is not None else WriteFence(reason="the controllers stopped")
        self._stops = tuple(stops)
        self._ended = False

    def admits(self) -> bool:
        """May a pass start now?"""
        return not (self._ended or self.fence.closed or any(stop.is_set() for stop in self._stops))

    def check(self) -> None:
        """Raise `PassRefused` unless a pass may start now."""
        if not self.admits():
            raise PassRefused("no pass starts: the leader work is stopping or fenced")

    @property
    def ended(self) -> bool:
        return self._ended

    def watch(self, stop: threading.Event) -> None:
        """Also refuse passes once `stop` is set."""
        self._stops = (*self._stops, stop)

    def end(self) -> None:
        """Start no more passes (stops already set count without this)."""
        self._ended = True

    def shut_down(self, runtimes: Iterable[_Runtime], *, grace: float = WRITE_GRACE) -> bool:
        """Stop the runtimes' passes in order; True if nothing of theirs may still write."""
        self.end()
        runtimes = list(runtimes)
        for runtime in runtimes:
            runtime.queue.shutdown(immediate=True)  # every queue closed first: they stop together
        for runtime in reversed(runtimes):
            if not runtime.stop(drain=False):
                log.error(
                    "Controller %s: passes still running at shutdown_timeout; abandoned, "
                    "their writes fenced",
                    runtime.name,
                )
        if not self.fence.close(grace):
            log.error("A write was still on the wire %gs after the write fence closed", grace)
            return False
        return True
