"""`Turns`: connections take turns to process what they received, first come first served.

Each connection has a thread of its own (see `tls`). In a GIL-bound process, threads that
all have work interleave at every I/O call, and the interpreter gives the GIL to whichever
thread asks first, often the one just back from a syscall: each request's processing is
spread across the others' and the tail latency grows (p99 about 3 times the median with 8
clients, where an event loop keeps it under twice). Taking a turn before processing restores
the event loop's order: one thread works while the others wait on a gate of their own (not
on the GIL), and the turn passes to the longest waiting.

Handlers may block (I/O, sleeps), and a blocked holder must not stall everyone: a turn held
for `max_hold` seconds while others wait is passed on by a monitor thread, and its holder
finishes alongside, as it would without turns. The monitor sleeps without a timeout while
nobody waits, and wakes at most once per `max_hold` while turns are contended. Turns are
only kept while the monitor runs: before `start` and after `stop`, `turn()` never waits.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Iterator

from cloudcoil_sync._internal.service import joined

__all__ = ["Turns"]


class Turns:
    """First-come-first-served turns with a bounded hold (see the module docstring)."""

    def __init__(self, max_hold: float = 0.002, name: str = "admission-turns") -> None:
        if not max_hold > 0:
            raise ValueError("max_hold must be a positive number of seconds")
        self.max_hold = max_hold
        self.name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._tickets = itertools.count(1)
        self._holder = 0  # the ticket holding the turn; 0: nobody
        self._since = 0.0
        self._waiters: deque[tuple[int, threading.Lock]] = deque()
        self._monitor_sleeping = False  # waiting untimed: an arrival behind a holder wakes it
        self._active = False
        self._thread: threading.Thread | None = None
        self.passed_on = 0  # turns taken from a holder that kept them past max_hold
        self.wakeups = 0  # times the monitor woke (the hand-offs it costs)

    @property
    def waiting(self) -> int:
        """How many threads wait for a turn."""
        with self._lock:
            return len(self._waiters)

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("Turns can only be started once")
            self._active = True
            self._thread = threading.Thread(target=self._monitor, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop keeping turns: every waiter goes on at once; True if the monitor joined."""
        with self._lock:
            self._active = False
            self._holder = 0
            while self._waiters:
                self._waiters.popleft()[1].release()
            self._wake.notify()
            thread = self._thread
        return joined(thread, timeout)

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this thread's turn, hold it for the block, then pass it on."""
        ticket = self._take()
        try:
            yield
        finally:
            if ticket:
                self._give_back(ticket)

    def _take(self) -> int:
        with self._lock:
            if not self._active:
                return 0
            ticket = next(self._tickets)
            if not self._holder:
                self._holder, self._since = ticket, time.monotonic()
                return ticket
            gate = threading.Lock()
            gate.acquire()
            self._waiters.append((ticket, gate))
            if self._monitor_sleeping:
                self._monitor_sleeping = False
                self._wake.notify()
        gate.acquire()  # released when the turn passes to this ticket, or turns stop
        return ticket

    def _give_back(self, ticket: int) -> None:
        with self._lock:
            if self._holder == ticket:  # else the monitor passed it on already
                self._pass_on()

    def _pass_on(self) -> None:
        """Give the turn to the longest waiting, or free it (the lock is held)."""
        if self._waiters:
            ticket, gate = self._waiters.popleft()
            self._holder, self._since = ticket, time.monotonic()
            gate.release()
        else:
            self._holder = 0

    def _monitor(self) -> None:
        with self._lock:
            while self._active:
                if not self._holder or not self._waiters:
                    self._monitor_sleeping = True
                    self._wake.wait()
                    self.wakeups += 1
                    continue
                held = time.monotonic() - self._since
                if held >= self.max_hold:
                    self.passed_on += 1
                    self._pass_on()
                    continue
                self._wake.wait(self.max_hold - held)
                self.wakeups += 1
