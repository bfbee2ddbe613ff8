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
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from cloudcoil_sync._internal.service import ServiceGroup, await_ready
from cloudcoil_sync.client._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.health import HealthServer
from cloudcoil_sync.controller._internal.informer import Informer, InformerFailed
from cloudcoil_sync.controller._internal.informer_pool import InformerPool
from cloudcoil_sync.controller._internal.leader import LeaderElection, LeadershipLost
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime, SyncTimeout
from cloudcoil_sync.controller._internal.term import Passes, Term

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.share import Share

__all__ = ["Manager"]

log = logging.getLogger("cloudcoil_sync.manager")

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
        shard: Share | None = None,
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
        self._shard = shard  # a sharded replica's: informers narrowed to its share
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
        self._waiting: threading.Event | None = None  # what the running term waits on
        self._listeners: list[Callable[[], None]] = []
        self._pools: dict[int, InformerPool] = {}
        self._runtimes: list[ControllerRuntime] = []
        self._stops: tuple[threading.Event, ...] = ()
        self._term: Term | None = None
        self._work: ServiceGroup | None = None  # the term's informers and passes

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

    def wait_ready(self, timeout: float | None = 30) -> bool:
        """Block until ready (True); False after `timeout` seconds. Raises the failure, or
        RuntimeError if it stopped first."""
        return await_ready(
            self._lock,
            lambda: self.ready,
            failure=lambda: self._failure,
            finished=lambda: self._finished,
            what="Manager",
            timeout=timeout,
        )

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call `listener` (quick, from any thread) whenever readiness or health may change."""
        self._listeners.append(listener)

    def stop(self, timeout: float | None = None) -> bool:
        """Ask a running `run` to stop (as setting its stop event does); True once it returned
        within `timeout`. Before `run` this does nothing and returns True."""
        with self._lock:
            if self._stops:
                self._stops[0].set()
            self._lock.notify_all()
            return self._lock.wait_for(lambda: self._finished or not self._used, timeout)

    def _notify(self) -> None:
        with self._lock:
            self._lock.notify_all()
        for listener in list(self._listeners):
            listener()

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
            self._notify()

    def _start_health(self, health: HealthServer, stack: ExitStack) -> None:
        health.probe(
            lambda: self.healthy,
            lambda: self.available,
            self.registry,
            controllers_ready=lambda: self.ready,
        )
        services = ServiceGroup("manager")
        services.add(health, stop_timeout=5.0)
        services.start(on_exit=lambda error: self._on_fatal(error or _health_stopped()))
        stack.callback(services.stop)

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
            term, work = self._term, self._work
            if term is not None and work is not None and not term.ended:
                term.shut_down(self._runtime_list())  # a warm standby that never led
                work.stop()

    def _warm_up(self, fence: WriteFence) -> None:
        """Build the runtimes and start their informers now (their workers start on leading)."""
        self._begin_term(Term(fence, stops=self._stops)).start()  # informers only, for now
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
        """Run the term's group (`Term.services`): informers, then passes once synced; wait;
        stop it in reverse (passes by `Term.shut_down`, then informers).

        `fence` is the election's (closed past the renew deadline); without election the
        term has its own.
        """
        work = self._work
        try:
            if work is None:
                work = self._begin_term(Term(fence, stops=(stop, *self._stops)))
            else:  # warmed up while standing by: informers already started
                self._require_term().watch(stop)
            term = self._require_term()
            work.add(Passes(term, self._runtime_list, lambda r: self._wait_synced(r, stop)))
            work.start()
            self._wait_stopped(stop)
            self._stopping = True
            lost_now = lost is not None and lost.is_set()
            log.info("Stopping controllers%s", " (leadership lost)" if lost_now else "")
        except BaseException:
            self._stopping = True
            raise
        finally:
            with self._lock:
                self._waiting = None
            if work is not None:
                work.stop()
            self._notify()

    def _begin_term(self, term: Term) -> ServiceGroup:
        """Build the term's runtimes (every informer handler registered) and its group."""
        self._term = term
        work = self._work = term.services(
            self._runtime_list, self._pool_list, informer_stop_timeout=_POOL_STOP_TIMEOUT
        )
        self._build(term)
        return work

    def _require_term(self) -> Term:
        assert self._term is not None
        return self._term

    def _runtime_list(self) -> list[ControllerRuntime]:
        with self._lock:
            return list(self._runtimes)

    def _pool_list(self) -> list[InformerPool]:
        with self._lock:
            return list(self._pools.values())

    def _build(self, term: Term) -> list[ControllerRuntime]:
        for controller, name in zip(self.controllers, self.names, strict=True):
            config = controller.config or self.config
            if config is None:
                raise ValueError(f"Controller {name} has no Config: pass config= to the Manager")
            with self._lock:
                pool = self._pools.get(id(config))
            if pool is None:
                pool = InformerPool(config, on_synced=self._notify)
            runtime = ControllerRuntime(
                controller,
                config,
                informers=pool,
                metrics=self._metrics,
                name=name,
                on_fatal=self._on_fatal,
                term=term,
                shard=self._shard,
            )
            with self._lock:  # a new pool's informer is counted with the runtime reading it
                self._pools.setdefault(id(config), pool)
                self._runtimes.append(runtime)
        with self._lock:
            return list(self._runtimes)

    def _wait_synced(self, runtime: ControllerRuntime, stop: threading.Event) -> bool:
        """Wait (woken by informer syncs, fatal errors and `stop()`) until the runtime's
        informers listed, within its sync_timeout; then its workers start."""
        limit = runtime.controller.sync_timeout

        def stopping() -> bool:  # the term's stop, or the run's (`stop()` notifies)
            return stop.is_set() or any(event.is_set() for event in self._stops)

        with self._lock:
            self._lock.wait_for(
                lambda: runtime.synced or self._fatal is not None or stopping(), limit
            )
        self._check_fatal()
        if stopping():
            return False
        if not runtime.synced:
            raise SyncTimeout(
                f"Controller {runtime.name} did not sync within {limit:g}s (sync_timeout)"
            )
        try:
            runtime.wait_synced(timeout=0)  # synced: starts its workers
        except BaseException as error:
            if error is self._fatal:
                self._check_fatal()  # the same error, explained
            raise
        self._notify()
        return True

    def _wait_stopped(self, stop: threading.Event) -> None:
        """Until `stop` is set: by the owner, or by `_on_fatal` (then its error is raised)."""
        with self._lock:
            self._waiting = stop
        self._check_fatal()  # failed before we started waiting
        stop.wait()
        self._check_fatal()

    def _on_fatal(self, error: BaseException) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = error
            waiting = self._waiting
            self._lock.notify_all()
        if waiting is not None:
            waiting.set()  # the term's stop: the run ends and raises the error
        self._notify()
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


def _health_stopped() -> RuntimeError:
    return RuntimeError("The health server stopped serving")
