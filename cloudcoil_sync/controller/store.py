"""The informer's thread-safe cache of plain JSON objects, keyed by (namespace, name).

Objects are kept exactly as the API server sent them (parsed JSON), never as pydantic
models: a model costs several times the memory of its JSON. Readers get the stored
dicts and must not mutate them; build a model (or deep-copy) to edit.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["IndexFunc", "ObjectKey", "Store", "object_key"]

JSON = dict[str, Any]
ObjectKey = tuple[str, str]  # (namespace or "", name)
IndexFunc = Callable[[JSON], Iterable[str]]


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """(namespace, name) of a JSON object; cluster-scoped objects have namespace ""."""
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


class Store:
    """Objects by key plus optional secondary indexes (index name -> value -> keys)."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._lock = threading.RLock()
        self._objects: dict[ObjectKey, JSON] = {}
        self._indexers = dict(indexers or {})
        self._indexes: dict[str, dict[str, set[ObjectKey]]] = {n: {} for n in self._indexers}

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def get(self, namespace: str | None, name: str) -> JSON | None:
        with self._lock:
            return self._objects.get((namespace or "", name))

    def get_by_key(self, key: ObjectKey) -> JSON | None:
        with self._lock:
            return self._objects.get(key)

    def keys(self) -> builtins.list[ObjectKey]:
        with self._lock:
            return list(self._objects)

    def list(self, namespace: str | None = None) -> list[JSON]:
        """All objects, or those of one namespace; a consistent snapshot."""
        with self._lock:
            if namespace is None:
                return list(self._objects.values())
            return [obj for (ns, _), obj in self._objects.items() if ns == namespace]

    def by_index(self, index: str, value: str) -> builtins.list[JSON]:
        """Objects whose indexer `index` produced `value`."""
        with self._lock:
            if index not in self._indexes:
                raise KeyError(f"No index named {index!r}")
            keys = self._indexes[index].get(value, ())
            return [self._objects[key] for key in keys]

    def put(self, obj: JSON) -> JSON | None:
        """Insert or replace; return the previous object under that key."""
        key = object_key(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None:
                self._unindex(key, old)
            self._objects[key] = obj
            self._index(key, obj)
            return old

    def remove(self, key: ObjectKey) -> JSON | None:
        with self._lock:
            old = self._objects.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def replace(self, objects: Iterable[JSON]) -> dict[ObjectKey, JSON]:
        """Swap in a complete new set of objects; return the previous contents."""
        fresh = {object_key(obj): obj for obj in objects}
        with self._lock:
            old = self._objects
            self._objects = fresh
            self._indexes = {name: {} for name in self._indexers}
            for key, obj in fresh.items():
                self._index(key, obj)
            return old

    def _index(self, key: ObjectKey, obj: JSON) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: ObjectKey, obj: JSON) -> None:
        for name, func in self._indexers.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
