"""`ClientLog`: at most one log line per client address and interval.

What a peer sends (malformed reviews, requests too slow to arrive) must not let it write the
operator's log at its own pace: a client gets one line per `interval`, and the next line it
gets says how many were left out meanwhile. At most `max_clients` addresses are remembered
(the least recently logged are forgotten first), so the table is bounded too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from cloudcoil_sync._internal.throttle import Throttle

__all__ = ["ClientLog"]


class ClientLog:
    """Log through `logger`, at most once per client address every `interval` seconds."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = 10.0,
        max_clients: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self._throttle = Throttle(interval, max_keys=max_clients, clock=clock)

    def log(self, level: int, client: str, message: str, *args: object) -> bool:
        """Write `message % args` (plus how many lines were left out) unless `client` had
        a line within the interval; whether it was written."""
        if not self.logger.isEnabledFor(level):
            return False
        skipped = self._throttle.passes(client)
        if skipped is None:
            return False
        if skipped:
            message += " (%d more from this client not logged)"
            args = (*args, skipped)
        self.logger.log(level, message, *args)
        return True
