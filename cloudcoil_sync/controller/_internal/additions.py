"""The runtime's wiring of a controller's additions beyond one reconcile loop: its
indexes (`indexes`), deletion notices (`deletions`) and daemons and timers (`daemons`),
each built only when the definition declares it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.controller._internal.daemons import ObjectThreads
from cloudcoil_sync.controller._internal.deletions import DeletionNotices
from cloudcoil_sync.controller._internal.indexes import IndexValues
from cloudcoil_sync.controller._internal.informer import Informer
from cloudcoil_sync.controller._internal.metrics import ControllerMetrics
from cloudcoil_sync.controller._internal.term import Term

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.definition import Controller

__all__ = ["add_indexes", "deletion_notices", "object_threads"]


def add_indexes(
    controller: Controller[Any], informers: dict[type[Any], Informer], name: str
) -> None:
    """File the declared indexes on the informers' stores (shared: same name, same
    function)."""
    for index in controller.indexes:
        if index.resource not in informers:
            raise ValueError(
                f"Index {index.name!r}: {index.resource.__name__} is not watched by "
                f"controller {name} (declare it as primary, owns or watch)"
            )
        informers[index.resource].store.add_indexer(index.name, IndexValues(index))


def deletion_notices(
    controller: Controller[Any], primary: Informer, term: Term, log: logging.Logger, name: str
) -> DeletionNotices | None:
    handler = controller.on_deleted
    if handler is None:
        return None
    notices = DeletionNotices(controller.resource, handler, term=term, log=log, name=name)
    primary.add_handler(on_delete=notices.deleted)
    return notices


def object_threads(
    controller: Controller[Any],
    primary: Informer,
    term: Term,
    log: logging.Logger,
    metrics: ControllerMetrics,
) -> ObjectThreads | None:
    specs = controller.object_threads
    if not specs:
        return None
    threads = ObjectThreads(
        controller.resource,
        specs,
        term=term,
        log=log,
        count=metrics.object_threads,
        failed=metrics.object_handler_failed,
        max_threads=controller.max_object_threads,
    )
    primary.add_handler(on_add=threads.added, on_update=threads.updated, on_delete=threads.deleted)
    return threads
