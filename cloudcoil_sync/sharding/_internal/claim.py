"""`Claimer`: every replica labels the new objects whose target it is (a `Service`).

Each replica watches the ring's shard Leases and, per sharded kind, only the objects that no
shard holds (its selector plus ``!shard.sharding.cloudcoil.dev/<ring>``, so the API server
sends it nothing about objects already placed). An unplaced object whose target among the
live shards is this replica (children: their controller owner's target) is claimed with one
JSON patch guarded by the object's uid and resourceVersion, fenced by the replica's own
shard Lease: of two claims of one version only one can succeed, so one object never gets
two shards. The assignment writes are thus spread over the replicas (≈1/N each) instead of
all falling on the coordinator, which keeps the moves and a fallback for what nobody claims.

Start-up settles: no claim until the live shards have not changed for `Sharding.settle`
seconds, so replicas starting together do not take objects that would move again at once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from cloudcoil.models.kubernetes.coordination.v1 import Lease
from prometheus_client import CollectorRegistry, Counter

from cloudcoil_sync._internal.service import ExitCallback, joined
from cloudcoil_sync.client import ClientError, Conflict, Invalid, NotFound, fenced
from cloudcoil_sync.sharding._internal.kinds import ShardedKind, informer, placement, synced
from cloudcoil_sync.sharding._internal.labels import (
    COORDINATOR_MANAGER,
    RING_LABEL,
    assign_patch,
    shard_key,
)
from cloudcoil_sync.sharding._internal.liveness import Liveness
from cloudcoil_sync.sharding._internal.ring import pick_shard
from cloudcoil_sync.sharding._internal.settings import Sharding

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import LeaderElection

__all__ = ["Claimer"]

log = logging.getLogger("cloudcoil_sync.sharding")

JSON = dict[str, Any]
Key = tuple[int, str | None, str]  # (kind index, namespace, name)
#: Told of every unplaced object seen, (kind index, object), and of each round (None, None).
Listener = Callable[[int | None, JSON | None], None]


class Claimer:
    """This replica's view of the ring (live shards, unplaced objects) and its claims."""

    def __init__(
        self,
        sharding: Sharding,
        config: Config,
        kinds: Sequence[ShardedKind],
        election: LeaderElection,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.sharding = sharding
        self.identity = sharding.identity
        self.kinds = tuple(kinds)
        self._election = election
        self._config = config
        self._ring = sharding.ring_name
        namespace = sharding.namespace or config.namespace
        unplaced = f"!{shard_key(self._ring)}"
        self.leases = informer(config, Lease, namespace, f"{RING_LABEL}={self._ring}", "shards")
        self.views = [
            informer(
                config,
                kind.resource,
                kind.namespace,
                f"{kind.selector},{unplaced}" if kind.selector else unplaced,
                "unplaced",
                metadata=True,
            )
            for kind in self.kinds
        ]
        self.claims = Counter(
            "cloudcoil_sharding_claims",
            "New objects this replica labelled for itself",
            ("ring", "shard"),
            registry=registry,
        )
        self._liveness = Liveness()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._dirty: dict[Key, JSON] = {}  # unplaced objects targeted at this replica
        self._listeners: list[Listener] = []
        self._live: frozenset[str] = frozenset()
        self._changed_at = time.monotonic()
        self._started_at = self._changed_at
        # When the first live shard's Lease expires unrenewed (no event says so): a wake.
        self._expiry = math.inf
        self._settled = threading.Event()
        self._blocked = False  # could not claim: everything again at `_retry_at`
        self._retry_at = 0.0
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    @property
    def name(self) -> str:
        return f"claims of ring {self._ring}"

    @property
    def live(self) -> frozenset[str]:
        """The live shards, as this replica last saw them."""
        with self._lock:
            return self._live

    @property
    def settled(self) -> bool:
        """Whether start-up settled (the live shards stayed the same for `settle` seconds)."""
        return self._settled.is_set()

    def placing_view(self) -> frozenset[str] | None:
        """The live shards to place new objects on: None until start-up settled and once
        this replica stops (the placing webhook then leaves new objects to the claims)."""
        if not self.settled or self._stop.is_set() or not self.healthy():
            return None
        return self.live

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` (quick: it runs on informer threads) with each unplaced object
        seen and after each round; returns the undo."""
        with self._lock:
            self._listeners.append(listener)

        def undo() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return undo

    # -- the Service ---------------------------------------------------------------------
    def start(self, on_exit: ExitCallback | None = None) -> None:
        if self._thread is not None:
            raise RuntimeError("Claimer instances can only start once")
        self.leases.add_handler(on_add=self._poke, on_update=self._poke, on_delete=self._poke)
        for index, view in enumerate(self.views):
            mark = self._marker(index)
            view.add_handler(on_add=mark, on_update=mark)
        for watcher in (self.leases, *self.views):
            watcher.start()
        self._thread = threading.Thread(
            target=self._main, args=(on_exit,), name=f"cloudcoil-claims-{self._ring}"
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        self._stop.set()
        self._wake.set()
        done = joined(self._thread, timeout)
        for watcher in (self.leases, *self.views):
            done = watcher.stop(timeout) and done
        return done

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._thread is not None  # claiming is ready once it runs

    def healthy(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive() and self._failure is None

    def _main(self, on_exit: ExitCallback | None) -> None:
        try:
            for watcher in (self.leases, *self.views):
                if not synced(watcher, self._stop):
                    return
            workers = self.sharding.assign_workers
            with ThreadPoolExecutor(workers, thread_name_prefix="cloudcoil-claim") as sender:
                while not self._stop.is_set():
                    self._wake.clear()
                    self._round(sender)
                    self._wake.wait(self._idle())
        except BaseException as error:  # an informer died (403, a bad selector): fail the run
            self._failure = error
            if on_exit is not None and not self._stop.is_set():
                on_exit(error)

    # -- rounds --------------------------------------------------------------------------
    def _idle(self) -> float | None:
        """How long to sleep: until the next thing no event announces (a Lease expiring
        unrenewed, start-up settling, a blocked claim's retry); None: until woken (a Lease
        or an unplaced object changed, or stop)."""
        due = min(self._expiry, self._retry_at if self._blocked else math.inf)
        if not self.settled:
            patience = self.sharding.settle
            due = min(due, self._changed_at + patience, self._started_at + 4 * patience)
        return None if due == math.inf else max(0.01, due - time.monotonic())

    def _round(self, sender: ThreadPoolExecutor) -> None:
        live, self._expiry = self._liveness.update(self.leases.store.list())
        now = time.monotonic()
        changed = frozenset(live) != self._live
        with self._lock:
            if changed:
                self._live, self._changed_at = frozenset(live), now
            dirty, self._dirty = self._dirty, {}
            listeners = list(self._listeners)
        just_settled = not self.settled and self._settle(now)
        for listener in listeners:  # after settling: the coordinator waits for it
            listener(None, None)
        if not self.settled:
            with self._lock:
                self._dirty = {**dirty, **self._dirty}  # kept for when it settles
            return
        changed = changed or just_settled
        if self.identity not in self._live or not self._election.is_leader:
            # everything once it can claim again (its own Lease's renewals wake this thread)
            self._blocked, self._retry_at = True, now + self.sharding.retry_period
            return
        if self._blocked:
            if now < self._retry_at:
                with self._lock:
                    self._dirty = {**dirty, **self._dirty}
                return
            self._blocked, changed = False, True
        # The dirty ones were targeted when marked, on these same live shards.
        mine = self._mine(self._everything()) if changed else list(dirty.items())
        if not self._claim_all(sender, mine):
            # fenced or refused: try every unplaced object again after a retry period
            self._blocked, self._retry_at = True, now + self.sharding.retry_period

    def _settle(self, now: float) -> bool:
        """Settle start-up once the live shards stayed the same for `settle` seconds (or
        four times that passed since start); whether it settled now."""
        patience = self.sharding.settle
        if now - self._changed_at < patience and now - self._started_at < 4 * patience:
            return False
        self._settled.set()
        log.info("Ring %s settled on %s", self._ring, sorted(self._live))
        return True

    def _claim_all(self, sender: ThreadPoolExecutor, mine: list[tuple[Key, JSON]]) -> bool:
        """Claim each of `mine` (in parallel if more than one); whether all went through."""
        if len(mine) == 1:  # the usual case of a trickle of new objects: no thread handoff
            return self._claim(*mine[0])
        futures = [sender.submit(self._claim, key, obj) for key, obj in mine]
        return all([future.result() for future in futures])

    def _everything(self) -> dict[Key, JSON]:
        return {
            _key(index, obj): obj
            for index, view in enumerate(self.views)
            for obj in view.store.list()
        }

    def _mine(self, entries: dict[Key, JSON]) -> list[tuple[Key, JSON]]:
        """The unplaced objects among `entries` whose target is this replica."""
        return [(key, obj) for key, obj in entries.items() if self._targeted(key[0], obj)]

    def _targeted(self, index: int, obj: JSON) -> bool:
        """Whether `obj` (of kind `index`) is unplaced and hashes to this replica."""
        found = placement(obj, self.kinds[index], self._ring)
        if found is None or found.shard is not None:
            return False  # not a child of a sharded object, or labelled meanwhile
        hashed = found.owner if found.owner is not None else found.ref
        return pick_shard(self._live, hashed) == self.identity

    def _claim(self, key: Key, obj: JSON) -> bool:
        """Claim `obj`; False if the claim could not be sent or failed for another reason
        than the object having changed."""
        metadata = obj.get("metadata") or {}
        client = self._config.client(self.kinds[key[0]].resource).raw
        try:
            with fenced(self._election.fence):
                client.json_patch(
                    metadata["name"],
                    assign_patch(obj, self._ring, self.identity),
                    namespace=metadata.get("namespace"),
                    field_manager=COORDINATOR_MANAGER,
                )
        except (Conflict, NotFound, Invalid):
            return True  # changed meanwhile (another claim won, or it is gone)
        except ClientError as error:  # fenced, or the API failed: retried
            log.warning("Could not claim %s/%s: %s", metadata.get("namespace"), key[2], error)
            return False
        self.claims.labels(ring=self._ring, shard=self.identity).inc()
        return True

    def _poke(self, *_: Any) -> None:
        self._wake.set()

    def _marker(self, index: int) -> Callable[..., None]:
        def mark(obj: JSON, new: JSON | None = None) -> None:
            current = new if new is not None else obj
            # Filtered here, on the object the informer decoded (the store would decode it
            # again): most unplaced objects are another shard's. A change of the live
            # shards re-examines every unplaced object anyway.
            mine = self._targeted(index, current)
            with self._lock:
                if mine:
                    self._dirty[_key(index, current)] = current
                listeners = list(self._listeners)
            for listener in listeners:
                listener(index, current)
            if mine:
                self._wake.set()

        return mark


def _key(index: int, obj: JSON) -> Key:
    metadata = obj.get("metadata") or {}
    return index, metadata.get("namespace"), metadata.get("name", "")
