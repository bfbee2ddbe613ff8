"""A `ListWatch` that keeps only what the coordinator reads: apiVersion, kind, metadata.

The coordinator needs labels, owner references, uid and resourceVersion of every sharded
object, never its spec or data: its cache holds metadata only (the JSON is still decoded;
kube-apiserver's PartialObjectMetadata lists would spare that too).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cloudcoil_sync.controller._internal.informer import ListWatch, WatchStream

__all__ = ["MetadataListWatch"]

JSON = dict[str, Any]
_KEPT = ("apiVersion", "kind", "metadata")


def _metadata(obj: JSON) -> JSON:
    return {key: obj[key] for key in _KEPT if key in obj}


class _Stream:
    def __init__(self, stream: WatchStream) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[tuple[str, JSON]]:
        for kind, obj in self._stream:
            yield kind, obj if kind == "ERROR" else _metadata(obj)

    def close(self) -> None:
        self._stream.close()


class MetadataListWatch:
    """`source` with every listed and watched object cut down to its metadata."""

    def __init__(self, source: ListWatch) -> None:
        self._source = source

    def pages(self, *, limit: int) -> Iterator[tuple[list[JSON], str]]:
        for items, version in self._source.pages(limit=limit):
            yield [_metadata(item) for item in items], version

    def watch(self, *, resource_version: str, timeout_seconds: int) -> WatchStream:
        return _Stream(
            self._source.watch(resource_version=resource_version, timeout_seconds=timeout_seconds)
        )
