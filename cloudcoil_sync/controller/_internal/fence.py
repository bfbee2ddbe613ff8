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
from collections.abc import Callable
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
        # Built (under the lock) by the first `wait` or `close`: most fences (one per pass)
        # are never waited on, and Condition.__init__ is Python.
        self._cond: threading.Condition | None = None
        self._closed = False
        self._in_flight = 0

    @property
    def closed(self) -> bool:
        fence: WriteFence | None = self
        while fence is not None:  # each own closed test up the chain, inlined: per pass
            deadline = fence.deadline
            if fence._closed or (deadline is not None and fence._clock() >= deadline):
                return True
            fence = fence.parent
        return False

    @property
    def in_flight(self) -> int:
        """Writes admitted by this fence and not yet answered."""
        return self._in_flight

    def _deadline_passed(self) -> bool:
        deadline = self.deadline
        return deadline is not None and self._clock() >= deadline

    def closed_cause(self) -> str:
        """Why it refuses writes now (meaningful once closed)."""
        if self._closed:
            return self._closed_cause or self.cause
        return self.deadline_cause if self._deadline_passed() else self.cause

    def _condition(self) -> threading.Condition:
        """The fence's condition (on `_lock`, which the caller holds)."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(self._lock)
        return cond

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the fence closes (or `timeout`); True if closed. Long handlers can
        poll `closed` or wait here to give up early once their pass was abandoned."""
        with self._lock:
            cond = self._condition()
            if self.deadline is None:
                return cond.wait_for(lambda: self._closed, timeout)
            left = self.deadline - self._clock()
            limit = left if timeout is None else min(left, timeout)
            cond.wait_for(lambda: self._closed, max(0.0, limit))
            return self.closed

    def close(self, timeout: float | None = None, *, cause: str | None = None) -> bool:
        """Refuse further writes; wait up to `timeout` for writes on the wire to finish.

        Returns False if one was still in flight at the timeout. `cause` (first close
        only) is what a refused write reports; default the fence's `cause`.
        """
        with self._lock:
            cond = self._condition()
            if not self._closed:
                self._closed_cause = self.deadline_cause if self._deadline_passed() else cause
            self._closed = True
            cond.notify_all()
            return cond.wait_for(lambda: self._in_flight == 0, timeout)

    def write(self, method: str, path: str) -> _Write:
        """Admit one write (raises `WriteFenced` once closed), tracked while in flight.

        Used as `with fence.write(method, path) as recheck:`; `recheck` is the check the
        transport makes before each attempt to send it: a retry after backoff (a 429's
        Retry-After) or a wait for the rate limiter may outlast the fence, and then that
        attempt is refused unsent too.
        """
        return _Write(self, method, path)

    def _refuse(self, method: str, path: str) -> None:
        raise WriteFenced(f"{method} {path} not sent: {self.reason}", self.closed_cause())


class _Write:
    """One write admitted by a fence chain, counted in flight by each fence while inside
    the `with` block. A class, not @contextmanager: one is entered per write."""

    __slots__ = ("_admitted", "_chain", "_method", "_path")

    def __init__(self, fence: WriteFence, method: str, path: str) -> None:
        chain: list[WriteFence] = []
        link: WriteFence | None = fence
        while link is not None:
            chain.append(link)
            link = link.parent
        chain.reverse()  # the outermost first: its reason is reported
        self._chain, self._method, self._path = chain, method, path
        self._admitted: list[WriteFence] = []

    # Admitting and releasing are inlined per fence (no method calls): they run per write.
    def __enter__(self) -> Callable[[], None]:
        method, path, admitted = self._method, self._path, self._admitted
        try:
            for fence in self._chain:
                with fence._lock:
                    deadline = fence.deadline
                    if fence._closed or (deadline is not None and fence._clock() >= deadline):
                        fence._refuse(method, path)
                    fence._in_flight += 1
                admitted.append(fence)
        except BaseException:
            self._release()
            raise
        return self.recheck

    def __exit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        admitted, self._admitted = self._admitted, []
        for fence in admitted:
            with fence._lock:
                fence._in_flight -= 1
                cond = fence._cond
                if fence._closed and cond is not None:  # only close() waits for writes
                    cond.notify_all()

    def recheck(self) -> None:
        # Called before every attempt and socket write, without the fences' locks: the
        # write is counted in flight, so a `close` racing this check still waits for it.
        # The closed test of each fence inlined (`_refuse_if_closed`): it runs per write.
        for fence in self._chain:
            deadline = fence.deadline
            if fence._closed or (deadline is not None and fence._clock() >= deadline):
                fence._refuse(self._method, self._path)


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
