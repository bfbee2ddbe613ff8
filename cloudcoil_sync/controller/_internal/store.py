"""The informer's thread-safe cache, keyed by (namespace, name), holding compact JSON bytes.

Objects are kept as the compact JSON text of what the API server sent, never as pydantic
models or even dicts: a parsed dict costs about 4.5 times its JSON size, a model far more.
Reads decode a fresh dict (callers own it and may edit it) or hand out the bytes, which
`Model.model_validate_json` turns into a model without an intermediate dict.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cloudcoil_sync.client._internal import codec

__all__ = ["IndexFunc", "ObjectKey", "Store", "decode", "encode", "object_key"]

JSON = dict[str, Any]
ObjectKey = tuple[str, str]  # (namespace or "", name)
IndexFunc = Callable[[JSON], Iterable[str]]


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """(namespace, name) of a JSON object; cluster-scoped objects have namespace ""."""
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


def encode(obj: Mapping[str, Any]) -> bytes:
    return codec.dumps(obj)


def decode(data: bytes) -> JSON:
    value: JSON = codec.loads(data)
    return value


class Store:
    """Objects by key plus optional secondary indexes (index name -> value -> keys)."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._lock = threading.RLock()
        self._objects: dict[ObjectKey, bytes] = {}
        self._indexers = dict(indexers or {})
        self._indexes: dict[str, dict[str, set[ObjectKey]]] = {n: {} for n in self._indexers}
        # The index values each key was filed under (so removal needs no decoding).
        self._filed: dict[ObjectKey, list[tuple[str, str]]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def get(self, namespace: str | None, name: str) -> JSON | None:
        """A fresh dict of the object, or None."""
        data = self.get_json(namespace, name)
        return None if data is None else decode(data)

    def get_json(self, namespace: str | None, name: str) -> bytes | None:
        """The object's compact JSON, or None."""
        with self._lock:
            return self._objects.get((namespace or "", name))

    def keys(self) -> builtins.list[ObjectKey]:
        with self._lock:
            return list(self._objects)

    def list(self, namespace: str | None = None) -> builtins.list[JSON]:
        """Fresh dicts of all objects, or of one namespace's; a consistent snapshot."""
        with self._lock:
            if namespace is None:
                blobs = list(self._objects.values())
            else:
                blobs = [data for (ns, _), data in self._objects.items() if ns == namespace]
        return [decode(data) for data in blobs]

    def by_index(self, index: str, value: str) -> builtins.list[JSON]:
        """Fresh dicts of the objects whose indexer `index` produced `value`."""
        with self._lock:
            blobs = [self._objects[key] for key in self.index_keys(index, value)]
        return [decode(data) for data in blobs]

    def index_keys(self, index: str, value: str) -> builtins.list[ObjectKey]:
        """The keys of the objects whose indexer `index` produced `value` (sorted)."""
        with self._lock:
            if index not in self._indexes:
                raise KeyError(f"No index named {index!r}")
            return sorted(self._indexes[index].get(value, ()))

    def indexes(self) -> builtins.list[str]:
        with self._lock:
            return sorted(self._indexers)

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add an index at any time (the objects held are filed at once); adding the same
        (equal) function again is a no-op, another function under that name a ValueError."""
        with self._lock:
            if name in self._indexers:
                if self._indexers[name] == func:
                    return
                raise ValueError(f"An index named {name!r} is already defined on this cache")
            # Copy on write: put/replace compute values outside the lock and recheck.
            self._indexers = {**self._indexers, name: func}
            self._indexes[name] = {}
            for key, data in self._objects.items():
                values = [(name, value) for value in func(decode(data))]
                if values:
                    self._filed[key] = self._filed.get(key, []) + values
                    for _, value in values:
                        self._indexes[name].setdefault(value, set()).add(key)

    def put(self, obj: JSON) -> bytes | None:
        """Insert or replace; return the previous object's JSON under that key."""
        key = object_key(obj)
        data = encode(obj)
        indexers = self._indexers
        # Most caches have no index: no calls then (a put runs per watch event).
        filed = self._file_values(obj, indexers) if indexers else []
        with self._lock:
            if indexers is not self._indexers:  # an index was added meanwhile
                filed = self._file_values(obj, self._indexers)
            old = self._objects.get(key)
            if key in self._filed:
                self._unindex(key)
            self._objects[key] = data
            if filed:
                self._index(key, filed)
            return old

    def remove(self, key: ObjectKey) -> bytes | None:
        with self._lock:
            old = self._objects.pop(key, None)
            self._unindex(key)
            return old

    def replace(
        self, objects: Iterable[JSON]
    ) -> tuple[dict[ObjectKey, bytes], dict[ObjectKey, bytes]]:
        """Swap in a complete new set of objects; return (previous, new) contents.

        `objects` is consumed before anything changes: if it raises, the store is untouched.
        """
        fresh: dict[ObjectKey, bytes] = {}
        filed: dict[ObjectKey, builtins.list[tuple[str, str]]] = {}
        indexers = self._indexers
        for obj in objects:
            key = object_key(obj)
            fresh[key] = encode(obj)
            filed[key] = self._file_values(obj, indexers) if indexers else []
        with self._lock:
            if indexers is not self._indexers:  # an index was added meanwhile
                filed = {k: self._file_values(decode(d), self._indexers) for k, d in fresh.items()}
            old = self._objects
            self._objects = fresh
            self._indexes = {name: {} for name in self._indexers}
            self._filed = {}
            for key, values in filed.items():
                if values:
                    self._index(key, values)
            return old, fresh

    @staticmethod
    def _file_values(
        obj: JSON, indexers: Mapping[str, IndexFunc]
    ) -> builtins.list[tuple[str, str]]:
        return [(name, value) for name, func in indexers.items() for value in func(obj)]

    def _index(self, key: ObjectKey, values: builtins.list[tuple[str, str]]) -> None:
        if not values:
            return
        self._filed[key] = values
        for name, value in values:
            self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: ObjectKey) -> None:
        for name, value in self._filed.pop(key, ()):
            keys = self._indexes[name].get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._indexes[name][value]
