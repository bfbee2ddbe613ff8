"""Live, guarded edits of one object: `mutate`, `ensure_finalizer`, `remove_finalizer`.

Each reads the object live, checks it is the same object (UID), applies a plain-function
edit to a copy, and sends the difference as a JSON patch guarded by `test` operations on
its UID and resourceVersion: a concurrent change makes the API server refuse the patch
(422) instead of being overwritten. No difference, no request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.patches import diff, split_status
from cloudcoil_sync.client import Conflict
from cloudcoil_sync.controller._internal.types import TerminalError

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["ensure_finalizer", "mutate", "remove_finalizer"]

R = TypeVar("R", bound=Resource)


def _config(config: Config | None) -> Config:
    if config is not None:
        return config
    from cloudcoil_sync.controller._internal.context import active

    request = active()
    if request is None:
        raise RuntimeError("Pass config= when mutating outside a reconcile pass")
    return request.config


def mutate(
    resource: R,
    change: Callable[[R], None],
    *,
    status: bool = False,
    config: Config | None = None,
) -> R:
    """Apply `change` to a fresh copy of `resource` and patch the difference; return it.

    `change` edits its argument in place and returns None. With `status=True` the patch
    goes to the `/status` subresource and may only touch status.
    """
    kind = type(resource)
    name, namespace, uid = (
        resource.name,
        resource.namespace,
        resource.metadata and resource.metadata.uid,
    )
    if not name:
        raise ValueError("mutate needs a resource with metadata.name")
    api = _config(config).client(kind, namespace=namespace)
    live = api.get(name)
    live_uid = live.metadata.uid if live.metadata else None
    if uid and live_uid != uid:
        raise Conflict(
            409,
            "Conflict",
            f"{kind.__name__} {name} was replaced (UID {uid} is now {live_uid})",
        )
    edited = live.model_copy(deep=True)
    returned: Any = change(edited)  # type: ignore[func-returns-value]
    if returned is not None:
        raise TypeError("mutate change functions edit their argument and return None")
    operations = diff(live, edited)
    if not operations:
        return live
    guards, changes = operations[:2], operations[2:]
    main, status_ops = split_status(changes)
    if status:
        if main:
            raise ValueError("mutate(status=True) may only change status")
        return api.json_patch(name, guards + status_ops, subresource="status")
    if status_ops and "status" in api.mapping.subresources:
        raise ValueError("Status changes go through mutate(..., status=True)")
    return api.json_patch(name, operations)


def ensure_finalizer(resource: R, key: str, *, config: Config | None = None) -> R:
    """Add finalizer `key` if missing; refuses once deletion has started."""

    def add(live: R) -> None:
        metadata, finalizers = _finalizers(live)
        if key in finalizers:
            return
        if metadata.deletion_timestamp:
            raise TerminalError(f"Cannot add finalizer {key} to an object being deleted")
        metadata.finalizers = [*finalizers, key]

    return mutate(resource, add, config=config)


def remove_finalizer(resource: R, key: str, *, config: Config | None = None) -> R:
    """Remove finalizer `key` if present."""

    def remove(live: R) -> None:
        metadata, finalizers = _finalizers(live)
        if key in finalizers:
            finalizers.remove(key)
            metadata.finalizers = finalizers or None

    return mutate(resource, remove, config=config)


def _finalizers(live: Resource) -> tuple[Any, list[str]]:
    """The object's metadata and a copy of its finalizers."""
    metadata = live.metadata
    assert metadata is not None
    return metadata, list(metadata.finalizers or [])
