"""Guarded persistence of a reconciled primary: JSON patches, status through `/status`.

The patch is `cloudcoil_sync._internal.patches.diff(snapshot, desired)`: it starts with `test`
operations on the UID and resourceVersion the pass read, so a concurrent change or a
replaced object makes the API server refuse it (422) instead of being overwritten. The
write is never rebased onto a fresh read; the next pass retries against the newer object.
"""

from __future__ import annotations

from typing import Any, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.patches import diff
from cloudcoil_sync.client import Conflict, Invalid, ResourceClient

__all__ = ["StaleWrite", "persist", "split_status", "status_only", "written_paths"]

Patch = list[dict[str, Any]]
R = TypeVar("R", bound=Resource)


def _is_status(operation: dict[str, Any]) -> bool:
    path = str(operation.get("path", ""))
    return path == "/status" or path.startswith("/status/")


def split_status(operations: Patch) -> tuple[Patch, Patch]:
    """(main operations, status operations) of an unguarded patch."""
    main = [op for op in operations if not _is_status(op)]
    status = [op for op in operations if _is_status(op)]
    return main, status


def status_only(snapshot: R, desired: Resource) -> R:
    """`snapshot` with `desired`'s status: what a failure report may write (nothing else)."""
    copy = snapshot.model_copy(deep=True)
    copy.status = getattr(desired, "status", None)  # type: ignore[attr-defined]
    return copy


class StaleWrite(Conflict):
    """The object changed after the pass read it: the guarded patch was refused."""


def _stale(snapshot: Resource, refused: Invalid) -> StaleWrite:
    what = f"{type(snapshot).__name__} {snapshot.namespace + '/' if snapshot.namespace else ''}"
    return StaleWrite(
        refused.status_code,
        refused.reason,
        f"{what}{snapshot.name} changed after this pass read it at resourceVersion "
        f"{snapshot.resource_version}; the write was refused, not merged, and the pass will be "
        "retried against the newer object",
        details=refused.details,
        method=refused.method,
        url=refused.url,
    )


def written_paths(snapshot: Resource, desired: Resource) -> list[str]:
    """The JSON pointers `persist` changes (for logs; the guards are left out)."""
    return [str(op.get("path")) for op in diff(snapshot, desired)[2:]]


def persist(
    client: ResourceClient[Any],
    snapshot: Resource,
    desired: Resource,
    *,
    status_subresource: bool,
) -> dict[str, Any] | None:
    """Write what changed from `snapshot` to `desired`; return the last response or None.

    With a status subresource, spec/metadata go in one guarded patch of the object and
    status in a second guarded patch of `/status` (at the resourceVersion the first
    returned). Without one, everything goes in a single patch. A refused guard raises
    `StaleWrite`.
    """
    try:
        return _persist(client, snapshot, desired, status_subresource=status_subresource)
    except Invalid as refused:
        if refused.causes:  # a validation failure of what we wrote, not a moved object
            raise
        raise _stale(snapshot, refused) from refused


def _persist(
    client: ResourceClient[Any],
    snapshot: Resource,
    desired: Resource,
    *,
    status_subresource: bool,
) -> dict[str, Any] | None:
    operations = diff(snapshot, desired)
    if not operations:
        return None
    guards, changes = operations[:2], operations[2:]
    name, namespace = snapshot.name or "", snapshot.namespace
    raw = client.raw
    if not status_subresource:
        return raw.json_patch(name, operations, namespace=namespace)
    main, status = split_status(changes)
    response: dict[str, Any] | None = None
    version = snapshot.resource_version
    if main:
        response = raw.json_patch(name, guards + main, namespace=namespace)
        version = (response.get("metadata") or {}).get("resourceVersion") or version
        if status and response.get("status") != _status_json(snapshot):
            raise Conflict(
                409,
                "Conflict",
                "Status changed during resource patch; reconcile again",
            )
    if status:
        version_guard = {"op": "test", "path": "/metadata/resourceVersion", "value": version}
        response = raw.json_patch(
            name, [guards[0], version_guard, *status], namespace=namespace, subresource="status"
        )
    return response


def _status_json(resource: Resource) -> Any:
    dumped = resource.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped.get("status")
