"""Our own writes of primaries, so that their watch echoes start no pass.

A pass that wrote an object ends at the state it wrote: the watch event that brings that
state back (the echo) would start a pass that finds nothing to do, building two models and
a diff for nothing. An update event is our write's echo when it moves the cache from the
version the write replaced (its guard: the write was refused otherwise) to the version the
write returned. The echo may arrive before the write's answer: an event leaving the
replaced version while that write is on the wire is held until the answer says whose it
was (ours: dropped; anything else, or no answer: its key is added then).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from cloudcoil_sync.controller._internal.types import ResourceKey

__all__ = ["MAX_REMEMBERED", "Echoes"]

MAX_REMEMBERED = 10_000  # writes whose echo has not arrived yet (oldest forgotten first)


class Echoes:
    """One controller's writes of its primaries; `retrigger` adds a held key after all."""

    def __init__(self, retrigger: Callable[[ResourceKey], None]) -> None:
        self._retrigger = retrigger
        self._lock = threading.Lock()
        self._written: dict[ResourceKey, tuple[str, str]] = {}  # key -> (replaced, returned)
        self._writing: dict[ResourceKey, str] = {}  # key -> version a write on the wire guards
        self._held: dict[ResourceKey, str] = {}  # key -> version of an event held meanwhile

    def writing(self, key: ResourceKey, base: str | None) -> None:
        """A guarded write of `key` at version `base` is about to be sent."""
        if base:
            with self._lock:
                self._writing[key] = base

    def wrote(self, key: ResourceKey, written: str | None) -> None:
        """The write's answer: the version it returned, or None (refused, failed, unsent)."""
        with self._lock:
            base = self._writing.pop(key, None)
            held = self._held.pop(key, None)
            if base is None or not written or written == base or held == written:
                pass  # nothing to remember: no new version, or its echo came first
            else:
                if len(self._written) >= MAX_REMEMBERED:
                    self._written.pop(next(iter(self._written)))
                self._written[key] = (base, written)
        if held is not None and held != written:
            self._retrigger(key)  # the held event was not our write's echo

    def is_echo(self, key: ResourceKey, old: str | None, new: str | None) -> bool:
        """Whether the update `old` -> `new` of `key` starts no pass (now or ever)."""
        if old is None or new is None or old == new:
            return False  # a resync (same version) always reconciles
        with self._lock:
            if self._written.get(key) == (old, new):
                del self._written[key]
                return True
            if self._writing.get(key) == old:
                self._held[key] = new  # decided by `wrote`
                return True
        return False
