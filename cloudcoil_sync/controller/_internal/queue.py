"""A thread-safe, deduplicating work queue with per-key exponential backoff.

Semantics follow client-go's workqueue as cloudcoil 0.8 adapted it: adds coalesce, a key
is never handed to two workers at once, a key added while it is processed runs once more
after `done`, fresh adds supersede delayed retries. Delayed keys live in one heap; no
thread per timer: a waiting `get` sleeps until the next deadline (or until woken).
Each add may carry a cause (why the pass runs): the causes of coalesced adds are kept per
key (bounded, `CauseSet`) and handed to the pass that takes the key (`causes`).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sized
from typing import Generic, Protocol, TypeVar, overload

from cloudcoil_sync._internal.numbers import is_number
from cloudcoil_sync.controller._internal.causes import MAX_CAUSES, Cause

__all__ = ["CauseSet", "QueueClosed", "QueueMetrics", "WorkQueue"]

K = TypeVar("K", bound=Hashable)


class QueueClosed(Exception):
    """The queue was shut down and has no ready work left."""


class QueueMetrics(Protocol):
    """Hooks a queue calls. The counters run under its lock, so they must be cheap and
    never block; the durations are reported after the lock is released. Sizes are not
    pushed: read `pending` and `delayed` when they are wanted (at a scrape)."""

    def added(self) -> None:
        """A key became pending (client-go `workqueue_adds_total`)."""

    def retried(self) -> None:
        """A key was scheduled with a non-zero delay (`workqueue_retries_total`)."""

    def queued_for(self, seconds: float) -> None:
        """Time a key waited between becoming pending and a worker taking it."""

    def worked_for(self, seconds: float) -> None:
        """Time a worker held a key, from `get` to `done`."""


class _NoMetrics:
    def added(self) -> None:
        pass

    def retried(self) -> None:
        pass

    def queued_for(self, seconds: float) -> None:
        pass

    def worked_for(self, seconds: float) -> None:
        pass


class CauseSet(dict[Cause, None]):
    """The distinct causes of one key's coalesced adds, in order, at most `MAX_CAUSES`
    (then one `more` cause counting the rest)."""

    dropped = 0

    def note(self, cause: Cause) -> None:
        # One hash of the cause (a dataclass's __hash__ is Python code), not two.
        if len(self) < MAX_CAUSES:
            self.setdefault(cause, None)
        elif cause not in self:
            self.dropped += 1

    def merge(self, other: CauseSet) -> None:
        for cause in other:
            self.note(cause)
        self.dropped += other.dropped

    def items_out(self) -> tuple[Cause, ...]:
        more = (Cause("more", event=str(self.dropped)),) if self.dropped else ()
        return (*self, *more)


class WorkQueue(Generic[K]):
    """Serialize each key while different keys run concurrently on worker threads.

    Pair every successful `get` with `done` (in a `finally`). `retry` schedules the key
    after `base_delay * 2**attempt` seconds (attempts counted since the last `forget`),
    capped at `max_delay`, times a uniform jitter factor of 1 ± `jitter`. There is no
    retry limit and no global rate limit. `clock` (monotonic seconds) and `rng` can be
    injected for deterministic tests.
    """

    def __init__(
        self,
        *,
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        jitter: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        if not all(math.isfinite(v) for v in (base_delay, max_delay, jitter)):
            raise ValueError("Retry settings must be finite")
        if base_delay <= 0 or max_delay < base_delay or not 0 <= jitter <= 1:
            raise ValueError("Require 0 < base_delay <= max_delay and 0 <= jitter <= 1")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._jitter = jitter
        # Exponent beyond which base * 2**n would exceed max_delay anyway.
        self._max_exponent = math.ceil(math.log2(max_delay / base_delay))
        self._clock = clock
        self._rng = rng or random.Random()
        self._metrics: QueueMetrics = metrics or _NoMetrics()
        self._lock = threading.Lock()
        self._available = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        # Threads inside `_available.wait` / `_idle.wait_for`, changed under the lock: a
        # notify (Python code) is skipped when nobody waits, without losing a wake-up.
        self._getters = 0
        self._joiners = 0
        self._ready: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: dict[K, float] = {}  # key -> when a worker took it
        self._pending_since: dict[K, float] = {}  # key -> when it became pending
        self._delayed: dict[K, tuple[float, int]] = {}  # key -> (deadline, timer id)
        self._timers: list[tuple[float, int, K]] = []  # heap; stale entries skipped
        self._timer_ids = itertools.count()
        self._retries: dict[K, int] = {}
        self._causes: dict[K, CauseSet] = {}  # pending key -> why
        self._later: dict[K, CauseSet] = {}  # delayed key -> why
        self._taken: dict[K, tuple[Cause, ...]] = {}  # key in flight -> why (until `causes`)
        self._closed = False
        self._immediate = False

    # -- introspection -------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Ready keys waiting for a worker (not in flight, not delayed)."""
        return self._count(self._ready)

    @property
    def pending(self) -> int:
        """Keys waiting for a pass: ready, or added again while in flight (`workqueue_depth`)."""
        return self._count(self._dirty)

    @property
    def processing(self) -> int:
        """Keys currently held by workers."""
        return len(self._processing)  # one atomic read: due delayed keys do not matter here

    @property
    def delayed(self) -> int:
        """Keys with a pending retry or scheduled requeue."""
        return self._count(self._delayed)

    def _count(self, items: Sized) -> int:
        """`len(items)` once the due delayed keys were released."""
        with self._lock:
            self._release_due(self._clock())
            return len(items)

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    def due(self, key: K) -> float | None:
        """When the key's delayed add (retry or requeue) is due, on the queue's clock."""
        with self._lock:
            entry = self._delayed.get(key)
            return None if entry is None else entry[0]

    def num_retries(self, key: K) -> int:
        """Consecutive `retry` calls for the key since its last `forget`."""
        with self._lock:
            return self._retries.get(key, 0)

    def unfinished_work_seconds(self) -> float:
        """Total time the keys now in flight have been held (stuck workers show here)."""
        with self._lock:
            now = self._clock()
            return sum(now - start for start in self._processing.values())

    def longest_running_processor_seconds(self) -> float:
        """How long the oldest key now in flight has been held."""
        with self._lock:
            now = self._clock()
            return max((now - start for start in self._processing.values()), default=0.0)

    # -- producers -------------------------------------------------------------------

    def add(self, key: K, cause: Cause | None = None) -> None:
        """Ask for a pass now; a fresh add supersedes a delayed retry of the key (and its
        causes: the pass runs now for this one)."""
        with self._lock:
            if self._closed:
                return
            if self._delayed.pop(key, None) is not None:
                self._compact_timers()
                self._later.pop(key, None)
            if cause is not None:
                self._causes.setdefault(key, CauseSet()).note(cause)
            self._add_locked(key, self._clock())

    def add_after(self, key: K, delay: float, cause: Cause | None = None) -> None:
        """Ask for a pass after `delay` seconds, keeping an earlier pending deadline."""
        if not is_number(delay) or delay < 0:
            raise ValueError("delay must be finite and nonnegative")
        with self._lock:
            self._add_after_locked(key, delay, cause)

    def note_pending(self, cause: Cause) -> None:
        """Add `cause` to every key now pending (a takeover: the keys listed meanwhile)."""
        with self._lock:
            for key in self._dirty:
                self._causes.setdefault(key, CauseSet()).note(cause)

    def causes(self, key: K) -> tuple[Cause, ...]:
        """Why the pass that took `key` runs (once: the causes are handed over)."""
        return self._taken.pop(key, ())  # atomic; only the key's holder calls it

    def retry(self, key: K, cause: Cause | None = None) -> float:
        """Schedule the key with exponential backoff; return the delay chosen (0 if closed)."""
        with self._lock:
            if self._closed:
                return 0.0
            attempt = self._retries.get(key, 0)
            self._retries[key] = attempt + 1
            if attempt >= self._max_exponent:
                delay = self._max_delay
            else:
                delay = math.ldexp(self._base_delay, attempt)
            factor = self._rng.uniform(1 - self._jitter, 1 + self._jitter)
            delay = min(self._max_delay, delay * factor)
            self._add_after_locked(key, delay, cause)
            return delay

    def forget(self, key: K) -> None:
        """Reset the key's failure count (after success or a terminal error)."""
        if key not in self._retries:
            # The common case, without the lock every worker shares. A count is only added
            # by `retry` from the key's holder (or the releaser of its abandoned pass), not
            # concurrently with this call for the same pass; dict reads are atomic.
            return
        with self._lock:
            self._retries.pop(key, None)

    # -- consumers -------------------------------------------------------------------

    @overload
    def get(self) -> K: ...

    @overload
    def get(self, timeout: float) -> K | None: ...

    def get(self, timeout: float | None = None) -> K | None:
        """Take the next ready key, blocking until one is ready.

        Returns None when `timeout` (seconds) passes first; raises `QueueClosed` once
        the queue is shut down and drained.
        """
        give_up = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                now = self._clock()
                self._release_due(now)
                if self._ready:
                    key, waited = self._take_locked(now)
                    break
                if self._closed:
                    raise QueueClosed("The work queue is shut down")
                wait = self._timers[0][0] - now if self._timers else None
                if give_up is not None:
                    remaining = give_up - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._getters += 1
                try:
                    self._available.wait(wait)
                finally:
                    self._getters -= 1
        if waited is not None:
            self._metrics.queued_for(waited)
        return key

    def done(self, key: K) -> None:
        """Release a key taken with `get`; run it again if it was added meanwhile."""
        with self._lock:
            start = self._processing.pop(key, None)
            if start is None:
                raise ValueError(f"done() called for {key!r}, which is not being processed")
            worked = max(0.0, self._clock() - start)
            if key in self._dirty:
                self._ready.append(key)
                if self._getters:
                    self._available.notify()
            if self._joiners:
                self._changed()
        self._metrics.worked_for(worked)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until nothing is pending, in flight or delayed; False on timeout."""
        with self._lock:
            self._joiners += 1
            try:
                return self._idle.wait_for(self._is_idle, timeout)
            finally:
                self._joiners -= 1

    def shutdown(self, *, immediate: bool = False) -> None:
        """Refuse new work and drop timers and retry counts.

        With `immediate=False` workers may still drain the keys already pending; with
        `immediate=True` those are dropped too. In-flight keys still need `done`.
        """
        with self._lock:
            self._closed = True
            self._immediate = self._immediate or immediate
            self._delayed.clear()
            self._timers.clear()
            self._retries.clear()
            self._later.clear()
            if self._immediate:
                self._causes.clear()
                self._ready.clear()
                self._dirty.clear()
                self._pending_since.clear()
            self._available.notify_all()
            if self._joiners:
                self._changed()

    # -- internals (lock held) --------------------------------------------------------

    def _add_locked(self, key: K, now: float) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        self._pending_since.setdefault(key, now)
        self._metrics.added()
        if key not in self._processing:
            self._ready.append(key)
            if self._getters:
                self._available.notify()
        if self._joiners:
            self._changed()

    def _add_after_locked(self, key: K, delay: float, cause: Cause | None) -> None:
        if self._closed:
            return
        now = self._clock()
        if delay == 0:
            if self._delayed.pop(key, None) is not None:
                self._compact_timers()
                self._later.pop(key, None)
            if cause is not None:
                self._causes.setdefault(key, CauseSet()).note(cause)
            self._add_locked(key, now)
            return
        self._metrics.retried()
        if key in self._dirty:
            return  # the pending pass runs sooner, for its own causes
        if cause is not None:
            self._later.setdefault(key, CauseSet()).note(cause)
        deadline = now + delay
        current = self._delayed.get(key)
        if current is not None and current[0] <= deadline:
            return
        timer = next(self._timer_ids)
        self._delayed[key] = (deadline, timer)
        earliest = not self._timers or deadline < self._timers[0][0]
        heapq.heappush(self._timers, (deadline, timer, key))
        if current is not None:
            self._compact_timers()
        if earliest and self._getters:
            # Sleeping getters computed their wait from a later deadline.
            self._available.notify_all()
        if self._joiners:
            self._changed()

    def _release_due(self, now: float) -> None:
        released = False
        while self._timers and self._timers[0][0] <= now:
            deadline, timer, key = heapq.heappop(self._timers)
            if self._delayed.get(key) == (deadline, timer):
                del self._delayed[key]
                self._promote(key)
                self._add_locked(key, now)
                released = True
        if released and self._joiners:
            self._changed()

    def _take_locked(self, now: float) -> tuple[K, float | None]:
        """The next ready key, and how long it waited (None if it was not pending)."""
        key = self._ready.popleft()
        self._dirty.discard(key)
        self._processing[key] = now
        causes = self._causes.pop(key, None)
        if causes is not None:
            self._taken[key] = causes.items_out()
        since = self._pending_since.pop(key, None)
        if self._ready and self._getters:
            self._available.notify()
        if self._joiners:
            self._changed()
        return key, None if since is None else max(0.0, now - since)

    def _promote(self, key: K) -> None:
        """The causes of a delayed add become the pending key's."""
        later = self._later.pop(key, None)
        if later is not None:
            self._causes.setdefault(key, CauseSet()).merge(later)

    def _compact_timers(self) -> None:
        # Lazy deletion leaves stale heap entries; rebuild when they dominate.
        if len(self._timers) > 2 * len(self._delayed) + 64:
            self._timers = [
                (deadline, timer, key) for key, (deadline, timer) in self._delayed.items()
            ]
            heapq.heapify(self._timers)

    def _is_idle(self) -> bool:
        return not (self._dirty or self._processing or self._delayed)

    def _changed(self) -> None:
        # Callers skip it unless `join` waits (`_joiners`): it runs at every change.
        if self._is_idle():
            self._idle.notify_all()
