"""Client-side token-bucket rate limiter (client-go's ``flowcontrol`` token bucket)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """``qps`` tokens per second, up to ``burst`` saved; ``qps <= 0`` disables limiting.

    :meth:`acquire` reserves a token under a lock and sleeps outside it, so waiting threads are
    served in arrival order without holding the lock.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock()

    @property
    def enabled(self) -> bool:
        return self.qps > 0

    def reserve(self) -> float:
        """Take one token; return how long the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def acquire(self) -> float:
        """Block until a token is available; return the time waited."""
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)  # the reserved token's time: nothing makes it come earlier
        return delay
