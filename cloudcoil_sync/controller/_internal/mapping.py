"""Watch mappers: dependency events turned into primary keys, safely.

- Mappers run only once every cache of their controller has synced (`open`): a mapper
  may read `controller.cached(Kind)`, and before the first list completes that read
  raises `InformerNotSynced`. Events that arrive earlier are dropped, not queued: until
  then no pass has started, and the primary informer's own first list enqueues every
  primary, so the first pass of each already reads the dependency's current state.
- A dependency object the mapper's model rejects is skipped (`InvalidObject`, logged once
  per object and failure, counted in `cloudcoil_invalid_objects_total{source="mapper"}`).
- A mapper that raises is logged with its traceback and the object it was given, counted
  in `cloudcoil_mapper_errors_total`, and that event is dropped; the controller goes on
  (as kopf and controller-runtime do). The next change of the object (or the resync)
  runs the mapper again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name
from cloudcoil_sync.controller._internal.causes import Cause, object_cause, object_name
from cloudcoil_sync.controller._internal.invalid import InvalidObject, InvalidReports, build
from cloudcoil_sync.controller._internal.metrics import ControllerMetrics
from cloudcoil_sync.controller._internal.triggers import mapped_keys
from cloudcoil_sync.controller._internal.types import ResourceKey

__all__ = ["MappedEvents"]

JSON = dict[str, Any]


class MappedEvents:
    """The watch mappers of one controller, closed until its caches have synced."""

    def __init__(
        self,
        log: logging.Logger,
        add: Callable[[ResourceKey, Cause], None],
        metrics: ControllerMetrics,
    ) -> None:
        self._log = log
        self._add = add
        self._metrics = metrics
        self._reports = InvalidReports(log)
        self._open = threading.Event()
        self.dropped = 0  # events that arrived before `open`

    def open(self) -> None:
        """Every cache of the controller has synced: mappers run from now on."""
        self._open.set()

    def handler(
        self, resource: type[Resource], mapper: Callable[[Any], Any]
    ) -> Callable[..., None]:
        """The informer handler (add, update and delete) of one `watch`."""
        label = function_name(mapper)

        def handle(obj: JSON, new: JSON | None = None) -> None:
            if not self._open.is_set():
                self.dropped += 1
                return
            keys: set[ResourceKey] = set()
            for item in (obj, new) if new is not None else (obj,):
                keys.update(self._map(resource, mapper, label, item))
            if keys:
                kind = resource.gvk().kind
                if new is not None:
                    cause = object_cause("mapped", kind, obj, new)
                else:  # an add or a delete (one handler for both)
                    cause = Cause("mapped", object=object_name(kind, obj))
                for key in keys:
                    self._add(key, cause)

        return handle

    def _map(
        self, resource: type[Resource], mapper: Callable[[Any], Any], label: str, item: JSON
    ) -> list[ResourceKey]:
        try:
            model = build(resource, item)
        except InvalidObject as error:
            self._metrics.invalid("mapper")
            self._reports.report(error, f"Watch mapper {label}", "not passed to the mapper")
            return []
        try:
            return mapped_keys(mapper, model, name=label)
        except Exception as error:
            self._metrics.mapper_failed()
            self._log.error(
                "Watch mapper %s raised for %s; this event is dropped (the controller goes on)",
                label,
                _describe(item, resource),
                exc_info=error,
            )
            return []


def _describe(item: JSON, resource: type[Resource]) -> str:
    metadata = item.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name") or "<unnamed>"
    return f"{resource.__name__} {namespace}/{name}" if namespace else f"{resource.__name__} {name}"
