"""What an informer reads from the API server: `ListWatch`, and `ClientListWatch` over the
project's client (raw JSON pages and a bookmarked watch for one kind and scope)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from cloudcoil_sync.client import ResourceClient, Watch
from cloudcoil_sync.controller._internal.store import JSON

__all__ = ["ClientListWatch", "ListWatch", "WatchStream"]


class WatchStream(Protocol):
    """An open watch: iterates `(type, object)` pairs; `close()` may come from any thread."""

    def __iter__(self) -> Iterator[tuple[str, JSON]]: ...

    def close(self) -> None: ...


class ListWatch(Protocol):
    """What an informer needs from the API client for one kind and scope (raw JSON)."""

    def pages(self, *, limit: int) -> Iterator[tuple[list[JSON], str]]:
        """Every object, a page (of up to `limit`, following `continue`) at a time, with
        the list's resourceVersion."""
        ...

    def watch(self, *, resource_version: str, timeout_seconds: int) -> WatchStream:
        """A watch from `resource_version` with bookmarks, ended by the server after
        `timeout_seconds`."""
        ...


class _ClientStream:
    """A client `Watch` seen as `(type, object)` pairs."""

    def __init__(self, watch: Watch) -> None:
        self._watch = watch

    def __iter__(self) -> Iterator[tuple[str, JSON]]:
        for event in self._watch:
            yield event.type, event.object

    def close(self) -> None:
        self._watch.close()


class ClientListWatch:
    """`ListWatch` over the project's client for one kind, scope and selectors; with
    `metadata`, objects are read as metadata only (`ResourceClient.metadata`)."""

    def __init__(
        self,
        client: ResourceClient[Any],
        *,
        metadata: bool = False,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        self._client = client.metadata if metadata else client.raw
        # What the list and the watch both read: the same scope and selectors.
        self._scope: dict[str, Any] = {
            "namespace": namespace,
            "all_namespaces": namespace is None,
            "label_selector": label_selector,
            "field_selector": field_selector,
        }

    def pages(self, *, limit: int) -> Iterator[tuple[list[JSON], str]]:
        for page in self._client.pages(**self._scope, limit=limit):
            yield page.items, page.resource_version

    def watch(self, *, resource_version: str, timeout_seconds: int) -> WatchStream:
        watch = self._client.watch(
            **self._scope,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=True,
        )
        return _ClientStream(watch)
