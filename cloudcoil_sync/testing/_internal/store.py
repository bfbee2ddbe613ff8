"""The object store: one global resourceVersion counter, objects and a bounded event history.

Stored objects are never mutated in place: writers put a new dict, readers that want to change
one copy it first. That lets readers serialize without holding the lock for long.
"""

from __future__ import annotations

import bisect
import copy
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cloudcoil_sync.client._internal import codec
from cloudcoil_sync.testing._internal.status import expired

__all__ = ["Entry", "Store", "WatchEvent"]

JSON = dict[str, Any]
Key = tuple[str, str]  # (group, plural) storage key


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON (orjson: every object served is encoded once, then shared)."""
    return codec.dumps(obj)


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
            raw = self.raw
            prefix = b'{"kind":%s,"apiVersion":%s,' % (
                dumps(self.obj.get("kind")),
                dumps(self.obj.get("apiVersion")),
            )
            if raw.startswith(prefix):  # objects are built with kind and apiVersion first
                self._item = b"{" + raw[len(prefix) :]
            else:
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
    entry: Entry | None = field(default=None, repr=False)  # shares the object's encoding
    _raw: bytes | None = field(default=None, repr=False)

    def raw(self) -> bytes:
        """``{"type":..., "object":...}`` followed by a newline, encoded once for all watchers."""
        if self._raw is None:
            body = self.entry.raw if self.entry is not None else dumps(self.obj)
            self._raw = b'{"type":"%s","object":%s}\n' % (self.type.encode(), body)
        return self._raw


class Store:
    """Objects by storage key, namespace and name, plus the watch history."""

    def __init__(self, history_size: int = 10000, start_rv: int = 1) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.history_size = history_size
        self._rv = start_rv
        self._data: dict[Key, dict[str, dict[str, Entry]]] = {}
        self._sorted: dict[tuple[Key, str], list[str]] = {}  # name order, rebuilt on demand
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

    def scan(self, key: Key, namespace: str | None, start: str = "") -> tuple[list[Entry], int]:
        """Entries sorted by (namespace, name) from ``start`` on, and the current rv.

        ``start`` is a name for one namespace, ``"<namespace>/<name>"`` across namespaces.
        """
        with self.lock:
            entries, _, rv = self.scan_lazily(key, namespace, start)
            return list(entries), rv

    def scan_lazily(
        self, key: Key, namespace: str | None, start: str = ""
    ) -> tuple[Iterator[Entry], int, int]:
        """Like ``scan`` but entries are produced on demand: (entries, count, rv).

        Consume the entries under ``lock`` for a consistent snapshot.
        """
        with self.lock:
            by_ns = self._data.get(key, {})
            spaces = [namespace] if namespace is not None else sorted(by_ns)
            start_ns, start_name = (
                (None, start)
                if namespace is not None
                else (start.partition("/")[::2] if start else ("", ""))
            )
            plan: list[tuple[dict[str, Entry], list[str], int]] = []
            count = 0
            for ns in spaces:
                objs = by_ns.get(ns)
                if not objs or (start_ns and ns < start_ns):
                    continue
                names = self._sorted.get((key, ns))
                if names is None:
                    names = self._sorted[(key, ns)] = sorted(objs)
                first = bisect.bisect_left(names, start_name) if start_ns in (None, ns) else 0
                plan.append((objs, names, first))
                count += len(names) - first
            rv = self._rv

        def produce() -> Iterator[Entry]:
            for objs, names, first in plan:
                for i in range(first, len(names)):
                    entry = objs.get(names[i])
                    if entry is not None:
                        yield entry

        return produce(), count, rv

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
            objs = self._data.setdefault(key, {}).setdefault(ns, {})
            if meta["name"] not in objs:
                self._sorted.pop((key, ns), None)
            entry = objs[meta["name"]] = Entry(obj)
            kind = "MODIFIED" if old else "ADDED"
            self._record(WatchEvent(rv, key, kind, ns, obj, old, entry))
            return obj

    def restore(self, key: Key, obj: JSON) -> None:
        """Put a saved object back as it was (its resourceVersion kept, no history event).

        Listeners see it as ADDED so that their indexes (GC, CRDs, RBAC) include it; watches
        from any earlier resourceVersion get 410 Expired, as after an etcd restore.
        """
        with self.lock:
            meta = obj["metadata"]
            ns = meta.get("namespace", "")
            rv = int(meta.get("resourceVersion") or 0)
            self._rv = max(self._rv, rv)
            self.compacted_rv = self._rv
            self._sorted.pop((key, ns), None)
            entry = self._data.setdefault(key, {}).setdefault(ns, {})[meta["name"]] = Entry(obj)
            event = WatchEvent(rv, key, "ADDED", ns, obj, None, entry)
            for listener in self.listeners:
                listener(event)
            self.changed.notify_all()

    def default_in_place(self, key: Key, default: Callable[[JSON], None]) -> int:
        """Apply ``default`` to copies of every object under ``key`` and keep the changed ones
        under their resourceVersion, with no event: kube-apiserver defaults custom resources
        as it reads them from etcd, so a default added to a CRD shows on objects stored
        before it without a write. Returns how many changed."""
        changed = 0
        with self.lock:
            for objs in self._data.get(key, {}).values():
                for name, entry in objs.items():
                    new = copy.deepcopy(entry.obj)
                    default(new)
                    if new != entry.obj:
                        objs[name] = Entry(new)
                        changed += 1
        return changed

    def remove(self, key: Key, obj: JSON) -> JSON:
        """Remove the object; the DELETED event carries a new resourceVersion."""
        with self.lock:
            meta = obj["metadata"]
            ns = meta.get("namespace", "")
            spaces = self._data.get(key, {})
            spaces.get(ns, {}).pop(meta["name"], None)
            self._sorted.pop((key, ns), None)
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
