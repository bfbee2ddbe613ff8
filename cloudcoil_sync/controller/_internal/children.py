"""Children: `ctx.ensure(desired)` and pruning for `owns(Kind, prune=True)`.

`ensure` gives the child a controller ownerReference to the pass's primary, reads it live,
creates it when missing, and otherwise patches only the fields `desired` sets (maps merge,
lists replace, an explicit None removes) with a patch guarded by the child's UID and
resourceVersion. It never adopts an object it does not already control.

Pruning runs after a pass that completed (no error, no `Wait`): cached children of a
pruned kind whose controller is this primary and that the pass did not ensure are deleted
with UID and resourceVersion preconditions, so a child changed or replaced since it was
cached is left for the next pass to judge.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.patches import json_diff, merge_patch
from cloudcoil_sync.client import Conflict, NotFound
from cloudcoil_sync.controller._internal.invalid import build
from cloudcoil_sync.controller._internal.types import TerminalError

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.informer import Informer

__all__ = ["Pass", "controller_reference", "ensure_child", "prune_children"]

U = TypeVar("U", bound=Resource)
JSON = dict[str, Any]

_FORBIDDEN = ("uid", "resourceVersion", "ownerReferences")

logger = logging.getLogger(__name__)


class _Services(Protocol):
    @property
    def config(self) -> Config: ...

    def informer_for(self, resource: type[Any]) -> Informer: ...


class Pass(Protocol):
    """What children use of a pass (`context.Request`; a protocol, so no import cycle)."""

    ensured: set[tuple[type[Resource], str | None, str]]

    @property
    def object(self) -> Any: ...

    @property
    def services(self) -> _Services: ...


def controller_reference(parent: Resource) -> JSON:
    """The controller ownerReference pointing at `parent`."""
    metadata = parent.metadata
    assert metadata is not None and metadata.uid
    return {
        "apiVersion": parent.api_version,
        "kind": parent.kind,
        "name": metadata.name,
        "uid": metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _controlled_by(child: Mapping[str, Any], parent_uid: str) -> bool:
    references = (child.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("uid") == parent_uid for r in references)


def ensure_child(request: Pass, desired: U) -> U:
    """Create or update `desired` as a child controlled by the request's primary."""
    parent = request.object
    metadata = parent.metadata if parent is not None else None
    if parent is None or metadata is None or not metadata.uid:
        raise ValueError("ensure needs a present parent with a UID")
    if metadata.deletion_timestamp:
        raise TerminalError("Cannot ensure children while the parent is being deleted")
    if not isinstance(desired, Resource):
        raise TypeError("ensure expects a Resource model")
    body = _child_body(desired)
    kind = type(desired)
    api = request.services.config.client(kind)
    name, namespace = _place(body["metadata"], metadata, kind, namespaced=api.mapping.namespaced)
    request.ensured.add((kind, namespace, name))
    raw = api.raw
    try:
        live = raw.get(name, namespace=namespace)
    except NotFound:
        body["metadata"]["ownerReferences"] = [controller_reference(parent)]
        created: U = build(kind, raw.create(body, namespace=namespace))
        return created
    if not _controlled_by(live, metadata.uid):
        raise TerminalError(f"Refusing to adopt unrelated {kind.__name__} {name}")
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        raise RuntimeError(f"{kind.__name__} {name} is being deleted; ensuring it again later")
    updated: U = build(kind, _update(raw, live, body, name=name, namespace=namespace))
    return updated


def _child_body(desired: Resource) -> JSON:
    """The desired child as JSON, without the fields `ensure` manages (refused if set)."""
    body: JSON = desired.model_dump(mode="json", by_alias=True, exclude_unset=True)
    body.setdefault("apiVersion", desired.api_version)
    body.setdefault("kind", desired.kind)
    child_meta: JSON = dict(body.get("metadata") or {})
    if any(child_meta.get(name) for name in _FORBIDDEN) or body.get("status") is not None:
        raise ValueError(
            "ensure manages uid, resourceVersion, ownerReferences and status; "
            "leave them out of the desired child"
        )
    for name in (*_FORBIDDEN, "managedFields"):
        child_meta.pop(name, None)
    body.pop("status", None)
    body["metadata"] = child_meta
    return body


def _place(
    child_meta: JSON, parent: Any, kind: type[Resource], *, namespaced: bool
) -> tuple[str, str | None]:
    """The child's name (default: the parent's) and namespace (the parent's), checked."""
    parent_namespace = parent.namespace
    name = child_meta.get("name") or parent.name
    namespace = (child_meta.get("namespace") or parent_namespace) if namespaced else None
    if namespaced and parent_namespace and namespace != parent_namespace:
        raise ValueError("A namespaced parent cannot own children in another namespace")
    if not namespaced and parent_namespace:
        raise ValueError("A cluster-scoped child needs a cluster-scoped parent")
    if namespaced and not namespace:
        raise ValueError(f"ensure needs metadata.namespace for {kind.__name__} {name}")
    child_meta["name"] = name
    if namespace:
        child_meta["namespace"] = namespace
    return name, namespace


def _update(raw: Any, live: JSON, body: JSON, *, name: str, namespace: str | None) -> JSON:
    """Patch `live` towards `body`, guarded by its uid and resourceVersion (or keep it)."""
    operations = json_diff(live, merge_patch(live, body))
    if not operations:
        return live
    live_meta = live.get("metadata") or {}
    guards = [
        {"op": "test", "path": "/metadata/uid", "value": live_meta.get("uid")},
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": live_meta.get("resourceVersion"),
        },
    ]
    patched: JSON = raw.json_patch(name, guards + operations, namespace=namespace)
    return patched


def prune_children(request: Pass, kinds: tuple[type[Resource], ...]) -> int:
    """Delete cached children of `kinds` controlled by the primary but not ensured.

    Returns how many were deleted. A child already gone is skipped; a child changed since
    it was cached fails its precondition (409), which fails the pass so it runs again.
    """
    parent = request.object
    metadata = parent.metadata if parent is not None else None
    if parent is None or metadata is None or not metadata.uid or metadata.deletion_timestamp:
        return 0
    deleted = 0
    for kind in kinds:
        api = request.services.config.client(kind).raw
        scope = metadata.namespace if api.mapping.namespaced else None
        informer = request.services.informer_for(kind)
        for child in informer.store.list(scope):
            child_meta = child.get("metadata") or {}
            key = (kind, child_meta.get("namespace") or None, child_meta.get("name"))
            if key in request.ensured or not _controlled_by(child, metadata.uid):
                continue
            try:
                api.delete(
                    child_meta["name"],
                    namespace=child_meta.get("namespace"),
                    uid=child_meta.get("uid"),
                    resource_version=child_meta.get("resourceVersion"),
                )
            except NotFound:
                continue
            except Conflict:
                logger.info(
                    "Not pruning %s %s: it changed since it was cached", kind.__name__, key[2]
                )
                raise
            deleted += 1
    return deleted
