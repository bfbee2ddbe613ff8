"""Retry policy: which failures are retried, and how long to wait between attempts."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["IDEMPOTENT_METHODS", "RetryPolicy"]

#: Methods safe to repeat after the server may have executed them. POST/PATCH/DELETE are
#: only repeated when the server certainly did not execute them (429, connect failures).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT"})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; ``max_retries=0`` disables retries."""

    max_retries: int = 5
    base: float = 0.2
    cap: float = 10.0
    #: Upper bound for a server-supplied Retry-After.
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        ceiling = min(self.cap, self.base * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)

    def should_retry_status(self, method: str, status_code: int) -> bool:
        if status_code == 429:
            return True  # the server did not execute the request
        return status_code >= 500 and method.upper() in IDEMPOTENT_METHODS
