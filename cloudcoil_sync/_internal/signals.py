"""Waits that let the main thread's signal handlers run.

CPython runs a Python signal handler on the main thread, between bytecodes. A signal that
lands after the main thread's last check but before it blocks in a lock (the window inside
every `Event.wait`, `Condition.wait` and `Thread.join`) only marks the handler pending: an
untimed wait then never returns for it, and SIGTERM goes unnoticed (seen about once in 30
runs of an operator process on a loaded machine). So a wait on the main thread wakes at least
every `SIGNAL_SLICE` seconds to let a pending handler run; on any other thread a wait is
exactly the caller's.
"""

from __future__ import annotations

import threading
import time

__all__ = ["SIGNAL_SLICE", "join_thread", "main_slice", "wait_event"]

#: The longest a pending signal handler waits on a blocked main thread.
SIGNAL_SLICE = 0.25


def main_slice(timeout: float | None) -> float | None:
    """`timeout`, capped at `SIGNAL_SLICE` on the main thread (a caller loops until done)."""
    if threading.current_thread() is not threading.main_thread():
        return timeout
    return SIGNAL_SLICE if timeout is None else min(timeout, SIGNAL_SLICE)


def wait_event(event: threading.Event, timeout: float | None = None) -> bool:
    """`event.wait(timeout)`, in slices on the main thread."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if event.wait(main_slice(left)):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


def join_thread(thread: threading.Thread, timeout: float | None = None) -> None:
    """`thread.join(timeout)`, in slices on the main thread."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        thread.join(main_slice(left))
