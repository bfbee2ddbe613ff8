"""Event filters of a controller's primary kind (`controller.filter`) and of its watches.

- `field_selector` is sent to the API server with the list and the watch: objects it
  excludes are never cached (nor reconciled, nor read by `cached()`).
- `changed` names what an update must change to pass: any of "generation" (spec changes of
  kinds that count generations: an annotation- or label-only change of a custom resource
  starts no pass), "labels", "annotations" (several: any one of them suffices). Kinds
  without `metadata.generation` (ConfigMap, Secret...) never change it: with "generation"
  alone their updates never pass.
- `when(old, new)` is a user predicate on the two models of an update: False drops it.

Defaults: everything passes but status-only updates of a controller that reports status
itself (see `triggers`). Whatever the filters, creations, deletions and resyncs (an update
with the same resourceVersion: the periodic safety net) always pass, unlike
controller-runtime's predicates, which also see resyncs. A `when` that raises, or an object
the model rejects, lets the update through (a pass too many, never a change lost); the
error is logged. Each update a filter drops is counted in
`cloudcoil_filtered_events_total{controller, filter}` (filter: the `changed` names joined
by "," or "when"; prefixed by the kind for a watch, e.g. "ConfigMap:when").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name, require_sync
from cloudcoil_sync.controller._internal.invalid import InvalidObject, build
from cloudcoil_sync.controller._internal.triggers import status_only_change

__all__ = ["CHANGES", "NO_FILTERS", "EventFilter", "Filters", "make_filters", "watch_filters"]

JSON = Mapping[str, Any]
Predicate = Callable[[Any, Any], bool]
Update = Callable[[Any, Any], None]

CHANGES = ("generation", "labels", "annotations")


@dataclass(frozen=True)
class Filters:
    """What a controller (or one watch) lets through; the default lets everything."""

    field_selector: str | None = None
    changed: tuple[str, ...] = ()
    when: Predicate | None = None
    label_selector: str | None = None  # a watch's (a controller has its own argument)

    @property
    def updates_filtered(self) -> bool:
        return bool(self.changed) or self.when is not None


NO_FILTERS = Filters()


def make_filters(
    *,
    field_selector: object = None,
    changed: object = (),
    when: object = None,
    label_selector: object = None,
) -> Filters:
    """Checked filters: a clear error for a bad value, at definition time."""
    for name, selector in (("field_selector", field_selector), ("label_selector", label_selector)):
        if selector is not None and (not isinstance(selector, str) or not selector.strip()):
            raise TypeError(f"{name} must be a non-empty string")
    if isinstance(changed, str):
        changed = (changed,)
    if not isinstance(changed, Iterable):
        raise TypeError(f"changed must name some of {', '.join(CHANGES)}")
    names = tuple(dict.fromkeys(changed))
    unknown = [name for name in names if name not in CHANGES]
    if unknown:
        raise ValueError(f"Unknown change {unknown[0]!r}: changed takes {', '.join(CHANGES)}")
    if when is not None:
        require_sync(when, "when predicates")
    return Filters(field_selector, names, when, label_selector)  # type: ignore[arg-type]


def watch_filters(options: Mapping[str, Any]) -> Filters:
    """`watch(Kind, **options)`'s filters; a TypeError names an unknown option."""
    unknown = sorted(set(options) - {"field_selector", "changed", "when", "label_selector"})
    if unknown:
        raise TypeError(f"watch() got an unexpected keyword argument {unknown[0]!r}")
    return make_filters(**options)


def _metadata(obj: JSON) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _changed(name: str, old: JSON, new: JSON) -> bool:
    if name == "generation":
        return _metadata(old).get("generation") != _metadata(new).get("generation")
    return (_metadata(old).get(name) or {}) != (_metadata(new).get(name) or {})


class EventFilter:
    """Wraps one informer update handler with `Filters` (on the informer thread)."""

    def __init__(
        self,
        resource: type[Resource],
        filters: Filters,
        *,
        count: Callable[[str], None],
        log: logging.Logger,
        prefix: str = "",
        status_only_dropped: bool = False,
    ) -> None:
        """`count(filter)` counts a dropped update; `status_only_dropped`: the handler drops
        status-only updates itself (not counted here as saved by a filter)."""
        self._resource, self._filters = resource, filters
        self._count, self._log = count, log
        self._label = prefix + ",".join(filters.changed)
        self._when_label = prefix + "when"
        self._status_only_dropped = status_only_dropped

    def update(self, forward: Update) -> Update:
        if not self._filters.updates_filtered:
            return forward

        def update(old: JSON, new: JSON) -> None:
            if self.admits(old, new):
                forward(old, new)

        return update

    def admits(self, old: JSON, new: JSON) -> bool:
        if _metadata(old).get("resourceVersion") == _metadata(new).get("resourceVersion"):
            return True  # a resync
        if self._status_only_dropped and status_only_change(old, new):
            return True  # the handler drops it anyway
        changed = self._filters.changed
        if changed and not any(_changed(name, old, new) for name in changed):
            self._count(self._label)
            return False
        if self._filters.when is not None and not self._when(self._filters.when, old, new):
            self._count(self._when_label)
            return False
        return True

    def _when(self, when: Predicate, old: JSON, new: JSON) -> bool:
        try:
            before, after = build(self._resource, old), build(self._resource, new)
        except InvalidObject:
            return True  # the pass (or mapper) reports it
        try:
            return bool(when(before, after))
        except Exception as error:
            name = _metadata(new).get("name")
            self._log.error(
                "The when predicate %s raised for %s %s; the update goes through",
                function_name(when),
                self._resource.__name__,
                name,
                exc_info=error,
            )
            return True
