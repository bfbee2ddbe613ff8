"""`@controller.on_event()`: every ADDED, MODIFIED and DELETED event of the primary kind.

Handlers receive a `RawEvent` (`type`, `object`, `old`, `raw`) on the primary informer's
thread, in the order the watch delivered the events, before any pass they cause. They are
for observing (metrics, audit, an external queue): keep them short, as a slow one delays
every later event of that informer. A handler that raises is logged with its traceback and
counted, never fatal: the next event and every pass go on. Periodic resyncs (the same
resourceVersion) are not events and are not delivered; a relist after a watch gap delivers
what changed meanwhile as ADDED/MODIFIED/DELETED. An object the model rejects is delivered
with `object=None` (its JSON in `raw`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from cloudcoil_sync._internal.callables import require_sync
from cloudcoil_sync.controller._internal.invalid import InvalidObject, build
from cloudcoil_sync.controller._internal.types import ResourceKey

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.change_handlers import ChangeHandlers

__all__ = ["RawEvent", "RawEvents"]

F = TypeVar("F", bound=Callable[..., Any])
JSON = Mapping[str, Any]
logger = logging.getLogger("cloudcoil_sync.controller.events")
EventKind = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class RawEvent:
    """One watch event of the primary: `object` (None if the model rejects it) and `old`
    (the cached object before, for MODIFIED and DELETED: the last one seen), `raw` its JSON."""

    type: EventKind
    object: Any
    old: Any
    raw: dict[str, Any]


def _version(obj: JSON) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


class RawEvents:
    """The raw event handlers of one controller, and the informer handlers they need."""

    def __init__(self, resource: type[Any], check: Callable[[], None]) -> None:
        self._resource = resource
        self._check = check
        self.handlers: list[Callable[[RawEvent], Any]] = []
        self.errors = 0

    def register(self) -> Callable[[F], F]:
        def decorate(function: F) -> F:
            self._check()
            require_sync(function, "event handlers")
            self.handlers.append(function)
            return function

        return decorate

    @property
    def populated(self) -> bool:
        return bool(self.handlers)

    def informer_handlers(self, changes: ChangeHandlers) -> dict[str, Callable[..., None]]:
        """What the primary informer calls (nothing when neither part needs it)."""
        found: dict[str, Callable[..., None]] = {}
        if self.handlers:
            found["on_add"] = lambda obj: self._deliver("ADDED", obj, None)
            found["on_update"] = self._updated
        if self.handlers or changes.of("delete", "resume"):

            def deleted(obj: JSON) -> None:
                changes.deleted(ResourceKey.from_resource(obj), copy.deepcopy(dict(obj)))
                if self.handlers:
                    self._deliver("DELETED", obj, obj)

            found["on_delete"] = deleted
        return found

    def _updated(self, old: JSON, new: JSON) -> None:
        if _version(old) != _version(new):  # a resync is no event
            self._deliver("MODIFIED", new, old)

    def _model(self, obj: JSON | None) -> Any:
        if obj is None:
            return None
        try:
            return build(self._resource, obj)
        except InvalidObject:
            return None

    def _deliver(self, kind: EventKind, obj: JSON, old: JSON | None) -> None:
        event = RawEvent(kind, self._model(obj), self._model(old), copy.deepcopy(dict(obj)))
        for handler in self.handlers:
            try:
                handler(event)
            except Exception:
                self.errors += 1
                logger.exception(
                    "Event handler %s failed on %s %s (ignored)",
                    getattr(handler, "__name__", handler),
                    kind,
                    ResourceKey.from_resource(obj),
                )
