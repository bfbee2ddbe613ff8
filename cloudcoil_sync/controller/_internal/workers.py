"""`Workers`: the pass threads of one controller, the one place that settles a key with
the queue (`settle`: the switch on the pass's `Outcome`, as controller-runtime's
`reconcileHandler`), and the watchdog that abandons a pass outliving `reconcile_timeout`
(its `PassFence` closed, its key settled by a releaser thread, its thread replaced; see
`reconciler` for what a pass does) and logs, once, with its stack, a pass running longer
than `slow_pass_warning`.

`workers` bounds the handlers running at once (`slots`); the pool has
`pass_threads(workers)` threads, so a pass waiting for its write's answer holds no handler
slot.

Passes in flight are noted in a plain dict (no lock: the pass path takes none without a
reconcile_timeout). The watchdog sleeps until the earliest threshold of the passes it
knows; with none to wait for it sleeps without a timeout and says so (`_watch_idle`, set
before it reads the dict), and the next pass to start wakes it (the only lock that pass
takes). No timed wake: a slow pass is logged at its threshold."""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync.client import fenced
from cloudcoil_sync.controller._internal.budgets import WRITE_GRACE
from cloudcoil_sync.controller._internal.causes import retry
from cloudcoil_sync.controller._internal.fence import PassFence, WriteFence
from cloudcoil_sync.controller._internal.logcontext import PassScopes, requeue
from cloudcoil_sync.controller._internal.metrics import ControllerMetrics
from cloudcoil_sync.controller._internal.outcome import Outcome
from cloudcoil_sync.controller._internal.queue import QueueClosed, WorkQueue
from cloudcoil_sync.controller._internal.reconciler import Reconciler
from cloudcoil_sync.controller._internal.slots import HandlerSlots, Slot, pass_threads
from cloudcoil_sync.controller._internal.types import ResourceKey

__all__ = ["Workers"]


class Workers:
    """`pass_threads(workers)` threads taking keys from `queue`, running
    `reconciler.reconcile` (at most `workers` handlers at once) and settling each key from
    its outcome."""

    def __init__(
        self,
        reconciler: Reconciler[Any],
        queue: WorkQueue[ResourceKey],
        *,
        workers: int,
        reconcile_timeout: float | None = None,
        metrics: ControllerMetrics | None = None,
        fence: WriteFence | None = None,
        slow_pass_warning: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock` (monotonic seconds) times the passes against `reconcile_timeout` and
        `slow_pass_warning`; a pass that starts wakes the watchdog to look again."""
        if workers < 1:
            raise ValueError("workers must be a positive integer")
        self._reconciler = reconciler
        self._queue = queue
        self._workers = pass_threads(workers)  # threads; `workers` is the handler slots
        self._slots = HandlerSlots(workers)
        self._timeout, self._slow = reconcile_timeout, slow_pass_warning  # the watchdog's
        self._clock = clock
        self._running: dict[threading.Thread, tuple[Any, float]] = {}  # passes in flight
        self._warned: set[tuple[threading.Thread, float]] = set()
        self._watch_idle = False  # the watchdog waits for a pass to start (no deadline)
        self._metrics = metrics
        self._fence = fence  # the term's: parent of every pass's fence
        self._name = reconciler.name
        kind = reconciler.resource.gvk().kind
        self._scopes = PassScopes(self._name, kind, metrics.caused if metrics else None)
        self._lock = threading.Condition()
        self._threads: set[threading.Thread] = set()
        self._active: dict[threading.Thread, tuple[PassFence, Slot]] = {}
        self._retired: set[threading.Thread] = set()
        self._releasing: set[threading.Thread] = set()
        self._stopping = self._started = False
        self._serial = 0
        self._watchdog: threading.Thread | None = None

    @property
    def timed_out(self) -> int:
        """Threads still running a pass that outlived `reconcile_timeout`."""
        with self._lock:
            return len(self._retired & self._threads)

    @property
    def name(self) -> str:
        return f"{self._name} workers"

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Start the worker threads (and the watchdog). Workers end only when stopped (a
        failing pass is logged and retried), so `on_exit` is never called."""
        with self._lock:
            if self._started:
                raise RuntimeError("A worker pool can only be started once")
            self._started = True
            for _ in range(self._workers):
                self._spawn()
            if self._timeout is not None or self._slow is not None:
                self._watchdog = threading.Thread(
                    target=self._watch, name=f"{self._name}-watchdog", daemon=True
                )
                self._watchdog.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Started and not stopping: nothing to wait for."""
        return self.healthy()

    def healthy(self) -> bool:
        with self._lock:
            return self._started and not self._stopping

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Stop taking keys (queued ones stay unstarted); let passes in flight finish within
        `timeout`. False if some pass was still running at the deadline (its thread is left
        to finish on its own; nothing is interrupted mid-write)."""
        self._queue.shutdown(immediate=True)
        self._slots.close()
        return self._join(None if timeout is None else time.monotonic() + timeout)

    def drain(self, timeout: float | None = 10.0) -> bool:
        """Process the keys already queued, then stop as `stop` does, all within `timeout`."""
        self._queue.shutdown(immediate=False)
        give_up = None if timeout is None else time.monotonic() + timeout
        finished = self._join(give_up)
        self._queue.shutdown(immediate=True)
        self._slots.close()
        return finished

    def _join(self, give_up: float | None) -> bool:
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
            threads = list(self._threads)
        me = threading.current_thread()
        for thread in threads:
            if thread is not me:  # stop() from a handler: this thread ends after its pass
                thread.join(_left(give_up))
        if self._watchdog is not None:
            self._watchdog.join(1.0)
        with self._lock:
            releasing = list(self._releasing)
        for releaser in releasing:
            releaser.join(_left(give_up))
        with self._lock:
            alive = [t for t in self._threads if t.is_alive() and t is not me]
        if alive:
            logging.getLogger(f"cloudcoil_sync.controller.{self._name}").error(
                "%d reconcile pass(es) still running after shutdown_timeout", len(alive)
            )
        return not alive

    # -- threads -----------------------------------------------------------------------------

    def _spawn(self) -> None:
        self._serial += 1
        thread = threading.Thread(
            target=self._work, name=f"{self._name}-worker-{self._serial}", daemon=True
        )
        self._threads.add(thread)
        thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        try:
            while True:
                if me in self._retired and self._replaced(me):
                    return
                slot = self._slots.take()  # before the key: keys wait in the queue, not here
                if slot is None:
                    return
                try:
                    key = self._queue.get()
                except QueueClosed:
                    slot.give()
                    return
                self._pass(me, key, slot)
        finally:
            with self._lock:
                self._threads.discard(me)
                self._retired.discard(me)
                self._lock.notify_all()

    def _pass(self, me: threading.Thread, key: ResourceKey, slot: Slot) -> None:
        scope = self._scopes.enter(key, self._queue.causes(key))  # logs, span, why
        fence = PassFence(key, parent=self._fence, started=self._clock())
        self._begin(me, fence, slot)
        if self._metrics is not None:
            self._metrics.worker_started()
            slot.then = self._metrics.worker_finished
        self._running[me] = (key, fence.started)
        if self._watch_idle:
            self._wake_watchdog()
        try:
            with fenced(fence):
                outcome = self._reconciler.reconcile(key, fence, handled=slot.give)
        except BaseException as error:
            logging.getLogger(f"cloudcoil_sync.controller.{self._name}").exception(
                "Unexpected failure processing %s", key
            )
            outcome = Outcome("error", error=error)
        finally:
            self._running.pop(me, None)
            slot.give()  # a pass that ended before its handler returned
        if self._finish(me, fence):  # else the watchdog's releaser settles the key
            self.settle(key, outcome)
        scope.exit(outcome.kind)

    # Without a reconcile_timeout nothing watches passes in flight, so a pass does not
    # take the pool's lock at all (it took it three times): every lock all workers share
    # is a place where they queue behind a holder that is waiting for the GIL.

    def _replaced(self, me: threading.Thread) -> bool:
        """Back from a stuck pass: True if a replacement took over (this thread leaves)."""
        with self._lock:
            if len(self._threads - self._retired) >= self._workers:
                return True
            self._retired.discard(me)
            return False

    def settle(self, key: ResourceKey, outcome: Outcome) -> None:
        """The one place a key is settled with the queue: the switch on its outcome."""
        queue = self._queue
        match outcome.kind:
            case "success" | "terminal" | "invalid":
                queue.forget(key)
            case "requeue_after":
                queue.forget(key)
                queue.add_after(key, outcome.requeue_after or 0.0, requeue())
            case "refused" | "stale":
                queue.add_after(key, outcome.requeue_after or 0.0, retry(outcome.kind))
            case "error" | "fenced" | "timed_out" | "abandoned":
                queue.retry(key, retry(outcome.kind))
        queue.done(key)

    def _begin(self, me: threading.Thread, fence: PassFence, slot: Slot) -> None:
        if self._timeout is None:
            return
        with self._lock:
            self._active[me] = (fence, slot)
            self._lock.notify_all()

    def _finish(self, me: threading.Thread, fence: PassFence) -> bool:
        """Mark the pass finished; False if the watchdog abandoned it first."""
        if self._timeout is None:
            return True
        with self._lock:
            fence.finished = True
            if fence.abandoned:
                return False
            self._active.pop(me, None)
            return True

    def _release(self, fence: PassFence) -> None:
        """Settle an abandoned pass's key once no write of it is on the wire."""
        try:
            if not fence.close(WRITE_GRACE):
                logging.getLogger(f"cloudcoil_sync.controller.{self._name}").error(
                    "A write of the abandoned pass of %s is still in flight", fence.key
                )
            with fenced(self._fence):  # its report on the object: leader-scope writes
                outcome = self._reconciler.abandon(fence.key, self._clock() - fence.started)
            self.settle(fence.key, outcome)
        finally:
            with self._lock:
                self._releasing.discard(threading.current_thread())
                self._lock.notify_all()

    def _start_release(self, fence: PassFence) -> None:
        # Its own thread: closing the fence may wait for a write on the wire (WRITE_GRACE).
        releaser = threading.Thread(
            target=self._release, args=(fence,), name=f"{self._name}-release", daemon=True
        )
        self._releasing.add(releaser)
        releaser.start()

    def _watch(self) -> None:
        """Abandon passes that outlive the timeout; log slow ones once."""
        with self._lock:
            while not self._stopping:
                # Before reading the passes: one that starts from now on wakes the watchdog.
                self._watch_idle = True
                now = self._clock()
                dues = [self._abandon_expired(now), self._warn_slow(now)]
                due = min((d for d in dues if d is not None), default=None)
                self._watch_idle = due is None
                self._lock.wait(None if due is None else max(0.0, due - now))

    def _wake_watchdog(self) -> None:
        with self._lock:
            self._watch_idle = False
            self._lock.notify_all()

    def _abandon_expired(self, now: float) -> float | None:
        """Mark passes past the timeout and replace their threads; the next due time."""
        if self._timeout is None:
            return None
        limit = self._timeout
        next_check: float | None = None
        for thread, (fence, slot) in list(self._active.items()):
            if fence.expired:
                continue
            due = fence.started + limit
            if due <= now:
                fence.expired = True
                fence.close(0, cause="timeout")  # refuses its writes at once
                self._retired.add(thread)
                if not fence.finished:
                    fence.abandoned = True
                    del self._active[thread]
                    self._start_release(fence)
                # Keep the pool's capacity while the pass is stuck, within a bound: at most
                # as many stuck threads as handler slots; past it a stuck handler keeps its
                # slot, so no more handlers than `workers` + stuck ones ever run.
                if len(self._threads) < self._workers + self._slots.size:
                    slot.give()  # its handler may still run: the slot goes to a new pass
                    self._spawn()
                else:
                    logging.getLogger(f"cloudcoil_sync.controller.{self._name}").error(
                        "%d reconcile passes are stuck; not adding more threads",
                        len(self._retired & self._threads),
                    )
            elif next_check is None or due < next_check:
                next_check = due
        return next_check

    def _warn_slow(self, now: float) -> float | None:
        """Log each pass running past `slow_pass_warning` once, with where it is."""
        if self._slow is None:
            return None
        running = self._running.copy()  # atomic: the workers change it without a lock
        self._warned &= {(thread, started) for thread, (_, started) in running.items()}
        next_check: float | None = None
        for thread, (key, started) in running.items():
            if (thread, started) in self._warned:
                continue
            if now - started < self._slow:
                due = started + self._slow
                next_check = due if next_check is None else min(next_check, due)
                continue
            self._warned.add((thread, started))
            frame = sys._current_frames().get(thread.ident or 0)
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "?"
            logging.getLogger(f"cloudcoil_sync.controller.{self._name}").warning(
                "Reconcile of %s has been running for %.0fs (slow_pass_warning %gs), in:\n%s",
                key,
                now - started,
                self._slow,
                stack.rstrip(),
            )
        return next_check


def _left(give_up: float | None) -> float | None:
    return None if give_up is None else max(0.0, give_up - time.monotonic())
