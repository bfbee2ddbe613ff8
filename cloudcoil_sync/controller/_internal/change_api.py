"""The kopf-style registration methods of `Controller` (see change_handlers.py).

Each decorator takes `(resource)` or `(resource, ctx)` handlers returning None, and the
options `id` (default: the function's name; unique per controller), `retries` (attempts
before a permanent failure; default: unlimited), `backoff` (seconds before a retry of a
failure; default 60), `timeout` (seconds since the first attempt before a permanent
failure) and `when` (a predicate of the resource: skipped, as done, when False).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cloudcoil_sync.controller._internal.handler_specs import field_path

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.registry import Registry

__all__ = ["ChangeAPI"]

F = TypeVar("F", bound=Callable[..., Any])


def _no_function(function: object, name: str) -> None:
    if function is not None:
        raise TypeError(f"Use @controller.{name}() with parentheses")


class ChangeAPI:
    """Mixed into `Controller`: change handlers, steps and raw event handlers."""

    registry: Registry[Any]

    def on_create(self, function: object = None, /, **options: Any) -> Callable[[F], F]:
        """Run once the object is first seen (no `last-handled` annotation); at least once."""
        _no_function(function, "on_create")
        return self.registry.changes.register("create", **options)

    def on_update(self, function: object = None, /, **options: Any) -> Callable[[F], F]:
        """Run when the essence (spec, labels, annotations...) changed since the last
        handled change: `ctx.old`, `ctx.new`, `ctx.diff`; at least once."""
        _no_function(function, "on_update")
        return self.registry.changes.register("update", **options)

    def on_resume(self, function: object = None, /, **options: Any) -> Callable[[F], F]:
        """Run for objects handled before this process started (restart, new leader)."""
        _no_function(function, "on_resume")
        return self.registry.changes.register("resume", **options)

    def on_delete(
        self, function: object = None, /, *, requires_finalizer: bool = True, **options: Any
    ) -> Callable[[F], F]:
        """Run when the object is deleted: held by a finalizer until every delete handler
        is done (at least once), or with `requires_finalizer=False` once it is gone, with
        the last object seen (at most once)."""
        _no_function(function, "on_delete")
        return self.registry.changes.register(
            "delete", requires_finalizer=requires_finalizer, **options
        )

    def on_field(self, field: str, **options: Any) -> Callable[[F], F]:
        """Run when the value at `field` (`spec.replicas`) changed, creation included:
        `ctx.old`/`ctx.new` are its values, `ctx.diff` the changes under it."""
        return self.registry.changes.register("field", field=field_path(field), **options)

    def step(self, function: object = None, /, **options: Any) -> Callable[[F], F]:
        """An independent step: runs every pass; a failing step is retried on its own
        schedule (`ctx.retry`) and never stops the other steps or handlers."""
        _no_function(function, "step")
        return self.registry.changes.register("step", **options)

    def on_event(self, function: object = None, /) -> Callable[[F], F]:
        """Every ADDED/MODIFIED/DELETED event of the primary as a `RawEvent`, on the
        informer's thread; errors are logged, never fatal (raw_events.py)."""
        _no_function(function, "on_event")
        return self.registry.raw_events.register()
