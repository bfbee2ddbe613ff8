"""The coordinator's cache keeps metadata only; watch errors pass through whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cloudcoil_sync.sharding._internal.metadata import MetadataListWatch

OBJ = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "a", "labels": {"x": "1"}},
    "data": {"big": "x" * 1000},
}
ERROR = {"kind": "Status", "code": 410, "reason": "Expired"}


class Stream:
    closed = False

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        yield "MODIFIED", OBJ
        yield "ERROR", ERROR

    def close(self) -> None:
        self.closed = True


class Source:
    stream = Stream()

    def pages(self, *, limit: int) -> Iterator[tuple[list[dict[str, Any]], str]]:
        yield [OBJ], "7"

    def watch(self, *, resource_version: str, timeout_seconds: int) -> Stream:
        return self.stream


def test_lists_and_watches_keep_metadata_only_and_errors_whole() -> None:
    source = Source()
    lister = MetadataListWatch(source)
    meta = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": OBJ["metadata"]}
    assert list(lister.pages(limit=10)) == [([meta], "7")]
    stream = lister.watch(resource_version="7", timeout_seconds=5)
    assert list(stream) == [("MODIFIED", meta), ("ERROR", ERROR)]
    stream.close()
    assert source.stream.closed
