"""`Watchdog`: one thread that runs a callback when a deadline passes unless cancelled first.

The admission server runs each handler on its connection's own thread and schedules a
late answer (504) at the route's deadline; the handler returning in time cancels it. Both
must be cheap and must not wake the watchdog thread per request (a GIL hand-off each): a
schedule notifies only when it is earlier than what the thread sleeps towards, a cancel
only marks its timer (dropping it at once when it is the earliest), and while timers keep
coming the thread sleeps at most a second at a time instead of waiting to be notified.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable

from cloudcoil_sync._internal.service import joined

__all__ = ["LATE_ANSWER", "Timer", "Watchdog"]

log = logging.getLogger("cloudcoil_sync.admission")

#: The WSGI environ key of the host's late-answer hook (``channel.Channel.answer_late``):
#: the admission app schedules its 504 through it (defined here, not in the channel, so
#: that the app can name it without importing waitress).
LATE_ANSWER = "cloudcoil.late_answer"
_PENDING, _CANCELLED, _FIRED = 0, 1, 2
# While busy, the thread wakes this often instead of per schedule (a GIL hand-off per
# request otherwise): see docs/architecture.md, "What polls and why".
_IDLE_STEP = 1.0


class Timer:
    """One scheduled callback. `cancel()` is True when it will never run; False when it ran
    or is running, in which case `cancel` returns only once the callback has returned."""

    __slots__ = ("_done", "_state", "_watchdog", "callback", "deadline")

    def __init__(self, watchdog: Watchdog, deadline: float, callback: Callable[[], None]) -> None:
        self._watchdog = watchdog
        self.deadline = deadline
        self.callback = callback
        self._state = _PENDING
        self._done: threading.Lock | None = None

    def cancel(self) -> bool:
        with self._watchdog._lock:
            if self._state == _PENDING:
                self._state = _CANCELLED
                self.callback = _nothing  # free what the callback holds now
                # Requests mostly end oldest first: dropping cancelled timers from the top
                # keeps the heap about as long as the requests in flight.
                heap = self._watchdog._heap
                while heap and heap[0][2]._state == _CANCELLED:
                    heapq.heappop(heap)
                return True
            done = self._done
        if done is not None:
            with done:  # held while the callback runs
                pass
        return self._state == _CANCELLED


def _nothing() -> None:
    return None


class Watchdog:
    """Runs each timer's callback on its own thread at the timer's deadline (monotonic)."""

    def __init__(self, name: str = "admission-watchdog") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._target = math.inf  # what the thread sleeps towards
        self._scheduled = 0
        self.wakeups = 0  # times the thread woke (a measure of hand-offs it costs)
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("The watchdog can only be started once")
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the thread (pending timers never fire); True if it joined in time."""
        with self._lock:
            self._stopping = True
            self._wake.notify()
            thread = self._thread
        return joined(thread, timeout)

    def schedule(self, deadline: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` at `deadline` (time.monotonic) unless the timer is cancelled."""
        timer = Timer(self, deadline, callback)
        with self._lock:
            heapq.heappush(self._heap, (deadline, next(self._order), timer))
            self._scheduled += 1
            if deadline < self._target:
                self._target = deadline
                self._wake.notify()
        return timer

    def _loop(self) -> None:
        seen = -1
        with self._lock:
            while not self._stopping:
                due = self._due()
                if due is None:
                    if self._heap:
                        self._target = self._heap[0][0]
                    elif self._scheduled != seen:
                        # Timers come and go faster than the thread wakes (cancels drop
                        # them at once): sleeping forever on an empty heap would make the
                        # next schedule wake it, once per request at low concurrency. While
                        # busy it wakes every _IDLE_STEP instead (deadlines are >= 1 s away).
                        seen = self._scheduled
                        self._target = time.monotonic() + _IDLE_STEP
                    else:
                        self._target = math.inf  # idle: nothing scheduled for a whole step
                    wait = self._target - time.monotonic()
                    self._wake.wait(None if wait == math.inf else wait)
                    self.wakeups += 1
                    continue
                self._lock.release()
                try:
                    self._fire(due)
                finally:
                    self._lock.acquire()

    def _due(self) -> Timer | None:
        """The next expired pending timer, marked as firing; cancelled ones are dropped."""
        heap = self._heap
        now = time.monotonic()
        while heap:
            deadline, _, timer = heap[0]
            if timer._state == _CANCELLED:
                heapq.heappop(heap)
                continue
            if deadline > now:
                return None
            heapq.heappop(heap)
            timer._state = _FIRED
            timer._done = threading.Lock()
            timer._done.acquire()
            return timer
        return None

    @staticmethod
    def _fire(timer: Timer) -> None:
        try:
            timer.callback()
        except Exception:
            log.exception("An admission deadline callback failed")
        finally:
            assert timer._done is not None
            timer._done.release()
