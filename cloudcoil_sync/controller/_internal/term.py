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

That order is a `ServiceGroup` (`Term.services`): `Informers` first (started, for a warm
standby, before leading), then `Passes` (each controller's workers start once its informers
listed; its stop is `shut_down`). The group stops them in reverse: passes, then informers;
the Manager's leader lifespan and the election's release come after the group's stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from cloudcoil_sync._internal.service import ExitCallback, ServiceGroup
from cloudcoil_sync.controller._internal.budgets import WRITE_GRACE
from cloudcoil_sync.controller._internal.fence import WriteFence

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.informer_pool import InformerPool

__all__ = ["Informers", "PassRefused", "Passes", "Term", "TermRuntime"]

log = logging.getLogger("cloudcoil_sync.manager")


class _Queue(Protocol):
    def shutdown(self, *, immediate: bool = False) -> None: ...


class TermRuntime(Protocol):
    """What a term needs of a `ControllerRuntime` (a Protocol: runtime imports term)."""

    name: str

    @property
    def queue(self) -> _Queue: ...

    def start(self, on_exit: ExitCallback | None = None, *, wait: bool = False) -> None: ...

    def stop(self, timeout: float | None = None) -> bool: ...

    @property
    def ready(self) -> bool: ...

    @property
    def fatal_error(self) -> BaseException | None: ...


R = TypeVar("R", bound=TermRuntime)


class PassRefused(Exception):
    """A pass was not started: its term is stopping or its write fence is closed."""


class Term:
    """Admission of new passes and the write fence of one span of leader work."""

    def __init__(
        self,
        fence: WriteFence | None = None,
        stops: Sequence[threading.Event] = (),
    ) -> None:
        self.fence = (
            fence
            if fence is not None
            else WriteFence(reason="the controllers stopped", cause="shutdown")
        )
        self._stops = tuple(stops)
        self._ended = False
        self.elected = fence is not None  # a leadership term: its passes follow a takeover

    def admits(self) -> bool:
        """May a pass start now?"""
        if self._ended or self.fence.closed:
            return False
        return not any(map(threading.Event.is_set, self._stops))  # no generator: every pass

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

    def services(
        self,
        runtimes: Callable[[], Sequence[R]],
        pools: Callable[[], list[InformerPool]],
        *,
        informer_stop_timeout: float,
    ) -> ServiceGroup:
        """The term's group, its `Informers` added (add `Passes` when the work starts)."""
        group = ServiceGroup("leader work")
        group.add(Informers(runtimes, pools), stop_timeout=informer_stop_timeout)
        return group

    def shut_down(self, runtimes: Iterable[TermRuntime], *, grace: float = WRITE_GRACE) -> bool:
        """Stop the runtimes' passes in order; True if nothing of theirs may still write."""
        self.end()
        runtimes = list(runtimes)
        for runtime in runtimes:
            runtime.queue.shutdown(immediate=True)  # every queue closed first: they stop together
        for runtime in reversed(runtimes):
            if not runtime.stop():
                log.error(
                    "Controller %s: passes still running at shutdown_timeout; abandoned, "
                    "their writes fenced",
                    runtime.name,
                )
        if not self.fence.close(grace, cause="shutdown"):
            log.error("A write was still on the wire %gs after the write fence closed", grace)
            return False
        return True


class Informers(Generic[R]):
    """The informers of a term's controllers, as a `Service` (their failures reach the
    Manager through each runtime's `on_fatal`, not through `on_exit`)."""

    name = "informers"

    def __init__(
        self,
        runtimes: Callable[[], Sequence[R]],
        pools: Callable[[], list[InformerPool]],
    ) -> None:
        self._runtimes = runtimes
        self._pools = pools
        self._started = False

    def start(self, on_exit: ExitCallback | None = None) -> None:
        if self._started:
            return  # a warm standby's: started before leading
        self._started = True
        for runtime in self._runtimes():
            runtime.start()  # starts its pool's informers (every handler registered)

    def stop(self, timeout: float | None = None) -> bool:
        give_up = None if timeout is None else time.monotonic() + timeout
        stopped = True
        for pool in self._pools():
            left = None if give_up is None else max(0.0, give_up - time.monotonic())
            stopped = pool.stop(timeout=left) and stopped
        if not stopped:
            log.warning("Some informers did not stop within %gs", timeout)
        return stopped

    def wait_ready(self, timeout: float | None = None) -> bool:
        return all(pool.synced for pool in self._pools())

    def healthy(self) -> bool:
        return all(runtime.fatal_error is None for runtime in self._runtimes())


class Passes(Generic[R]):
    """The passes of a term's controllers, as a `Service`: `start` starts each controller's
    workers once `synced(runtime)` (the Manager's wait) says its informers listed; `stop`
    is the term's `shut_down`."""

    name = "passes"

    def __init__(
        self,
        term: Term,
        runtimes: Callable[[], Sequence[R]],
        synced: Callable[[R], bool],
    ) -> None:
        self._term = term
        self._runtimes = runtimes
        self._synced = synced

    def start(self, on_exit: ExitCallback | None = None) -> None:
        for runtime in self._runtimes():
            if not self._synced(runtime):
                return  # stopped while waiting: start no more

    def stop(self, timeout: float | None = None) -> bool:
        return self._term.shut_down(self._runtimes())

    def wait_ready(self, timeout: float | None = None) -> bool:
        return all(runtime.ready for runtime in self._runtimes())

    def healthy(self) -> bool:
        return all(runtime.fatal_error is None for runtime in self._runtimes())
