"""Watches started and stopped while a controller runs (`controller.start_watching`).

For operators whose watched kinds come from their own resources: declare each kind that may
be watched up front with `controller.may_watch(Kind)` (RBAC is generated before the operator
runs: read access to it), then, while running, `controller.start_watching(Kind, mapper=...)`
starts informers of the controller's own for it (in the controller's scope: the primary's
namespace, each of `watch_namespaces(...)`, or the namespaces selected now and later; with the
`watch` filters) whose events go through the mapper like a declared watch's, and
`controller.stop_watching(Kind)` stops them and forgets their cache. Its first list maps every
existing object; until it completes, `cached(Kind)` raises `InformerNotSynced` (a mapper
reading it then is logged and that event dropped, as any raising mapper).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from cloudcoil.resources import Resource

from cloudcoil_sync.client import ResourceClient
from cloudcoil_sync.controller._internal.filters import EventFilter, Filters
from cloudcoil_sync.controller._internal.informer import Informer
from cloudcoil_sync.controller._internal.namespaces import NamespaceSelection, own_informer
from cloudcoil_sync.controller._internal.scope import NamespaceSet

__all__ = ["DynamicWatches", "WatchScope"]

Handler = Callable[..., None]


@dataclass(frozen=True)
class WatchScope:
    """Where the controller watches its namespaced kinds: `namespace` (None: all), or each of
    `namespaces`, or the namespaces `selection()` picks (None until one is wired)."""

    namespace: str | None
    namespaces: tuple[str, ...] = ()
    selection: Callable[[], NamespaceSelection | None] | None = None


class DynamicWatches:
    """One controller's watches added while it runs: informers of its own per kind."""

    def __init__(
        self,
        config: Any,
        informers: dict[type[Any], Informer],
        *,
        scope: WatchScope,
        resync_period: float,
        handler: Callable[[type[Resource], Callable[[Any], Any]], Handler],
        event_filter: Callable[[type[Resource], Filters], EventFilter],
        on_failure: Callable[[BaseException], None],
        log: logging.Logger,
    ) -> None:
        """`informers` is the controller's cache table (`Caches.informers`): a started
        watch is added to it, a stopped one removed."""
        self._config, self._informers = config, informers
        self._scope, self._resync = scope, resync_period
        self._handler, self._filter = handler, event_filter
        self._on_failure, self._log = on_failure, log
        self._lock = threading.Lock()
        self._own: dict[type[Any], Informer | NamespaceSet] = {}

    def start(
        self, resource: type[Resource], mapper: Callable[[Any], Any], filters: Filters
    ) -> None:
        with self._lock:
            if resource in self._informers:
                raise ValueError(f"{resource.__name__} is already watched by this controller")
            view, begin = self._view(self._config.client(resource), filters)
            handle = self._handler(resource, mapper)
            update = self._filter(resource, filters).update(handle)
            view.add_handler(on_add=handle, on_update=update, on_delete=handle)
            self._own[resource] = view
            self._informers[resource] = cast(Informer, view)  # a set reads as one informer
        begin()
        self._log.info("Started watching %s", resource.__name__)

    def _view(
        self, client: ResourceClient[Any], filters: Filters
    ) -> tuple[Informer | NamespaceSet, Callable[[], None]]:
        """The kind's informer (or per-namespace set) in the controller's scope, and how
        to start it once its handlers are added."""
        scope, selectors = self._scope, (filters.label_selector, filters.field_selector)
        plural = client.mapping.plural
        if not client.mapping.namespaced or not (scope.namespaces or scope.selection):
            namespace = scope.namespace if client.mapping.namespaced else None
            informer = self._informer(client, namespace, selectors)
            return informer, informer.start
        if scope.selection is not None:
            selection = scope.selection()
            if selection is None:
                raise RuntimeError(
                    f"Cannot watch {plural} by namespace selector: this controller watches "
                    "no namespaced kind, so no namespace is selected"
                )
            chosen = selection.build(
                client, selectors, resync_period=self._resync, on_failure=self._on_failure
            )
            return chosen, lambda: selection.attach(chosen)
        listed = NamespaceSet(
            {},
            name=f"{plural}@{','.join(scope.namespaces)}(dynamic)",
            make=lambda namespace: self._informer(client, namespace, selectors),
        )

        def begin() -> None:
            for namespace in scope.namespaces:
                listed.join(namespace)

        return listed, begin

    def _informer(
        self,
        client: ResourceClient[Any],
        namespace: str | None,
        selectors: tuple[str | None, str | None],
    ) -> Informer:
        return own_informer(
            client,
            namespace,
            selectors,
            resync_period=self._resync,
            on_failure=self._on_failure,
            tag="(dynamic)",
        )

    def stop(self, resource: type[Resource], timeout: float | None = 10.0) -> bool:
        with self._lock:
            view = self._own.pop(resource, None)
            if view is None:
                raise ValueError(f"{resource.__name__} is not watched dynamically")
            self._informers.pop(resource, None)
        self._log.info("Stopped watching %s", resource.__name__)
        selection = self._scope.selection() if self._scope.selection is not None else None
        if isinstance(view, NamespaceSet) and selection is not None:
            return selection.detach(view, timeout)
        return view.stop(timeout)

    def stop_all(self, timeout: float | None) -> bool:
        with self._lock:
            kinds = list(self._own)
        return all([self.stop(kind, timeout) for kind in kinds])
