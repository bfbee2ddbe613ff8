"""`Throttle`: at most one occurrence per key and interval, counting the ones left out.

What repeats at a peer's or a failure's pace (malformed requests, a Lease that cannot be
written) must not write the operator's log at that pace: a key passes once per `interval`,
and when it passes again it is told how many were held back meanwhile. At most `max_keys`
keys are remembered (the least recently passed are forgotten first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["Throttle"]


class Throttle:
    """Let each key through at most once every `interval` seconds (thread-safe)."""

    def __init__(
        self,
        interval: float,
        *,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.max_keys = max_keys
        self.clock = clock
        self._lock = threading.Lock()
        # key -> (when it may pass again, occurrences held back since it last passed)
        self._keys: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def passes(self, key: str) -> int | None:
        """None while `key` passed within the interval (counted as held back); else it
        passes now, and the result is how many were held back since it last did."""
        now = self.clock()
        with self._lock:
            due, held = self._keys.get(key, (0.0, 0))
            if now < due:
                self._keys[key] = (due, held + 1)
                return None
            self._keys[key] = (now + self.interval, 0)
            self._keys.move_to_end(key)
            while len(self._keys) > self.max_keys:
                self._keys.popitem(last=False)
        return held

    def __bool__(self) -> bool:
        """Whether any key has passed since the last `clear`."""
        with self._lock:
            return bool(self._keys)

    def clear(self) -> None:
        """Forget every key: each passes at once next time."""
        with self._lock:
            self._keys.clear()
