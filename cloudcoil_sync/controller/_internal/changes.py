"""What changed in the primary since its last successful pass: `Change` (path, before, after).

`ChangeTracker` keeps, per key, the JSON of the object as the last successful pass left it
(what it read, or the server's answer to its write, so the pass's own writes are not
reported as changes next time). It only starts keeping them once they are wanted: a
handler read `ctx.changes` (from then on, for that controller), or the controller's logger
is at DEBUG. The cost is one JSON document per object of the controller (about the size
the informer keeps, as bytes) and one encode per write; a controller that never asks pays
one attribute read per pass. The diff itself runs only when asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync.controller._internal.causes import comparable, diff
from cloudcoil_sync.controller._internal.store import decode, encode
from cloudcoil_sync.controller._internal.types import ResourceKey

__all__ = ["Change", "ChangeTracker", "changes_between"]


@dataclass(frozen=True, slots=True)
class Change:
    """One changed field: `path` dotted (`spec.replicas`, `spec.ports[0].port`), its value
    at the last successful pass (`before`) and now (`after`); None where absent."""

    path: str
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{self.path}: {self.before!r} -> {self.after!r}"


def changes_between(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[Change, ...]:
    return tuple(Change(*found) for found in diff(comparable(old), comparable(new)))


class ChangeTracker:
    """The base of each key's changes (see the module doc)."""

    def __init__(self) -> None:
        self.wanted = False  # sticky: a handler asked once
        self._bases: dict[ResourceKey, bytes] = {}
        self._lock = threading.Lock()

    def changes(
        self, key: ResourceKey, data: bytes | None, *, asked: bool = True
    ) -> tuple[Change, ...] | None:
        """What changed in `data` (the object this pass read) since the last success of
        `key`; None when no successful pass of it was seen since tracking began. `asked`
        (a handler read `ctx.changes`): keep bases from now on (a debug line does not)."""
        self.wanted = self.wanted or asked
        with self._lock:
            base = self._bases.get(key)
        if base is None or data is None:
            return None
        return changes_between(decode(base), decode(data))

    def succeeded(self, key: ResourceKey, data: bytes | None, written: Any = None) -> None:
        """A pass of `key` succeeded on `data`; `written`: the server's answer to its write."""
        with self._lock:
            if data is None:
                self._bases.pop(key, None)
            else:
                self._bases[key] = encode(written) if written is not None else data
