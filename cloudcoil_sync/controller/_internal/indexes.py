"""User indexes on the shared cache (`controller.index(Kind, name, function)`).

An index files every cached object of a kind under the values `function(model)` returns
(a string, an iterable of strings, or None for none), like controller-runtime's
`IndexField` and kopf's `@kopf.index`. The informer's store keeps it consistent with the
cache on every event, relists included, before any handler or mapper sees the event, so
`cached(Kind).list(index=name, value=v)` and `cached(Kind).keys(index=..., value=...)` answer
from a dict instead of a scan of every object.

The function runs on the informer thread for every add, update and relist: keep it quick
and free of I/O. An object the model rejects is filed under nothing; a function that raises
or returns something other than strings is logged (once per object and failure) and the
object is filed under nothing for that index: one bad object must not stop the informer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name, require_sync
from cloudcoil_sync.controller._internal.invalid import InvalidObject, InvalidReports, build
from cloudcoil_sync.controller._internal.store import JSON

__all__ = ["Index", "IndexValues", "check_index"]

IndexFunction = Callable[[Any], str | Iterable[str] | None]

logger = logging.getLogger("cloudcoil_sync.controller.indexes")


@dataclass(frozen=True)
class Index:
    """One declared index: objects of `resource` filed by what `function` returns."""

    resource: type[Resource]
    name: str
    function: IndexFunction


def check_index(resource: object, name: object, function: object) -> None:
    """A clear error for a bad declaration (at definition time, not on an event)."""
    if not isinstance(resource, type) or not issubclass(resource, Resource):
        raise TypeError(f"index expects a Resource class, got {resource!r}")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("An index name must be a non-empty string")
    require_sync(function, "index functions")


class IndexValues:
    """The store's indexer for one `Index`: a JSON object in, its values out.

    Equal when built from the same kind and function, so controllers sharing an informer
    may declare the same index; another function under the same name is refused.
    """

    def __init__(self, index: Index, reports: InvalidReports | None = None) -> None:
        self.index = index
        self._label = function_name(index.function)
        self._reports = reports or InvalidReports(logger)
        self._failed: set[tuple[str, str, str]] = set()  # (namespace, name, error) logged

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexValues):
            return NotImplemented
        mine, theirs = self.index, other.index
        return (mine.resource, mine.function) == (theirs.resource, theirs.function)

    def __hash__(self) -> int:
        return hash((self.index.resource, self.index.function))

    def __call__(self, obj: JSON) -> list[str]:
        try:
            model = build(self.index.resource, obj)
        except InvalidObject as error:
            self._reports.report(error, f"Index {self.index.name}", "filed under no value")
            return []
        try:
            return _strings(self.index.function(model))
        except Exception as error:
            self._log_once(obj, error)
            return []

    def _log_once(self, obj: JSON, error: Exception) -> None:
        metadata = obj.get("metadata") or {}
        seen = (metadata.get("namespace") or "", metadata.get("name") or "", repr(error))
        if seen in self._failed:
            return
        if len(self._failed) > 10_000:  # a bound: forget, and log again
            self._failed.clear()
        self._failed.add(seen)
        where = f"{seen[0]}/{seen[1]}" if seen[0] else seen[1]
        logger.error(
            "Index %s (%s) failed for %s %s; it is filed under no value of that index",
            self.index.name,
            self._label,
            self.index.resource.__name__,
            where,
            exc_info=error,
        )


def _strings(result: object) -> list[str]:
    if result is None:
        return []
    if isinstance(result, str):
        return [result]
    if isinstance(result, bytes) or not isinstance(result, Iterable):
        raise TypeError(
            f"an index function must return a string, strings or None, not {type(result).__name__}"
        )
    values = list(result)
    for value in values:
        if not isinstance(value, str):
            raise TypeError(f"index values must be strings, got {type(value).__name__}")
    return values
