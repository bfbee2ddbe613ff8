"""The coordinator: while its replica holds the ring Lease, move objects between live shards.

New objects are claimed by their target shards (`claim.Claimer`); the coordinator keeps
what needs one writer. When the live shards change, `grace` later (claims and placements
made from views not yet updated), and every `_FULL_EVERY`, it lists every sharded object,
metadata only, a page at a time, and sends the moves: a drain to an object whose live
shard is no longer its target, a direct assignment for one on a dead shard, children to
their owner's shard. Between those rounds it watches nothing of its own: it reads the
replica's claimer (the live shards and the unplaced objects) and assigns an object that no
shard claimed within `Sharding.grace` seconds. Every patch is fenced by the ring Lease.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from cloudcoil.resources import Resource
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cloudcoil_sync.client import ClientError, Conflict, Invalid, NotFound, fenced
from cloudcoil_sync.controller._internal.event_relay import relay
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.sharding._internal.claim import Claimer
from cloudcoil_sync.sharding._internal.kinds import ShardedKind, listed, placement
from cloudcoil_sync.sharding._internal.labels import (
    COORDINATOR_MANAGER,
    assign_patch,
    drain_patch,
)
from cloudcoil_sync.sharding._internal.plan import Action, Placement, plan
from cloudcoil_sync.sharding._internal.ring import ObjectRef
from cloudcoil_sync.sharding._internal.settings import Sharding

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["Coordinator", "CoordinatorMetrics"]

log = logging.getLogger("cloudcoil_sync.sharding")

JSON = dict[str, Any]
Key = tuple[int, str | None, str]  # (kind index, namespace, name)
Move = tuple[Action, type[Resource], JSON]
# Between lists of every object when the live shards stay the same: a safety net for labels
# nobody planned (an object created labelled for a shard that is gone). What a stale view
# misplaces is repaired by the round `grace` after each change of the live shards.
_FULL_EVERY = 300.0


class CoordinatorMetrics:
    """Assignments, moves and drain times of one ring (on the coordinating replica)."""

    def __init__(self, ring: str, registry: CollectorRegistry | None = None) -> None:
        self.ring = ring
        self.assigned = Gauge(
            "cloudcoil_sharding_assigned_objects",
            "Primary objects assigned to each live shard, as the coordinator last listed them",
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


class Coordinator:
    """Move a ring's objects between its live shards; run as the ring Lease's leader work."""

    def __init__(
        self,
        sharding: Sharding,
        config: Config,
        claimer: Claimer,
        metrics: CoordinatorMetrics,
    ) -> None:
        self.ring = sharding.ring_name
        self.config = config
        self.claimer = claimer
        self.kinds = claimer.kinds
        self.metrics = metrics
        self.grace = sharding.grace
        self.settle = sharding.settle
        self._seen_live: tuple[frozenset[str], float] = (frozenset(), -math.inf)
        self._workers = sharding.assign_workers
        # Woken by the claimer's rounds, a new unplaced object due before what it sleeps
        # towards (`_until`), a failed move, an acknowledged drain, and its stop event.
        self._wake = threading.Condition()
        self._woken = False
        self._until = math.inf  # while asleep: when it wakes by itself (monotonic)
        self._lock = threading.Lock()
        self._drains: dict[ObjectRef, float] = {}  # drain requested at (monotonic)
        self._pending: dict[Key, float] = {}  # unplaced objects: first seen at, oldest first
        self._planned: frozenset[str] | None = None  # the live shards of the last full round
        self._last_full = -math.inf
        self._full_due = math.inf  # a full round soon: drains were acknowledged
        self.rounds = 0
        self.full_rounds = 0
        self.live: frozenset[str] = frozenset()

    def run(self, stop: threading.Event, fence: WriteFence) -> None:
        """Coordinate until `stop` (or the fence closes); every patch is fenced by `fence`."""
        undo = self.claimer.subscribe(self._seen)
        unrelay = relay(stop, self._wake)  # the fence closes as the term's stop is set
        log.info("Coordinating ring %s", self.ring)
        try:
            with ThreadPoolExecutor(self._workers, thread_name_prefix="cloudcoil-assign") as sender:
                while not stop.is_set() and not fence.closed:
                    with self._wake:
                        self._woken = False
                    due = math.inf  # not settled: the claimer's round that settles wakes us
                    if self.claimer.settled:
                        if self.rounds == 0:  # the grace runs from the ring settling
                            with self._lock:
                                self._pending = dict.fromkeys(self._pending, time.monotonic())
                        self.live = self.claimer.live
                        due = time.monotonic() + self._round(sender, fence)
                    self._sleep(stop, due)
        finally:
            unrelay()
            undo()

    def _sleep(self, stop: threading.Event, due: float) -> None:
        """Until woken, `stop` or `due` (time.monotonic)."""
        with self._wake:
            self._until = due
            while not self._woken and not stop.is_set():
                left = due - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(None if left == math.inf else left)
            self._until = math.inf  # awake: whatever comes wakes the next sleep at once

    def wake(self) -> None:
        """Re-plan now (the owner calls this when it sets the run's stop event)."""
        with self._wake:
            self._woken = True
            self._wake.notify_all()

    def _seen(self, index: int | None, obj: JSON | None) -> None:
        """The claimer saw `obj` unplaced (or ended a round: None): note it, wake."""
        if index is not None and obj is not None:
            metadata = obj.get("metadata") or {}
            key = (index, metadata.get("namespace"), metadata.get("name", ""))
            found = placement(obj, self.kinds[index], self.ring)
            now = time.monotonic()
            with self._lock:
                new = key not in self._pending
                self._pending.setdefault(key, now)
                started = None if found is None else self._drains.pop(found.ref, None)
                if started is not None and any(kind.owners for kind in self.kinds):
                    self._full_due = min(self._full_due, now + self.grace)  # children next
            if started is not None:
                self.metrics.drain.labels(ring=self.ring).observe(now - started)
            if started is None and not (new and now + self.grace < self._until):
                return  # its grace ends after the coordinator wakes anyway
        self.wake()

    def _round(self, sender: ThreadPoolExecutor, fence: WriteFence) -> float:
        """One pass; returns how long it may sleep before the next is due."""
        self.rounds += 1
        now = time.monotonic()
        if not self.live:
            return math.inf  # the claimer's round that sees a live shard wakes us
        if self._seen_live[0] != self.live:
            self._seen_live = (self.live, now)
        with self._lock:
            full_due = self._full_due
        settling = self._seen_live[1] + self.settle - now
        if self.live != self._planned and self.live - (self._planned or set()) and settling > 0:
            # A shard joined: wait until the ring settles (more may be starting) to move
            # objects once, not once per joiner; a shard that left is handled at once.
            return max(0.01, min(settling, self._fallback(sender, fence, now)))
        changed = self.live != self._planned
        if changed or now >= full_due or now - self._last_full >= _FULL_EVERY:
            self._planned, self._last_full = self.live, now
            with self._lock:  # after a change, once more when every view has caught up
                self._full_due = now + self.grace if changed else math.inf
            self._full_round(sender, fence)
        with self._lock:
            full_due = min(self._full_due, self._last_full + _FULL_EVERY)
        now = time.monotonic()
        return max(0.01, min(full_due - now, self._fallback(sender, fence, now)))

    def _full_round(self, sender: ThreadPoolExecutor, fence: WriteFence) -> None:
        """List every object once, a page at a time (primaries first): drain the misplaced,
        reassign the dead's, move children to their owner's shard."""
        self.full_rounds += 1
        started = time.monotonic()
        # Every primary's shard, for its children; without owned kinds only the drained
        # ones (memory: a full round would otherwise hold one entry per object).
        children = any(kind.owners for kind in self.kinds)
        with self._lock:
            drained = set(self._drains)
        owners: dict[ObjectRef, str | None] = {}
        counts: dict[str, int] = dict.fromkeys(self.live, 0)
        for kind in sorted(self.kinds, key=lambda kind: bool(kind.owners)):
            for page in listed(self.config, kind):
                entries = [
                    (kind, obj, found)
                    for obj in page
                    if (found := placement(obj, kind, self.ring)) is not None
                ]
                for _, _, found in entries if not kind.owners else ():
                    if children or found.ref in drained:
                        owners[found.ref] = None if found.draining else found.shard
                    if found.shard in counts:
                        counts[found.shard] += 1
                moved = self._send_all(sender, fence, self._moves(entries, owners))
                if children:
                    owners.update((a.ref, a.shard) for a in moved if a.verb == "assign")
        self.metrics.set_assigned(counts)
        with self._lock:  # drains of objects deleted meanwhile are never acknowledged
            self._drains = {
                ref: at for ref, at in self._drains.items() if ref in owners or at >= started
            }

    def _moves(
        self,
        entries: Sequence[tuple[ShardedKind, JSON, Placement]],
        owners: dict[ObjectRef, str | None],
    ) -> list[Move]:
        """The moves among `entries`; unplaced objects are left to the claims and fallback."""
        found = {placement.ref: (kind.resource, obj) for kind, obj, placement in entries}
        placements = [placement for _, _, placement in entries]
        return [
            (action, *found[action.ref])
            for action in plan(self.live, placements, owners)
            if action.reason != "new"
        ]

    def _fallback(self, sender: ThreadPoolExecutor, fence: WriteFence, now: float) -> float:
        """Assign the unplaced objects no other shard claimed within the grace period."""
        due: list[Key] = []
        wait = math.inf  # nothing pending: a new one wakes us (`_seen`)
        with self._lock:  # oldest first (insertion order), so only the due are visited
            for key, seen in self._pending.items():
                if now - seen < self.grace:
                    wait = seen + self.grace - now
                    break
                due.append(key)
            for key in due:
                del self._pending[key]
        moves: list[Move] = []
        keys: dict[ObjectRef, Key] = {}
        for key in due:
            index, namespace, name = key
            obj = self.claimer.views[index].store.get(namespace, name)
            kind = self.kinds[index]
            found = None if obj is None else placement(obj, kind, self.ring)
            if obj is None or found is None or found.shard is not None:
                continue  # claimed meanwhile (it leaves the claimer's view), or not sharded
            for action in plan(self.live, [found]):
                if action.shard != self.claimer.identity:  # this replica's claimer has it
                    moves.append((action, kind.resource, obj))
                    keys[action.ref] = key
        applied = {action.ref for action in self._send_all(sender, fence, moves)}
        again = keys.keys() - applied
        with self._lock:  # not applied (fenced, refused, changed): due again after the grace
            for ref in again:
                self._pending.setdefault(keys[ref], time.monotonic())
        return max(0.01, min(wait, self.grace) if again else wait)

    def _send_all(
        self, sender: ThreadPoolExecutor, fence: WriteFence, moves: Iterable[Move]
    ) -> list[Action]:
        """Send `moves` in parallel; the actions that were applied."""
        futures = [(move[0], sender.submit(self._send, *move, fence)) for move in moves]
        return [action for action, future in futures if future.result()]

    def _send(self, action: Action, resource: type[Resource], obj: JSON, fence: WriteFence) -> bool:
        metadata = obj.get("metadata") or {}
        client = self.config.client(resource).raw
        if action.verb == "drain":
            operations = drain_patch(obj, self.ring)
        else:
            operations = assign_patch(obj, self.ring, action.shard)
        if action.verb == "drain":  # before sending: the release may be seen before it returns
            with self._lock:
                self._drains.setdefault(action.ref, time.monotonic())
        try:
            with fenced(fence):
                client.json_patch(
                    metadata["name"],
                    operations,
                    namespace=metadata.get("namespace"),
                    field_manager=COORDINATOR_MANAGER,
                )
        except ClientError as error:
            if action.verb == "drain":
                with self._lock:
                    self._drains.pop(action.ref, None)
            if not isinstance(error, Conflict | NotFound | Invalid):
                log.warning("Could not %s %s: %s", action.verb, action.ref, error)
            if action.reason != "new":  # a move: plan it again from a fresh list soon
                with self._lock:
                    self._full_due = min(self._full_due, time.monotonic() + self.grace)
            self.wake()  # an unplaced one changed (a failed test): its event follows
            return False
        self.metrics.moves.labels(ring=self.ring, reason=action.reason).inc()
        return True
