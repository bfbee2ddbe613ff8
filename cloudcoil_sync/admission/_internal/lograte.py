"""`ClientLog`: at most one log line per client address and interval.

What a peer sends (malformed reviews, requests too slow to arrive) must not let it write the
operator's log at its own pace: a client gets one line per `interval`, and the next line it
gets says how many were left out meanwhile. At most `max_clients` addresses are remembered
(the least recently logged are forgotten first), so the table is bounded too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

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
        self.interval = interval
        self.max_clients = max_clients
        self.clock = clock
        self._lock = threading.Lock()
        # client -> (when its next line may be written, lines left out since its last one)
        self._clients: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def log(self, level: int, client: str, message: str, *args: object) -> bool:
        """Write `message % args` (plus how many lines were left out) unless `client` had
        a line within the interval; whether it was written."""
        if not self.logger.isEnabledFor(level):
            return False
        now = self.clock()
        with self._lock:
            due, skipped = self._clients.get(client, (0.0, 0))
            if now < due:
                self._clients[client] = (due, skipped + 1)
                return False
            self._clients[client] = (now + self.interval, 0)
            self._clients.move_to_end(client)
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)
        if skipped:
            message += " (%d more from this client not logged)"
            args = (*args, skipped)
        self.logger.log(level, message, *args)
        return True
