"""Which primary keys an informer event triggers (plain JSON in, `ResourceKey`s out).

- Primary objects trigger their own key. An update that only changed `status` (its
  resourceVersion moved but nothing else did) can be ignored, so a controller writing its
  own status does not trigger itself; a resync (same resourceVersion) always triggers.
  The echo of the controller's own write (`echo`: from the version the write replaced to
  the one it returned) triggers nothing: the pass that wrote it ends at that state.
- Owned children trigger their controller-owner: the ownerReference with
  `controller: true` whose kind and API group are the primary's and whose UID is the UID
  of the cached primary of that name.
- Mapped dependencies trigger whatever the mapper returns for a copy of the object
  (`mapping.MappedEvents`, which adds through `Triggers.add`).

`Triggers` holds one controller's informer handlers: an event goes from the informer's
thread through here straight into the queue (until `close`, after a fatal error).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from cloudcoil_sync.controller._internal import causes
from cloudcoil_sync.controller._internal.causes import Cause
from cloudcoil_sync.controller._internal.types import ResourceKey

__all__ = ["Triggers", "mapped_keys", "owner_keys", "primary_key", "status_only_change"]

JSON = Mapping[str, Any]
_VOLATILE_METADATA = ("resourceVersion", "managedFields")


primary_key: Callable[[JSON], ResourceKey] = ResourceKey.from_resource  # no wrapper call


def _essence(obj: JSON) -> dict[str, Any]:
    essence = {key: value for key, value in obj.items() if key != "status"}
    metadata = dict(essence.get("metadata") or {})
    for key in _VOLATILE_METADATA:
        metadata.pop(key, None)
    essence["metadata"] = metadata
    return essence


def _version(obj: JSON) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


def status_only_change(old: JSON, new: JSON) -> bool:
    """Whether `new` differs from `old` only in status (and volatile metadata).

    False for a resync (same resourceVersion): those always reconcile.
    """
    if _version(old) == _version(new):
        return False
    return _essence(old) == _essence(new)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def owner_keys(
    child: JSON,
    *,
    group: str,
    kind: str,
    namespaced: bool,
    lookup: Callable[[ResourceKey], JSON | None],
) -> list[ResourceKey]:
    """The key of the child's controller-owner if it is a cached primary of this kind."""
    metadata = child.get("metadata") or {}
    for reference in metadata.get("ownerReferences") or []:
        if not reference.get("controller"):
            continue
        if reference.get("kind") != kind or _group(str(reference.get("apiVersion", ""))) != group:
            continue
        name = reference.get("name")
        if not name:
            continue
        key = ResourceKey(name, metadata.get("namespace") if namespaced else None)
        owner = lookup(key)
        if owner is not None and (owner.get("metadata") or {}).get("uid") == reference.get("uid"):
            return [key]
    return []


def mapped_keys(
    mapper: Callable[[Any], Iterable[ResourceKey]], obj: Any, *, name: str
) -> list[ResourceKey]:
    """Run a watch mapper on a deep copy of `obj`; every item must be a ResourceKey."""
    keys = list(mapper(copy.deepcopy(obj)) or ())
    for key in keys:
        if not isinstance(key, ResourceKey):
            raise TypeError(
                f"Watch mapper {name} must return ResourceKey values, got {type(key).__name__}"
            )
    return keys


class _Queue(Protocol):
    def add(self, key: ResourceKey, cause: Cause | None = None) -> None: ...


class Triggers:
    """One controller's informer handlers: events in, keys added to `queue`."""

    def __init__(
        self,
        queue: _Queue,
        *,
        group: str,
        kind: str,
        namespaced: bool,
        status_updates: bool,
        lookup: Callable[[ResourceKey], JSON | None],
        echo: Callable[[ResourceKey, str | None, str | None], bool] | None = None,
    ) -> None:
        """`lookup` reads the cached primary of a key (an owner must be one, by UID);
        `echo(key, old version, new version)` tells the echo of our own write."""
        self._queue = queue
        self._echo = echo
        self._group, self._kind, self._namespaced = group, kind, namespaced
        self._status_updates = status_updates
        self._lookup = lookup
        self._closed = False

    def close(self) -> None:
        """Add no more keys (the controller failed)."""
        self._closed = True

    def add(self, key: ResourceKey, cause: Cause | None = None) -> None:
        if not self._closed:
            self._queue.add(key, cause)

    def primary(self, obj: JSON) -> None:
        self.add(primary_key(obj), causes.ADDED)

    def primary_deleted(self, obj: JSON) -> None:
        self.add(primary_key(obj), causes.DELETED)

    def primary_update(self, old: JSON, new: JSON) -> None:
        key = primary_key(new)
        echo = self._echo
        if echo is not None:  # _version inline: per update
            before = (old.get("metadata") or {}).get("resourceVersion")
            if echo(key, before, (new.get("metadata") or {}).get("resourceVersion")):
                return
        if not self._status_updates and status_only_change(old, new):
            return
        for cause in causes.primary_causes(old, new):
            self.add(key, cause)

    def child_handlers(self, kind: str) -> dict[str, Callable[..., None]]:
        """The informer handlers of one owned kind: each event names the child as cause."""
        return {
            "on_add": lambda obj: self.child(
                obj, cause=causes.object_cause("child", kind, None, obj)
            ),
            "on_update": lambda old, new: self.child(
                old, new, cause=causes.object_cause("child", kind, old, new)
            ),
            "on_delete": lambda obj: self.child(
                obj, cause=causes.object_cause("child", kind, obj, None)
            ),
        }

    def child(self, obj: JSON, new: JSON | None = None, cause: Cause | None = None) -> None:
        keys: set[ResourceKey] = set()
        for child in (obj, new) if new is not None else (obj,):
            keys.update(
                owner_keys(
                    child,
                    group=self._group,
                    kind=self._kind,
                    namespaced=self._namespaced,
                    lookup=self._lookup,
                )
            )
        for key in keys:
            self.add(key, cause)
