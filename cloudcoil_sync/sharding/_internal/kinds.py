"""The kinds a ring shards (each controller's primary kind and owned kinds), how one object
of them is placed, and the informers that watch them."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cloudcoil.resources import Resource

from cloudcoil_sync.controller._internal.informer import ClientListWatch, Informer
from cloudcoil_sync.sharding._internal.labels import drain_key, shard_key
from cloudcoil_sync.sharding._internal.plan import Placement
from cloudcoil_sync.sharding._internal.ring import ObjectRef

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import Controller

__all__ = [
    "LIST_PAGE",
    "ShardedKind",
    "group_kind",
    "informer",
    "listed",
    "placement",
    "primary_kind",
    "sharded_kinds",
    "synced",
]

JSON = dict[str, Any]
_SYNC_TIMEOUT = 60.0
# The coordinator's full round holds one decoded page at a time and the process keeps that
# high-water mark: listing 10,000 small ConfigMaps kept 5.6 MB at 500 a page, 0.8 MB at 100
# at no more CPU (bench/list_memory.py).
LIST_PAGE = 100


@dataclass(frozen=True)
class ShardedKind:
    """One kind the ring assigns: a primary (with its selector) or an owned kind."""

    resource: type[Resource]
    namespace: str | None
    selector: str | None
    owners: tuple[tuple[str, str], ...] = ()  # (group, kind) of the primaries that own it


def sharded_kinds(controllers: Sequence[Controller[Any]], namespace: str) -> list[ShardedKind]:
    """Every controller's primary kind and owned kinds, once each."""
    kinds: list[ShardedKind] = []
    for controller in controllers:
        primary = primary_kind(controller, namespace)
        kinds.append(primary)
        gvk = controller.resource.gvk()
        owner = (gvk.api_version.rpartition("/")[0], gvk.kind)
        for owned in controller.owned:
            kinds.append(ShardedKind(owned.resource, primary.namespace, None, (owner,)))
    return kinds


def primary_kind(controller: Controller[Any], namespace: str) -> ShardedKind:
    """The controller's own kind: its resource, watched namespace and selector."""
    scope = controller.watched_namespace(namespace)
    return ShardedKind(controller.resource, scope, controller.label_selector)


@functools.cache  # called per watch event: gvk() builds a model each time
def group_kind(resource: type[Resource]) -> tuple[str, str]:
    gvk = resource.gvk()
    return gvk.api_version.rpartition("/")[0], gvk.kind


def placement(obj: JSON, kind: ShardedKind, ring: str) -> Placement | None:
    """How `obj` (of `kind`) is placed; None for an owned kind's object that no sharded
    object controls."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    namespace = metadata.get("namespace") or ""
    group, name = group_kind(kind.resource)
    ref = ObjectRef(group, name, namespace, metadata.get("name", ""))
    owner = None
    for reference in _controllers(metadata) if kind.owners else ():
        owner_group = str(reference.get("apiVersion", "")).rpartition("/")[0]
        if (owner_group, reference.get("kind")) in kind.owners:
            owner = ObjectRef(owner_group, str(reference["kind"]), namespace, reference["name"])
    if kind.owners and owner is None:
        return None
    return Placement(ref, labels.get(shard_key(ring)), drain_key(ring) in labels, owner)


def _controllers(metadata: JSON) -> Iterator[JSON]:
    for reference in metadata.get("ownerReferences") or []:
        if reference.get("controller") and reference.get("name"):
            yield reference


def informer(
    config: Config,
    resource: type[Resource],
    namespace: str | None,
    selector: str | None,
    role: str,
    *,
    metadata: bool = False,
) -> Informer:
    """An informer of `resource` in `namespace` (if namespaced) with `selector`; with
    `metadata` it reads (and its store keeps) apiVersion, kind and metadata only."""
    client = config.client(resource)
    scope = namespace if client.mapping.namespaced else None
    source = ClientListWatch(client, namespace=scope, label_selector=selector, metadata=metadata)
    name = f"{role}-{client.mapping.plural}" + (f"@{scope}" if scope else "")
    return Informer(source, name=name)


def listed(config: Config, kind: ShardedKind, page: int = LIST_PAGE) -> Iterator[list[JSON]]:
    """Every object of `kind` (its selector, its scope), metadata only, a page at a time."""
    client = config.client(kind.resource)
    scope = kind.namespace if client.mapping.namespaced else None
    source = ClientListWatch(client, namespace=scope, label_selector=kind.selector, metadata=True)
    for items, _ in source.pages(limit=page):
        yield items


def synced(informer: Informer, stop: threading.Event) -> bool:
    """Wait until `informer` synced (False if `stop` is set first); TimeoutError after a
    minute, InformerFailed if it died."""
    give_up = time.monotonic() + _SYNC_TIMEOUT
    while not informer.wait_synced(0.1):
        if stop.is_set():
            return False
        if time.monotonic() > give_up:
            raise TimeoutError(f"Informer {informer.name} did not sync within {_SYNC_TIMEOUT:g}s")
    return True
