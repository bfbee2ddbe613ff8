"""Watches started and stopped while a controller runs (`controller.start_watching`).

For operators whose watched kinds come from their own resources: declare each kind that may
be watched up front with `controller.may_watch(Kind)` (RBAC is generated before the operator
runs: read access to it), then, while running, `controller.start_watching(Kind, mapper=...)`
starts an informer of the controller's own for it (in the primary's scope, with the
`watch` filters) whose events go through the mapper like a declared watch's, and
`controller.stop_watching(Kind)` stops it and forgets its cache. Its first list maps every
existing object; until it completes, `cached(Kind)` raises `InformerNotSynced` (a mapper
reading it then is logged and that event dropped, as any raising mapper).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync.controller._internal.filters import EventFilter, Filters
from cloudcoil_sync.controller._internal.informer import Informer
from cloudcoil_sync.controller._internal.listwatch import ClientListWatch

__all__ = ["DynamicWatches"]

Handler = Callable[..., None]


class DynamicWatches:
    """One controller's watches added while it runs: an informer of its own per kind."""

    def __init__(
        self,
        config: Any,
        informers: dict[type[Any], Informer],
        *,
        namespace: str | None,
        resync_period: float,
        handler: Callable[[type[Resource], Callable[[Any], Any]], Handler],
        event_filter: Callable[[type[Resource], Filters], EventFilter],
        on_failure: Callable[[BaseException], None],
        log: logging.Logger,
    ) -> None:
        """`informers` is the controller's cache table (`Caches.informers`): a started
        watch is added to it, a stopped one removed."""
        self._config, self._informers = config, informers
        self._namespace, self._resync = namespace, resync_period
        self._handler, self._filter = handler, event_filter
        self._on_failure, self._log = on_failure, log
        self._lock = threading.Lock()
        self._own: dict[type[Any], Informer] = {}

    def start(
        self, resource: type[Resource], mapper: Callable[[Any], Any], filters: Filters
    ) -> None:
        with self._lock:
            if resource in self._informers:
                raise ValueError(f"{resource.__name__} is already watched by this controller")
            client = self._config.client(resource)
            scope = self._namespace if client.mapping.namespaced else None
            source = ClientListWatch(
                client,
                namespace=scope,
                label_selector=filters.label_selector,
                field_selector=filters.field_selector,
            )
            informer = Informer(
                source,
                name=f"{client.mapping.plural}@{scope or '*'}(dynamic)",
                resync_period=self._resync,
                on_failure=self._on_failure,
            )
            handle = self._handler(resource, mapper)
            update = self._filter(resource, filters).update(handle)
            informer.add_handler(on_add=handle, on_update=update, on_delete=handle)
            self._own[resource] = informer
            self._informers[resource] = informer
        informer.start()
        self._log.info("Started watching %s", resource.__name__)

    def stop(self, resource: type[Resource], timeout: float | None = 10.0) -> bool:
        with self._lock:
            informer = self._own.pop(resource, None)
            if informer is None:
                raise ValueError(f"{resource.__name__} is not watched dynamically")
            self._informers.pop(resource, None)
        self._log.info("Stopped watching %s", resource.__name__)
        return informer.stop(timeout)

    def stop_all(self, timeout: float | None) -> bool:
        with self._lock:
            kinds = list(self._own)
        return all([self.stop(kind, timeout) for kind in kinds])
