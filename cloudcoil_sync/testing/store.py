"""The object store: one global resourceVersion counter, objects and a bounded event history.

Stored objects are never mutated in place: writers put a new dict, readers that want to change
one copy it first. That lets readers serialize without holding the lock for long.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .status import expired

__all__ = ["Entry", "Store", "WatchEvent"]

JSON = dict[str, Any]
Key = tuple[str, str]  # (group, plural) storage key


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class Entry:
    obj: JSON
    _raw: bytes | None = None
    _item: bytes | None = None

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = dumps(self.obj)
        return self._raw

    @property
    def item_raw(self) -> bytes:
        """Encoded without kind/apiVersion, as built-in list items are served."""
        if self._item is None:
            self._item = dumps({k: v for k, v in self.obj.items() if k not in _TYPE_KEYS})
        return self._item


_TYPE_KEYS = ("kind", "apiVersion")


@dataclass
class WatchEvent:
    rv: int
    key: Key
    type: str  # ADDED, MODIFIED, DELETED
    namespace: str
    obj: JSON
    old: JSON | None = None
    _raw: bytes | None = field(default=None, repr=False)

    def raw(self) -> bytes:
        """``{"type":..., "object":...}`` followed by a newline, encoded once for all watchers."""
        if self._raw is None:
            self._raw = dumps({"type": self.type, "object": self.obj}) + b"\n"
        return self._raw


class Store:
    """Objects by storage key, namespace and name, plus the watch history."""

    def __init__(self, history_size: int = 10000, start_rv: int = 1) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.history_size = history_size
        self._rv = start_rv
        self._data: dict[Key, dict[str, dict[str, Entry]]] = {}
        self._history: list[WatchEvent] = []
        self._history_rvs: list[int] = []
        self.compacted_rv = 0  # events at or below this rv are no longer in history
        self.closed = False
        # Called under the lock for every event (GC and controllers index and enqueue work).
        self.listeners: list[Callable[[WatchEvent], None]] = []

    # -- reads -------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    def get(self, key: Key, namespace: str, name: str) -> JSON | None:
        with self.lock:
            entry = self._data.get(key, {}).get(namespace, {}).get(name)
            return entry.obj if entry else None

    def entry(self, key: Key, namespace: str, name: str) -> Entry | None:
        with self.lock:
            return self._data.get(key, {}).get(namespace, {}).get(name)

    def scan(self, key: Key, namespace: str | None) -> tuple[list[Entry], int]:
        """Entries sorted by (namespace, name) and the resourceVersion of the snapshot."""
        with self.lock:
            by_ns = self._data.get(key, {})
            if namespace is not None:
                spaces = [(namespace, by_ns.get(namespace, {}))]
            else:
                spaces = sorted(by_ns.items())
            out: list[Entry] = []
            for _, objs in spaces:
                out.extend(objs[name] for name in sorted(objs))
            return out, self._rv

    def storage_keys(self) -> list[Key]:
        with self.lock:
            return list(self._data)

    def all_objects(self) -> Iterator[tuple[Key, JSON]]:
        with self.lock:
            snapshot = [
                (key, e.obj)
                for key, spaces in self._data.items()
                for objs in spaces.values()
                for e in objs.values()
            ]
        yield from snapshot

    # -- writes ------------------------------------------------------------------------------
    def next_rv(self) -> int:
        with self.lock:
            self._rv += 1
            return self._rv

    def put(self, key: Key, obj: JSON, old: JSON | None = None) -> JSON:
        """Store ``obj`` (taking ownership) under a new resourceVersion; records the event."""
        with self.lock:
            rv = self.next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            meta = obj["metadata"]
            ns = meta.get("namespace", "")
            self._data.setdefault(key, {}).setdefault(ns, {})[meta["name"]] = Entry(obj)
            self._record(WatchEvent(rv, key, "MODIFIED" if old else "ADDED", ns, obj, old))
            return obj

    def remove(self, key: Key, obj: JSON) -> JSON:
        """Remove the object; the DELETED event carries a new resourceVersion."""
        with self.lock:
            meta = obj["metadata"]
            ns = meta.get("namespace", "")
            spaces = self._data.get(key, {})
            spaces.get(ns, {}).pop(meta["name"], None)
            if ns in spaces and not spaces[ns]:
                del spaces[ns]
            rv = self.next_rv()
            gone = {**obj, "metadata": {**meta, "resourceVersion": str(rv)}}
            self._record(WatchEvent(rv, key, "DELETED", ns, gone, obj))
            return gone

    def drop_key(self, key: Key) -> list[JSON]:
        """Remove every object of a storage key (CRD deletion); returns them."""
        with self.lock:
            objs = [e.obj for spaces in self._data.get(key, {}).values() for e in spaces.values()]
            for obj in objs:
                self.remove(key, obj)
            self._data.pop(key, None)
            return objs

    def _record(self, event: WatchEvent) -> None:
        self._history.append(event)
        self._history_rvs.append(event.rv)
        excess = len(self._history) - self.history_size
        if excess > max(64, self.history_size // 8):  # trim in batches, not per event
            self.compacted_rv = self._history_rvs[excess - 1]
            del self._history[:excess]
            del self._history_rvs[:excess]
        for listener in self.listeners:
            listener(event)
        self.changed.notify_all()

    # -- history -----------------------------------------------------------------------------
    def check_watchable(self, rv: int, requested: str) -> None:
        with self.lock:
            if rv < self.compacted_rv:
                raise expired(requested, self.compacted_rv + 1)

    def events_after(self, rv: int) -> list[WatchEvent]:
        """History events with resourceVersion > ``rv`` (caller checked ``check_watchable``)."""
        with self.lock:
            start = bisect.bisect_right(self._history_rvs, rv)
            return self._history[start:]

    def forget_history(self) -> None:
        """Drop all history: watches from any earlier resourceVersion get 410 Expired."""
        with self.lock:
            self.compacted_rv = self._rv
            self._history.clear()
            self._history_rvs.clear()
            self.changed.notify_all()

    def wake_all(self) -> None:
        with self.lock:
            self.changed.notify_all()
