"""`OwnWrites`: the resourceVersions our own writes returned, so their echo is told apart.

A controller that does not report status itself (its status model is not a
`ReconcileStatus`) is woken by status-only updates (`status_updates` defaults to True): a
status written by someone else may matter to it. Its own status write comes back as such an
update too, and used to start a pass at once, cancelling the `requeue_after` the pass had
asked for (a 3 s delay ran after 0.02 s). The reconciler notes the resourceVersion each of
its writes returned; a status-only update arriving at exactly that version is the echo of
our write and triggers nothing. Any other change still triggers, and so does a later write
by someone else (a new resourceVersion). One entry per key (the newest write), bounded.

The watch event may arrive before the write's answer (the server sends both at once), so
the informer's check can miss it: the pass it then starts, woken by status changes alone,
finds the object at our version and ends at once, putting back the requeue the writing
pass had asked for (`due`: a fresh add had superseded it in the queue).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cloudcoil_sync.controller._internal.types import ResourceKey

__all__ = ["MAX_OWN_WRITES", "OwnWrites"]

MAX_OWN_WRITES = 65536  # keys remembered; the oldest is forgotten first (its echo then triggers)


class OwnWrites:
    def __init__(
        self, limit: int = MAX_OWN_WRITES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._versions: dict[ResourceKey, tuple[str, float | None]] = {}
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()

    def note(self, key: ResourceKey, version: str) -> None:
        """Our write of `key` returned `version`."""
        with self._lock:
            self._versions.pop(key, None)
            if len(self._versions) >= self._limit:
                self._versions.pop(next(iter(self._versions)))
            self._versions[key] = (version, None)

    def requeued(self, key: ResourceKey, delay: float) -> None:
        """The pass that wrote `key` asked for another pass after `delay` seconds."""
        with self._lock:
            found = self._versions.get(key)
            if found is not None:
                self._versions[key] = (found[0], self._clock() + delay)

    def echo(self, key: ResourceKey, version: str | None) -> tuple[bool, float | None]:
        """Whether an update of `key` at `version` is our own write's echo (told once), and
        the seconds left of the requeue the writing pass asked for (None: none)."""
        if not self._versions:  # no write remembered: no lock on the event path
            return False, None
        with self._lock:
            found = self._versions.get(key)
            if version is None or found is None or found[0] != version:
                return False, None
            del self._versions[key]
        due = found[1]
        return True, None if due is None else max(0.0, due - self._clock())
