"""The coordinator: while its replica holds the ring Lease, assign objects to live shards.

It watches the ring's shard Leases and the sharded kinds (each controller's primary kind with
the controller's own selector, and its owned kinds), and after every change runs `plan` over
what it sees and sends the label patches, fenced by the ring Lease's renew deadline. A shard
is live while its Lease has a holder and the coordinator saw its record change within one
lease duration (its monotonic clock: no trust in the holder's wall clock).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cloudcoil.models.kubernetes.coordination.v1 import Lease
from cloudcoil.resources import Resource
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cloudcoil_sync.client._internal.errors import ClientError, Conflict, Invalid, NotFound
from cloudcoil_sync.client._internal.fence import WriteFence, fenced
from cloudcoil_sync.controller._internal.informer import ClientListWatch, Informer, ListWatch
from cloudcoil_sync.sharding._internal.labels import (
    COORDINATOR_MANAGER,
    RING_LABEL,
    assign_patch,
    drain_key,
    drain_patch,
    shard_key,
)
from cloudcoil_sync.sharding._internal.metadata import MetadataListWatch
from cloudcoil_sync.sharding._internal.plan import Action, Placement, plan
from cloudcoil_sync.sharding._internal.ring import ObjectRef
from cloudcoil_sync.sharding._internal.settings import Sharding

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.definition import Controller

__all__ = ["Coordinator", "CoordinatorMetrics", "ShardedKind"]

log = logging.getLogger("cloudcoil_sync.sharding")

JSON = dict[str, Any]
_SYNC_TIMEOUT = 60.0
_IDLE = 1.0  # re-check Leases at least this often (one may expire without any event)
_STOP_TIMEOUT = 10.0
_FULL_EVERY = 30.0  # between rounds over every object (others plan what changed)


@dataclass(frozen=True)
class ShardedKind:
    """One kind the coordinator assigns: a primary (with its selector) or an owned kind."""

    resource: type[Resource]
    namespace: str | None
    selector: str | None
    owners: tuple[tuple[str, str], ...] = ()  # (group, kind) of the primaries that own it


def sharded_kinds(controllers: Sequence[Controller[Any]], namespace: str) -> list[ShardedKind]:
    """Every controller's primary kind and owned kinds, once each."""
    kinds: list[ShardedKind] = []
    for controller in controllers:
        scope = controller.watched_namespace(namespace)
        gvk = controller.resource.gvk()
        owner = (gvk.api_version.rpartition("/")[0], gvk.kind)
        kinds.append(ShardedKind(controller.resource, scope, controller.label_selector))
        for owned in controller.owned:
            kinds.append(ShardedKind(owned.resource, scope, None, (owner,)))
    return kinds


class CoordinatorMetrics:
    """Assignments, moves and drain times of one ring (on the coordinating replica)."""

    def __init__(self, ring: str, registry: CollectorRegistry | None = None) -> None:
        self.ring = ring
        self.assigned = Gauge(
            "cloudcoil_sharding_assigned_objects",
            "Primary objects assigned to each live shard, as the coordinator sees them",
            ("ring", "shard"),
            registry=registry,
        )
        self.moves = Counter(
            "cloudcoil_sharding_moves",
            "Label patches the coordinator sent, by reason (new, dead, drain, owner)",
            ("ring", "reason"),
            registry=registry,
        )
        self.drain = Histogram(
            "cloudcoil_sharding_drain_seconds",
            "From the drain label set to the old shard's acknowledgement",
            ("ring",),
            registry=registry,
        )
        self._shards: set[str] = set()

    def set_assigned(self, counts: dict[str, int]) -> None:
        for shard in self._shards - set(counts):
            self.assigned.remove(self.ring, shard)
        for shard, count in counts.items():
            self.assigned.labels(ring=self.ring, shard=shard).set(count)
        self._shards = set(counts)


class _Liveness:
    """Which shard Leases are live, on this process's monotonic clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, tuple[tuple[Any, ...], float]] = {}

    def update(self, leases: Sequence[JSON]) -> tuple[set[str], float]:
        """(live shard identities, the monotonic time the next one may expire)."""
        now = self._clock()
        live: set[str] = set()
        next_expiry = math.inf
        names = set()
        for lease in leases:
            name = (lease.get("metadata") or {}).get("name", "")
            names.add(name)
            spec = lease.get("spec") or {}
            record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"))
            seen = self._seen.get(name)
            if seen is None or seen[0] != record:
                seen = self._seen[name] = (record, now)
            holder = spec.get("holderIdentity")
            expiry = seen[1] + float(spec.get("leaseDurationSeconds") or 0)
            if holder and now < expiry:
                live.add(str(holder))
                next_expiry = min(next_expiry, expiry)
        for name in set(self._seen) - names:
            del self._seen[name]
        return live, next_expiry


class Coordinator:
    """Assign a ring's objects to its live shards; run as the ring Lease's leader work."""

    def __init__(
        self,
        sharding: Sharding,
        config: Config,
        kinds: Sequence[ShardedKind],
        metrics: CoordinatorMetrics,
    ) -> None:
        self.ring = sharding.ring_name
        self.namespace = sharding.namespace or config.namespace
        self.config = config
        self.kinds = tuple(kinds)
        self.metrics = metrics
        self._workers = sharding.assign_workers
        self._shard_key = shard_key(self.ring)
        self._drain_key = drain_key(self.ring)
        self._wake = threading.Event()
        self._sent: dict[ObjectRef, str | None] = {}  # resourceVersion a patch was based on
        self._drains: dict[ObjectRef, float] = {}  # drain requested at (monotonic)
        self._dirty: set[tuple[int, str | None, str]] = set()  # (view, namespace, name)
        self._dirty_lock = threading.Lock()
        self._owners: dict[ObjectRef, str | None] = {}  # primaries' shards (None: draining)
        self._planned: frozenset[str] | None = None  # the live shards of the last full round
        self._last_full = -math.inf
        self._error: BaseException | None = None  # an informer died: this term ends
        self.rounds = 0
        self.full_rounds = 0
        self.live: frozenset[str] = frozenset()

    def run(self, stop: threading.Event, fence: WriteFence) -> None:
        """Watch and assign until `stop`; every patch is fenced by `fence`."""
        leases = self._informer(Lease, self.namespace, f"{RING_LABEL}={self.ring}")
        views = [
            (kind, self._informer(kind.resource, kind.namespace, kind.selector, metadata=True))
            for kind in self.kinds
        ]
        informers = (leases, *(informer for _, informer in views))
        leases.add_handler(on_add=self._poke, on_update=self._poke, on_delete=self._poke)
        for index, (_, informer) in enumerate(views):
            mark = self._marker(index)
            informer.add_handler(on_add=mark, on_update=mark, on_delete=mark)
        liveness = _Liveness()
        for informer in informers:
            informer.start()
        try:
            for informer in informers:
                if not self._synced(informer, stop):
                    return
            log.info("Coordinating ring %s", self.ring)
            with ThreadPoolExecutor(self._workers, thread_name_prefix="cloudcoil-assign") as sender:
                while not stop.is_set() and not fence.closed:
                    if self._error is not None:
                        raise self._error
                    self._wake.clear()
                    live, next_expiry = liveness.update(leases.store.list())
                    self.live = frozenset(live)
                    self._round(views, sender, fence)
                    self._wake.wait(min(_IDLE, max(0.01, next_expiry - time.monotonic())))
        finally:
            for informer in informers:
                informer.stop(timeout=0)
            for informer in informers:
                if not informer.stop(_STOP_TIMEOUT):
                    log.warning("Coordinator informer %s did not stop", informer.name)

    def _informer(
        self,
        resource: type[Resource],
        namespace: str | None,
        selector: str | None,
        *,
        metadata: bool = False,
    ) -> Informer:
        client = self.config.client(resource)
        scope = namespace if client.mapping.namespaced else None
        source: ListWatch = ClientListWatch(client, namespace=scope, label_selector=selector)
        name = f"coordinator-{client.mapping.plural}" + (f"@{scope}" if scope else "")
        return Informer(
            MetadataListWatch(source) if metadata else source,
            name=name,
            on_failure=self._failed,
        )

    def _failed(self, error: BaseException) -> None:
        self._error = self._error or error
        self._wake.set()

    def wake(self) -> None:
        """Re-plan now (the owner calls this when it sets the run's stop event)."""
        self._wake.set()

    def _synced(self, informer: Informer, stop: threading.Event) -> bool:
        give_up = time.monotonic() + _SYNC_TIMEOUT
        while not informer.wait_synced(0.1):  # raises InformerFailed if it died
            if stop.is_set():
                return False
            if time.monotonic() > give_up:
                raise TimeoutError(
                    f"Informer {informer.name} did not sync within {_SYNC_TIMEOUT:g}s"
                )
        return True

    def _poke(self, *_: Any) -> None:
        self._wake.set()

    def _marker(self, index: int) -> Callable[..., None]:
        def mark(obj: JSON, new: JSON | None = None) -> None:
            metadata = (new if new is not None else obj).get("metadata") or {}
            with self._dirty_lock:
                self._dirty.add((index, metadata.get("namespace"), metadata.get("name", "")))
            self._wake.set()

        return mark

    def _changed(self, views: Sequence[tuple[ShardedKind, Informer]]) -> list[tuple[int, JSON]]:
        """Every object after a change of the live shards (or every `_FULL_EVERY`), else
        those that changed since the last round; primaries first."""
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        now = time.monotonic()
        if self.live != self._planned or now - self._last_full >= _FULL_EVERY:
            self._planned, self._last_full = self.live, now
            self.full_rounds += 1
            self._owners.clear()
            order = sorted(range(len(views)), key=lambda index: bool(views[index][0].owners))
            return [(index, obj) for index in order for obj in views[index][1].store.list()]
        entries: list[tuple[int, JSON]] = []
        for index, namespace, name in sorted(
            dirty, key=lambda item: (bool(views[item[0]][0].owners), item[0])
        ):
            obj = views[index][1].store.get(namespace, name)
            if obj is not None:
                entries.append((index, obj))
            elif not views[index][0].owners:  # a primary gone
                group, kind = _group_kind(views[index][0].resource)
                ref = ObjectRef(group, kind, namespace or "", name)
                self._owners.pop(ref, None)
                self._sent.pop(ref, None)
                self._drains.pop(ref, None)
        return entries

    def _round(
        self,
        views: Sequence[tuple[ShardedKind, Informer]],
        sender: ThreadPoolExecutor,
        fence: WriteFence,
    ) -> None:
        self.rounds += 1
        objects: dict[ObjectRef, tuple[type[Resource], JSON]] = {}
        placements: dict[ObjectRef, Placement] = {}
        now = time.monotonic()
        entries = self._changed(views)
        children_done = False
        owners_moved = False
        for index, obj in entries:
            kind = views[index][0]
            if kind.owners and owners_moved and not children_done:
                children_done = True  # an owner changed shard: every child is re-planned
                entries.extend(
                    (i, child)
                    for i, (other, view) in enumerate(views)
                    if other.owners
                    for child in view.store.list()
                )
            placement = self._placement(obj, *_group_kind(kind.resource), kind.owners)
            if kind.owners and placement.owner is None:
                continue  # not a child of a sharded object
            objects[placement.ref] = (kind.resource, obj)
            placements[placement.ref] = placement
            if not kind.owners:
                shard = None if placement.draining else placement.shard
                owners_moved |= self._owners.get(placement.ref, shard) != shard
                self._owners[placement.ref] = shard
                self._acknowledged(placement, now)
        counts: dict[str, int] = dict.fromkeys(self.live, 0)
        for shard in self._owners.values():
            if shard in counts:
                counts[shard] += 1
        self.metrics.set_assigned(counts)
        actions = [
            action
            for action in plan(self.live, placements.values(), self._owners)
            if self._sent.get(action.ref) != _version(objects[action.ref][1])
        ]
        if not actions:
            return
        futures = [
            sender.submit(self._send, action, *objects[action.ref], fence) for action in actions
        ]
        for future in futures:
            future.result()

    def _placement(
        self, obj: JSON, group: str, kind: str, owner_kinds: tuple[tuple[str, str], ...]
    ) -> Placement:
        metadata = obj.get("metadata") or {}
        labels = metadata.get("labels") or {}
        namespace = metadata.get("namespace") or ""
        ref = ObjectRef(group, kind, namespace, metadata.get("name", ""))
        owner = None
        for reference in _controllers(metadata) if owner_kinds else ():
            owner_group = str(reference.get("apiVersion", "")).rpartition("/")[0]
            if (owner_group, reference.get("kind")) in owner_kinds:
                owner = ObjectRef(owner_group, str(reference["kind"]), namespace, reference["name"])
        return Placement(ref, labels.get(self._shard_key), self._drain_key in labels, owner)

    def _acknowledged(self, placement: Placement, now: float) -> None:
        started = self._drains.get(placement.ref)
        if started is not None and placement.shard is None:
            del self._drains[placement.ref]
            self.metrics.drain.labels(ring=self.ring).observe(now - started)

    def _send(self, action: Action, resource: type[Resource], obj: JSON, fence: WriteFence) -> None:
        metadata = obj.get("metadata") or {}
        client = self.config.client(resource).raw
        if action.verb == "drain":
            operations = drain_patch(obj, self.ring)
        else:
            operations = assign_patch(obj, self.ring, action.shard)
        self._sent[action.ref] = _version(obj)
        try:
            with fenced(fence):
                client.json_patch(
                    metadata["name"],
                    operations,
                    namespace=metadata.get("namespace"),
                    field_manager=COORDINATOR_MANAGER,
                )
        except (Conflict, NotFound, Invalid):
            self._sent.pop(action.ref, None)  # changed meanwhile (a failed test): plan again
            self._wake.set()
            return
        except ClientError as error:
            self._sent.pop(action.ref, None)
            log.warning("Could not %s %s: %s", action.verb, action.ref, error)
            self._wake.set()
            return
        if action.verb == "drain":
            self._drains.setdefault(action.ref, time.monotonic())
        self.metrics.moves.labels(ring=self.ring, reason=action.reason).inc()


def _controllers(metadata: JSON) -> Iterator[JSON]:
    for reference in metadata.get("ownerReferences") or []:
        if reference.get("controller") and reference.get("name"):
            yield reference


def _group_kind(resource: type[Resource]) -> tuple[str, str]:
    gvk = resource.gvk()
    return gvk.api_version.rpartition("/")[0], gvk.kind


def _version(obj: JSON) -> str | None:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return None if value is None else str(value)
