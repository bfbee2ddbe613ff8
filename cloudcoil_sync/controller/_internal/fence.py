"""Write fences: the controller's `WriteGate`s, which refuse API writes from work that was
abandoned or outlived its leadership.

A reconcile pass that outlives `reconcile_timeout` cannot be stopped (threads cannot be
cancelled). The workers run each pass inside `fenced(fence)` (the client's write gate, the
one hook its transport calls before a write); once the fence is closed (explicitly, or
because its deadline passed) every non-read request the pass's thread sends raises
`WriteFenced` before anything reaches the API server. A write already on the wire when the
fence closes is not cut short: `close` waits for it.

Fences nest: a pass's own fence (`PassFence`, its `reconcile_timeout`) has the leader term's
fence as `parent` (closed at `shutdown_timeout`, or once the Lease's renew deadline passes;
the elector moves that `deadline` forward at each successful renewal). A write is admitted
only while every fence up the chain is open, and is counted in flight by each of them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from cloudcoil_sync.client import WriteFenced

__all__ = ["ABANDONED", "PassFence", "WriteFence"]

ABANDONED = "the reconcile pass outlived reconcile_timeout and was abandoned"


class WriteFence:
    """Admits writes until closed or until the monotonic `deadline`, whichever is first,
    and only while `parent` (if any) admits them too.

    `cause` names why it closes (reported by `WriteFenced.cause`); `deadline_cause`, when
    its deadline passed rather than `close` (default: `cause`). `close(cause=...)` may
    name the cause of that close.
    """

    def __init__(
        self,
        deadline: float | None = None,
        *,
        reason: str = "the work was abandoned",
        parent: WriteFence | None = None,
        clock: Callable[[], float] = time.monotonic,
        cause: str = "abandoned",
        deadline_cause: str | None = None,
    ):
        self.deadline = deadline
        self.reason = reason
        self.cause = cause
        self.deadline_cause = deadline_cause or cause
        self._closed_cause: str | None = None
        self.parent = parent
        self._clock = clock
        self._lock = threading.Lock()  # `with self._lock` where nothing waits: cheaper
        self._cond = threading.Condition(self._lock)
        self._closed = False
        self._in_flight = 0

    @property
    def closed(self) -> bool:
        return self._own_closed() or (self.parent is not None and self.parent.closed)

    @property
    def in_flight(self) -> int:
        """Writes admitted by this fence and not yet answered."""
        return self._in_flight

    def _own_closed(self) -> bool:
        return self._closed or self._deadline_passed()

    def _deadline_passed(self) -> bool:
        deadline = self.deadline
        return deadline is not None and self._clock() >= deadline

    def closed_cause(self) -> str:
        """Why it refuses writes now (meaningful once closed)."""
        if self._closed:
            return self._closed_cause or self.cause
        return self.deadline_cause if self._deadline_passed() else self.cause

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the fence closes (or `timeout`); True if closed. Long handlers can
        poll `closed` or wait here to give up early once their pass was abandoned."""
        with self._cond:
            if self.deadline is None:
                return self._cond.wait_for(lambda: self._closed, timeout)
            left = self.deadline - self._clock()
            limit = left if timeout is None else min(left, timeout)
            self._cond.wait_for(lambda: self._closed, max(0.0, limit))
            return self.closed

    def close(self, timeout: float | None = None, *, cause: str | None = None) -> bool:
        """Refuse further writes; wait up to `timeout` for writes on the wire to finish.

        Returns False if one was still in flight at the timeout. `cause` (first close
        only) is what a refused write reports; default the fence's `cause`.
        """
        with self._cond:
            if not self._closed:
                self._closed_cause = self.deadline_cause if self._deadline_passed() else cause
            self._closed = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._in_flight == 0, timeout)

    @contextmanager
    def write(self, method: str, path: str) -> Iterator[Callable[[], None]]:
        """Admit one write (raises `WriteFenced` once closed), tracked while in flight.

        Yields the check the transport makes before each attempt to send it: a retry after
        backoff (a 429's Retry-After) or a wait for the rate limiter may outlast the fence,
        and then that attempt is refused unsent too.
        """
        chain: list[WriteFence] = []
        fence: WriteFence | None = self
        while fence is not None:
            chain.append(fence)
            fence = fence.parent
        chain.reverse()  # the outermost first: its reason is reported

        def recheck() -> None:
            # Called before every attempt and socket write, without the fences' locks: the
            # write is counted in flight, so a `close` racing this check still waits for it.
            for fence in chain:
                fence._refuse_if_closed(method, path)

        admitted: list[WriteFence] = []
        try:
            for fence in chain:
                fence._admit(method, path)
                admitted.append(fence)
            yield recheck
        finally:
            for fence in admitted:
                fence._release()

    def _admit(self, method: str, path: str) -> None:
        with self._lock:
            self._refuse_if_closed(method, path)
            self._in_flight += 1

    def _refuse_if_closed(self, method: str, path: str) -> None:
        deadline = self.deadline  # _own_closed, inlined: asked of every fence per write
        if self._closed or (deadline is not None and self._clock() >= deadline):
            cause = self.closed_cause()
            raise WriteFenced(f"{method} {path} not sent: {self.reason}", cause)

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._closed:  # only close() waits for writes in flight
                self._cond.notify_all()


class PassFence(WriteFence):
    """The one fence of one pass: a child of the term's fence, closed (cause `timeout`) by
    the watchdog when the pass outlives `reconcile_timeout`.

    `abandoned` and `finished` change under the workers' lock: exactly one of the watchdog
    (abandoning) and the worker (finishing) settles the key.
    """

    def __init__(self, key: Any, *, parent: WriteFence | None = None, started: float) -> None:
        super().__init__(reason=ABANDONED, parent=parent, cause="timeout")
        self.key = key
        self.started = started  # on the workers' clock
        self.expired = self.abandoned = self.finished = False  # expired: closed by the watchdog

    def check(self) -> None:
        """Raise `WriteFenced` (cause `timeout`) once this pass itself was closed."""
        if self.expired:
            raise WriteFenced(f"The pass of {self.key} was not written: {self.reason}", "timeout")
