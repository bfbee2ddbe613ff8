"""`HandlerPool`: bounded daemon threads running admission handlers under a timeout.

Used when the webhook is served by a WSGI server without the host's late-answer hook (the
handler then runs on a pool thread the request waits for) and for `submit`ted work; a
handler past its timeout is abandoned, never killed or joined.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cloudcoil_sync._internal import tracing

__all__ = ["HandlerPool", "HandlerTimeout", "PoolClosed"]

log = logging.getLogger("cloudcoil_sync.admission")


class PoolClosed(RuntimeError):
    """The handler pool no longer takes work (the webhook is closing)."""


class HandlerTimeout(Exception):
    """`HandlerPool.run` passed its timeout; `abandoned` when the function had started."""

    def __init__(self, abandoned: bool) -> None:
        super().__init__("abandoned" if abandoned else "not started")
        self.abandoned = abandoned


class _Call:
    """One queued function. `done` is held until it has run; the state flags change only
    under the pool's lock.
    """

    __slots__ = ("abandoned", "cancelled", "done", "error", "function", "running", "value")

    def __init__(self, function: Callable[[], Any]) -> None:
        self.function = function
        self.done = threading.Lock()
        self.done.acquire()
        self.running = self.cancelled = self.abandoned = False
        self.value: Any = None
        self.error: BaseException | None = None


class HandlerPool:
    """A bounded set of daemon threads running handlers; a stuck one is abandoned, not joined.

    `run` calls a function on a pool thread and waits for it up to a timeout (a plain lock
    hand-off: cheaper than a Future's condition); `submit` queues work and returns a
    Future; `close` stops idle workers and joins them within a bound.
    """

    def __init__(self, max_workers: int = 16, *, name: str = "admission-handler") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self.name = name
        self._work: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, function: Callable[[], Any], timeout: float) -> Any:
        """`function()`'s result (or its exception) if it ends within `timeout` seconds;
        else HandlerTimeout. A call not started by then never runs; a started one is
        abandoned: its late result is discarded, a late failure logged.
        """
        call = self._put(_Call(tracing.carried(function)))  # under the request's span
        if not call.done.acquire(timeout=max(0.0, timeout)):
            with self._lock:
                if call.running:
                    call.abandoned = True
                else:
                    call.cancelled = True
            raise HandlerTimeout(call.abandoned)
        if call.error is not None:
            raise call.error
        return call.value

    def submit(self, function: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(function())
                except BaseException as error:
                    future.set_exception(error)

        self._put(_Call(run))
        return future

    def _put(self, call: _Call) -> _Call:
        with self._lock:
            if self._closed:
                raise PoolClosed("The admission handler pool is closed")
            self._work.put(call)
            if self._idle <= 0 and len(self._threads) < self.max_workers:
                thread = threading.Thread(
                    target=self._run, name=f"{self.name}-{len(self._threads) + 1}", daemon=True
                )
                self._threads.append(thread)
                self._idle += 1
                thread.start()
            self._idle -= 1  # reserved for this item (may go negative while queued)
        return call

    def _run(self) -> None:
        while True:
            call = self._work.get()
            if call is None:
                return
            with self._lock:
                call.running = not call.cancelled
            if call.running:
                try:
                    call.value = call.function()
                except BaseException as error:
                    call.error = error
            with self._lock:
                self._idle += 1
                abandoned = call.abandoned
            call.done.release()
            if abandoned:
                call.value = None  # discarded: free it now
                if call.error is not None:
                    log.info("An abandoned admission handler later failed: %r", call.error)

    def close(self, timeout: float = 5.0) -> bool:
        """Refuse new work, let queued work finish, stop the workers; True if all joined
        within `timeout` (an abandoned, still-running handler keeps its thread)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._work.put(None)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)
