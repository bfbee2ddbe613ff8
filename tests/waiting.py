"""Waiting for a condition that no event announces: re-check it until a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(
    predicate: Callable[[], bool], timeout: float = 15.0, interval: float = 0.01
) -> bool:
    """Re-check `predicate` every `interval` seconds until it holds (False after `timeout`)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        pause.wait(interval)
    return True
