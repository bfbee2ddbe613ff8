"""`RingElection`: compete for the ring Lease and coordinate while holding it (a `Service`).

Losing the ring Lease ends only the coordinator's term (the replica's shard keeps
reconciling): the replica builds a new elector and competes again, until stopped.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from cloudcoil_sync._internal.service import ExitCallback, joined
from cloudcoil_sync.controller import LeaderElection, LeadershipLost
from cloudcoil_sync.controller._internal.event_relay import StopEvent
from cloudcoil_sync.sharding._internal.claim import Claimer
from cloudcoil_sync.sharding._internal.coordinator import Coordinator, CoordinatorMetrics
from cloudcoil_sync.sharding._internal.settings import Sharding

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["RingElection"]

log = logging.getLogger("cloudcoil_sync.sharding")

_JOIN_MARGIN = 10.0


class RingElection:
    """The replica's bid for the ring Lease; the coordinator runs while it holds it."""

    def __init__(
        self,
        sharding: Sharding,
        config: Config,
        claimer: Claimer,
        metrics: CoordinatorMetrics,
    ) -> None:
        self.sharding = sharding
        self.config = config
        self.claimer = claimer
        self.metrics = metrics
        self._stop = StopEvent()  # wakes the election's run without a relay thread
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._election: LeaderElection | None = None
        self._coordinator: Coordinator | None = None
        self._failure: BaseException | None = None
        self.terms = 0

    @property
    def name(self) -> str:
        return f"ring {self.sharding.ring_name}"

    @property
    def coordinating(self) -> bool:
        with self._lock:
            election = self._election
        return election is not None and election.is_leader

    @property
    def coordinator(self) -> Coordinator | None:
        with self._lock:
            return self._coordinator

    def start(self, on_exit: ExitCallback | None = None) -> None:
        if self._thread is not None:
            raise RuntimeError("RingElection instances can only start once")
        self._thread = threading.Thread(
            target=self._main, args=(on_exit,), name=f"cloudcoil-ring-{self.sharding.ring_name}"
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        self._stop.set()
        with self._lock:
            election, coordinator = self._election, self._coordinator
        if election is not None:
            election.stop()  # inside run(): asks it to drain and release
        if coordinator is not None:
            coordinator.wake()
        thread = self._thread
        return joined(thread, timeout)

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._thread is not None  # competing is ready: coordinating is optional

    def healthy(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive() and self._failure is None

    def _main(self, on_exit: ExitCallback | None) -> None:
        try:
            while not self._stop.is_set():
                self._term()
        except BaseException as error:  # a fatal error (403 on Leases): the run fails
            self._failure = error
            if on_exit is not None:
                on_exit(error)

    def _term(self) -> None:
        sharding = self.sharding
        election = LeaderElection(
            sharding.ring_name,
            namespace=sharding.namespace,
            identity=sharding.identity,
            lease_duration=sharding.lease_duration,
            renew_deadline=sharding.renew_deadline,
            retry_period=sharding.retry_period,
            config=self.config,
        )
        coordinator = Coordinator(sharding, self.config, self.claimer, self.metrics)
        with self._lock:
            self._election, self._coordinator = election, coordinator
        if self._stop.is_set():
            return

        def work(stop: threading.Event) -> None:
            self.terms += 1
            coordinator.run(stop, election.fence)

        try:
            election.run(work, stop=self._stop, join_timeout=_JOIN_MARGIN + 30)
        except LeadershipLost as error:
            log.warning("Coordinator of ring %s stopped: %s", sharding.ring_name, error)
        except Exception as error:
            if _fatal(error):
                raise
            log.error(
                "Coordinator of ring %s failed: %s; competing again", sharding.ring_name, error
            )
            self._stop.wait(sharding.retry_period)


def _fatal(error: BaseException) -> bool:
    from cloudcoil_sync.client import Forbidden, Unauthorized

    return isinstance(error, Forbidden | Unauthorized)
