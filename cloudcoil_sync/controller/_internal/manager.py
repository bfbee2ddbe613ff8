"""`Manager`: run controllers together on shared informers, optionally under leader election.

Sequence of one run::

    health server started (bind failure is fatal)
    [leader election: wait to lead; standbys start no informers, unless warm: then the
     runtimes are built and their informers list and watch before leading, so that a
     takeover reconciles from a synced cache]
        leader lifespan entered
        runtimes built (every informer handler registered), informers started, synced
        ... until stop, loss of leadership or a fatal controller error ...
        no pass starts any more (the queues hand out no key; queued keys are left to the
        next leader), in-flight passes finish within shutdown_timeout or are abandoned,
        the term's write fence closes (writes on the wire answered): see `term.Term`
        informers stopped
        leader lifespan exited
    [Lease released]
    health server stopped

A fatal error of one controller (informer death, mapper exception, sync timeout) stops its
siblings and is raised from `run`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from cloudcoil_sync.client._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.health import HealthServer
from cloudcoil_sync.controller._internal.informer import Informer, InformerFailed
from cloudcoil_sync.controller._internal.leader import LeaderElection, LeadershipLost
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime, InformerPool, SyncTimeout
from cloudcoil_sync.controller._internal.term import Term

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["Manager"]

log = logging.getLogger("cloudcoil_sync.manager")

# How often waits re-check a caller's stop event (it cannot wake us).
_TICK = 0.05
# Extra time, beyond the controllers' shutdown_timeout, leader work may take to stop.
_STOP_MARGIN = 20.0
_POOL_STOP_TIMEOUT = 10.0

LeaderLifespan = Callable[[], AbstractContextManager[Any]]


class Manager:
    """Run controllers together, sharing compatible informers and stopping on failure.

    Configs come from the controller, else the manager. With `leader_election`, controllers
    (and `leader_lifespan`) run only while this replica leads. `health` serves /healthz,
    /readyz and /metrics for this manager. A manager runs once.
    """

    def __init__(
        self,
        *controllers: Controller[Any],
        config: Config | None = None,
        leader_election: LeaderElection | None = None,
        health: HealthServer | None = None,
        leader_lifespan: LeaderLifespan | None = None,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        if not controllers:
            raise ValueError("A manager needs at least one controller")
        if any(not isinstance(c, Controller) for c in controllers):
            raise TypeError("Manager expects Controller instances")
        if len({id(c) for c in controllers}) != len(controllers):
            raise ValueError("A controller cannot be registered twice")
        self.names = tuple(
            c.name or f"{c.resource.gvk().kind.lower()}-{index}"
            for index, c in enumerate(controllers, 1)
        )
        if len(set(self.names)) != len(self.names):
            raise ValueError("Managed controllers must have distinct metric names")
        if leader_election is not None and not isinstance(leader_election, LeaderElection):
            raise TypeError("leader_election must be a LeaderElection or None")
        if health is not None and not isinstance(health, HealthServer):
            raise TypeError("health must be a HealthServer or None")
        if leader_lifespan is not None and leader_election is None:
            raise ValueError("A leader lifespan requires leader election")
        self.controllers = controllers
        self.config = config
        self.leader_election = leader_election
        self.health = health
        self._leader_lifespan = leader_lifespan
        self._metrics = metrics or OperatorMetrics()
        self._metrics.manager(
            healthy=lambda: self.healthy,
            ready=lambda: self.ready,
            informers=lambda: self.informer_count,
        )
        if leader_election is not None:
            leader_election.bind_metrics(self._metrics.registry)
        self._lock = threading.Condition()
        self._used = False
        self._running = False
        self._finished = False
        self._failure: BaseException | None = None
        self._fatal: BaseException | None = None
        self._stopping = False
        self._wake = threading.Event()
        self._pools: dict[int, InformerPool] = {}
        self._runtimes: list[ControllerRuntime] = []
        self._stops: tuple[threading.Event, ...] = ()
        self._term: Term | None = None

    # -- state --------------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """Running without a fatal failure (also while starting and on standby)."""
        return self._running and self._failure is None and self._fatal is None

    @property
    def ready(self) -> bool:
        """Healthy, leading (if electing), and every controller synced with workers running."""
        with self._lock:
            runtimes = list(self._runtimes)
        return (
            self.healthy
            and not self._stopping
            and (self.leader_election is None or self.leader_election.is_leader)
            and len(runtimes) == len(self.controllers)
            and all(runtime.ready for runtime in runtimes)
        )

    @property
    def available(self) -> bool:
        """What a HealthServer's /readyz reports: healthy and not stopping, and synced when
        leading (or not electing). A healthy standby is available: leadership must never
        gate Pod readiness, or a second replica (or a rolling update) never becomes Ready.
        """
        election = self.leader_election
        if election is not None and not election.is_leader:
            return self.healthy and not self._stopping
        return self.ready

    @property
    def informer_count(self) -> int:
        """Distinct informers this manager runs (0 on a standby)."""
        with self._lock:
            return sum(len(pool) for pool in self._pools.values())

    @property
    def registry(self) -> CollectorRegistry:
        return self._metrics.registry

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def cached(self, resource: type[Any], namespace: str | None = None) -> Any:
        """A reader over the informer of the first running controller that watches `resource`.

        Standby replicas run no informers: there (and for kinds no controller watches) this
        raises ValueError; use a live client instead.
        """
        with self._lock:
            runtimes = list(self._runtimes)
        for runtime in runtimes:
            try:
                return runtime.cached(resource, namespace=namespace)
            except ValueError:
                continue
        raise ValueError(
            f"{resource.__name__} is not cached by any running controller (standby replicas "
            "run no informers); use request.client(...) for a live read"
        )

    def metrics(self) -> str:
        """Prometheus text exposition of this manager's registry."""
        return self._metrics.render().decode()

    def wait_ready(self, timeout: float = 30) -> None:
        """Block until ready; raise the failure, or RuntimeError if it stopped first.

        TimeoutError after `timeout` seconds.
        """
        give_up = time.monotonic() + timeout
        while not self.ready:
            if self._failure is not None:
                raise self._failure
            if self._finished:
                raise RuntimeError("Manager stopped before becoming ready")
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"Manager did not become ready within {timeout:g}s")
            with self._lock:
                self._lock.wait(min(_TICK, remaining))

    # -- run ----------------------------------------------------------------------------------

    def run(
        self, stop: threading.Event | None = None, *, also_stop: tuple[threading.Event, ...] = ()
    ) -> None:
        """Run until `stop` is set, leadership is lost (LeadershipLost) or a controller fails.

        No pass starts once `stop` or any event of `also_stop` is set (read at each pass
        start, so an owner's own stop event takes effect without a polling round).
        """
        with self._lock:
            if self._used:
                raise RuntimeError("Manager instances can only run once")
            self._used = True
            self._running = True
        stop = stop if stop is not None else threading.Event()
        self._stops = (stop, *also_stop)
        try:
            with ExitStack() as stack:
                if self.health is not None:
                    self._start_health(self.health, stack)
                if self.leader_election is None:
                    if not stop.is_set():
                        self._run_controllers(stop)
                else:
                    self._run_elected(self.leader_election, stop)
        except BaseException as error:
            self._failure = error
            raise
        finally:
            with self._lock:
                self._running = False
                self._finished = True
                self._lock.notify_all()

    def _start_health(self, health: HealthServer, stack: ExitStack) -> None:
        health.start(
            lambda: self.healthy,
            lambda: self.available,
            self.registry,
            controllers_ready=lambda: self.ready,
        )
        stack.callback(health.stop)

    def _run_elected(self, election: LeaderElection, stop: threading.Event) -> None:
        config = election.config or self.config or self.controllers[0].config
        longest = max(c.shutdown_timeout for c in self.controllers)
        if election.warm:
            self._warm_up(election.fence)
        try:
            self._check_fatal()  # failed before run() started (later: it stops the election)
            election.run(
                lambda work_stop: self._leader_work(election, work_stop),
                stop=stop,
                config=config,
                join_timeout=longest + _POOL_STOP_TIMEOUT + _STOP_MARGIN,
            )
            self._check_fatal()  # a warm standby that failed before leading
        finally:
            term = self._term
            if term is not None and not term.ended:  # a warm standby that never led
                self._stop_runtimes(term)

    def _warm_up(self, fence: WriteFence) -> None:
        """Build the runtimes and start their informers now (their workers start on leading)."""
        term = self._term = Term(fence, stops=self._stops)
        for runtime in self._build(term):
            runtime.start()
        log.info("Warm standby: informers listing and watching before leading")

    def _leader_work(self, election: LeaderElection, stop: threading.Event) -> None:
        """Controllers inside the leader lifespan; the lifespan sees how leadership ended."""
        lifespan = self._leader_lifespan
        try:
            with lifespan() if lifespan is not None else nullcontext():
                self._run_controllers(stop, lost=election.lost, fence=election.fence)
                if election.failure is not None:
                    raise election.failure
                if election.lost.is_set():
                    raise LeadershipLost(f"Lost leadership of Lease {election.name}")
        except LeadershipLost:
            return  # election.run raises its own LeadershipLost, with the reason
        except BaseException as error:
            if error is not election.failure:
                raise

    def _run_controllers(
        self,
        stop: threading.Event,
        *,
        lost: threading.Event | None = None,
        fence: WriteFence | None = None,
    ) -> None:
        """Build, start and sync the runtimes; wait; stop them (`Term.shut_down`).

        `fence` is the election's (closed past the renew deadline); without election the
        term has its own.
        """
        term = self._term
        try:
            if term is None:
                term = self._term = Term(fence, stops=(stop, *self._stops))
                runtimes = self._build(term)
                for runtime in runtimes:
                    runtime.start()
            else:  # warmed up while standing by: informers already started
                term.watch(stop)
                with self._lock:
                    runtimes = list(self._runtimes)
            for runtime in runtimes:
                if not self._wait_synced(runtime, stop):
                    break
            self._check_fatal()
            while not stop.is_set():
                self._wake.wait(_TICK)
                self._check_fatal()
            self._stopping = True
            lost_now = lost is not None and lost.is_set()
            log.info("Stopping controllers%s", " (leadership lost)" if lost_now else "")
        except BaseException:
            self._stopping = True
            raise
        finally:
            if term is not None:
                self._stop_runtimes(term)

    def _build(self, term: Term) -> list[ControllerRuntime]:
        for controller, name in zip(self.controllers, self.names, strict=True):
            config = controller.config or self.config
            if config is None:
                raise ValueError(f"Controller {name} has no Config: pass config= to the Manager")
            with self._lock:
                pool = self._pools.get(id(config))
                if pool is None:
                    pool = self._pools[id(config)] = InformerPool(config)
            runtime = ControllerRuntime(
                controller,
                config,
                informers=pool,
                metrics=self._metrics,
                name=name,
                on_fatal=self._on_fatal,
                term=term,
            )
            with self._lock:
                self._runtimes.append(runtime)
        with self._lock:
            return list(self._runtimes)

    def _wait_synced(self, runtime: ControllerRuntime, stop: threading.Event) -> bool:
        """Sync within the controller's sync_timeout, in slices so stop and failures wake us."""
        limit = runtime.controller.sync_timeout
        give_up = time.monotonic() + limit
        while True:
            self._check_fatal()
            if stop.is_set():
                return False
            remaining = give_up - time.monotonic()
            try:
                runtime.wait_synced(timeout=max(0.0, min(_TICK * 4, remaining)))
            except SyncTimeout:
                if remaining <= _TICK * 4:
                    raise SyncTimeout(
                        f"Controller {runtime.name} did not sync within {limit:g}s (sync_timeout)"
                    ) from None
                continue
            except BaseException as error:
                if error is self._fatal:
                    self._check_fatal()  # the same error, explained
                raise
            with self._lock:
                self._lock.notify_all()
            return True

    def _on_fatal(self, error: BaseException) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = error
            self._lock.notify_all()
        self._wake.set()
        election = self.leader_election
        if election is not None and election.warm and election.standing_by:
            election.stop()  # a warm standby's informer died: stop standing by, report it

    def _check_fatal(self) -> None:
        error = self._fatal
        if error is None:
            return
        informer = self._failed_informer(error)
        if informer is not None:
            if not informer.synced:
                informer.wait_synced(0)  # raises InformerFailed, with a hint (CRD? RBAC?)
            raise InformerFailed(f"Informer {informer.name} failed: {error}") from error
        raise error

    def _failed_informer(self, error: BaseException) -> Informer | None:
        with self._lock:
            runtimes = list(self._runtimes)
        for runtime in runtimes:
            for kind in runtime.controller.kinds:
                informer = runtime.informer_for(kind)
                if informer.error is error:
                    return informer
        return None

    def _stop_runtimes(self, term: Term) -> None:
        """Stop passes (the term's order), then informers."""
        with self._lock:
            runtimes = list(self._runtimes)
            pools = list(self._pools.values())
        term.shut_down(runtimes)  # if a write stayed on the wire, the elector keeps the Lease
        for pool in pools:
            if not pool.stop(timeout=_POOL_STOP_TIMEOUT):
                log.warning("Some informers did not stop within %gs", _POOL_STOP_TIMEOUT)
        with self._lock:
            self._lock.notify_all()
