"""`Manager`: run controllers together on shared informers, optionally under leader election.

A Manager is a `Service` composed of `ServiceGroup` members, as controller-runtime's
Runnable groups (it starts no thread of its own)::

    health server                 (bind failure is fatal)
    [warm informers]              (warm standbys: runtimes built, informers listing and
                                   watching before leading, so a takeover reconciles at once)
    [leader election]             (the lease thread)
    leader work (`LeaderGate`)    one term on its own thread, begun when the election
                                  reports leading (at once without election):
        leader lifespan entered
        runtimes built, informers started, synced, workers started
        ... until stop, loss of leadership (or its renew deadline on our own clock) or a
            fatal controller error ...
        no pass starts any more (queued keys are left to the next leader), in-flight passes
        finish within shutdown_timeout or are abandoned, the term's write fence closes
        (writes on the wire answered): see `term.Term`; informers stopped
        leader lifespan exited

The group stops its members in reverse: the term drains first, then the election releases
the Lease, then the warm informers (a standby that never led) and the health server stop.
A member that ends on its own (loss, fatal error, the health server) ends the run: its
error is the manager's `failure`, raised from `run` and passed to `start`'s ``on_exit``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from cloudcoil_sync._internal.service import ExitCallback, ServiceGroup, await_ready
from cloudcoil_sync.controller._internal import budgets
from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.health import HealthServer
from cloudcoil_sync.controller._internal.leader import LeaderElection, LeadershipLost
from cloudcoil_sync.controller._internal.leader_gate import LeaderGate, WarmInformers
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.overlap import check_overlap
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime, SyncTimeout
from cloudcoil_sync.controller._internal.runtime_set import RuntimeSet
from cloudcoil_sync.controller._internal.term import Passes, Term

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.share import Share

__all__ = ["Manager"]

log = logging.getLogger("cloudcoil_sync.manager")


LeaderLifespan = Callable[[], AbstractContextManager[Any]]


class Manager:
    """Run controllers together, sharing compatible informers and stopping on failure.

    Configs come from the controller, else the manager. With `leader_election`, controllers
    (and `leader_lifespan`) run only while this replica leads. `health` serves /healthz,
    /readyz and /metrics for this manager. No pass starts once an event of `also_stop` is
    set (an owner's stop event, read at each pass start). A `Service`: `start(on_exit)` and
    `stop(timeout)`, or `run(stop)` for both. A manager runs once.
    """

    name = "controller manager"

    def __init__(
        self,
        *controllers: Controller[Any],
        config: Config | None = None,
        leader_election: LeaderElection | None = None,
        health: HealthServer | None = None,
        leader_lifespan: LeaderLifespan | None = None,
        also_stop: Sequence[threading.Event] = (),
        metrics: OperatorMetrics | None = None,
        shard: Share | None = None,
    ) -> None:
        self.names = _names(controllers)
        self.controllers = controllers
        configs = (config, *(c.config for c in controllers))
        check_overlap(controllers, next((c.namespace for c in configs if c is not None), None))
        if leader_election is not None and not isinstance(leader_election, LeaderElection):
            raise TypeError("leader_election must be a LeaderElection or None")
        if health is not None and not isinstance(health, HealthServer):
            raise TypeError("health must be a HealthServer or None")
        if leader_lifespan is not None and leader_election is None:
            raise ValueError("A leader lifespan requires leader election")
        self.config = config
        self.leader_election = leader_election
        self.health = health
        self._leader_lifespan = leader_lifespan
        self._metrics = metrics or OperatorMetrics()
        self.registry: CollectorRegistry = self._metrics.registry
        self._metrics.manager(
            healthy=self.healthy,
            ready=lambda: self.ready,
            informers=lambda: self.informer_count,
        )
        if leader_election is not None:
            leader_election.bind_metrics(self._metrics.registry)
        self._also_stop = tuple(also_stop)
        self._lock = threading.Condition()
        self._used = self._running = self._finished = False
        self._failure: BaseException | None = None
        self._fatal: BaseException | None = None
        self._stopping = False  # the term drains, or the manager stops: not ready
        self._asked = False  # stop() was called: an end is no longer a failure
        self._listeners: list[Callable[[], None]] = []
        self._set = RuntimeSet(
            controllers,
            self.names,
            config=config,
            metrics=self._metrics,
            shard=shard,
            on_synced=self._notify,
            on_fatal=self._on_fatal,
        )
        self._stops: tuple[threading.Event, ...] = ()
        self._on_exit: ExitCallback | None = None
        self._group: ServiceGroup | None = None  # health, [warm informers], [election], gate
        self._gate: LeaderGate | None = None
        self._term: Term | None = None
        self._work: ServiceGroup | None = None  # the term's informers and passes

    # -- state --------------------------------------------------------------------------------

    def healthy(self) -> bool:
        """Running without a fatal failure (also while starting and on standby)."""
        return self._running and self._failure is None and self._fatal is None

    @property
    def ready(self) -> bool:
        """Healthy, leading (if electing), and every controller synced with workers running."""
        runtimes = self._set.runtimes()
        return (
            self.healthy()
            and not self._stopping
            and (self.leader_election is None or self.leader_election.is_leader)
            and len(runtimes) == len(self.controllers)
            and all(runtime.ready for runtime in runtimes)
        )

    def synced(self) -> bool:
        """Every informer of the running controllers listed (a standby without: True)."""
        return all(runtime.synced for runtime in self._set.runtimes())

    @property
    def available(self) -> bool:
        """What a HealthServer's /readyz reports: healthy and not stopping, and synced when
        leading (or not electing). A healthy standby is available: leadership must never
        gate Pod readiness, or a second replica (or a rolling update) never becomes Ready.
        """
        election = self.leader_election
        if election is not None and not election.is_leader:
            return self.healthy() and not self._stopping
        return self.ready

    @property
    def informer_count(self) -> int:
        """Distinct informers this manager runs (0 on a standby)."""
        return self._set.informer_count

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def cached(self, resource: type[Any], namespace: str | None = None) -> Any:
        """A reader over the informer of the first running controller that watches `resource`.

        Standby replicas run no informers: there (and for kinds no controller watches) this
        raises ValueError; use a live client instead.
        """
        return self._set.cached(resource, namespace)

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

    def _notify(self) -> None:
        with self._lock:
            self._lock.notify_all()
        for listener in list(self._listeners):
            listener()

    # -- Service ------------------------------------------------------------------------------

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Start the group (health, [warm informers], [election], leader work) and return.

        ``on_exit`` is called once if the run ends without `stop` (loss of leadership, a fatal
        controller error, the health server ending), with that error. Raises if a member
        fails to start (what started is stopped again).
        """
        self._start(threading.Event(), on_exit, ())

    def run(
        self, stop: threading.Event | None = None, *, also_stop: tuple[threading.Event, ...] = ()
    ) -> None:
        """Run until `stop` is set, leadership is lost (LeadershipLost) or a controller fails.

        No pass starts once `stop` or any event of `also_stop` is set (read at each pass
        start). A run that ends on its own sets `stop` (the group's one event).
        """
        stop = stop if stop is not None else threading.Event()
        self._start(stop, None, also_stop)
        try:
            stop.wait()  # set by the owner, or by the group when a member ended on its own
        finally:
            self.stop()
        if self._failure is not None:
            raise self._failure

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the members in reverse (the term drains, the Lease is released, the health
        server stops); whether all stopped within `timeout`. Before `start` it returns True.
        A second call (from `run`, or another thread) waits for the first's answer."""
        group = self._group
        if group is None:
            return True
        with self._lock:
            self._stopping = self._asked = True
        self._notify()
        stopped = group.stop(timeout)
        self._finish(group)
        return stopped

    def _start(
        self,
        stop: threading.Event,
        on_exit: ExitCallback | None,
        also_stop: tuple[threading.Event, ...],
    ) -> None:
        with self._lock:
            if self._used:
                raise RuntimeError("Manager instances can only run once")
            self._used = True
            self._running = True
        self._on_exit = on_exit
        self._stops = (stop, *self._also_stop, *also_stop)
        group = self._group = self._compose(stop)
        try:
            group.start(on_exit=self._member_exited)
        except BaseException as error:
            self._failure = self._failure or error
            self._finish(group)
            raise

    def _compose(self, stop: threading.Event) -> ServiceGroup:
        group = ServiceGroup("manager", stop_event=stop)
        if self.health is not None:
            self.health.probe(
                self.healthy,
                lambda: self.available,
                self.registry,
                controllers_ready=lambda: self.ready,
            )
            group.add(self.health, stop_timeout=budgets.HEALTH_STOP)
        election = self.leader_election
        if election is not None:
            if election.config is None:
                election.config = self.config or self.controllers[0].config
            if election.warm:
                group.add(WarmInformers(self._warm_up, self._end_unled_term), stop_timeout=None)
            group.add(election, stop_timeout=None)  # bounds its own stop (Lease calls)
        longest = max(c.shutdown_timeout for c in self.controllers)
        self._gate = LeaderGate(self._term_body, election, wake=self._notify)
        group.add(self._gate, stop_timeout=budgets.leader_work(longest))
        return group

    def _finish(self, group: ServiceGroup) -> None:
        gate = self._gate
        late = gate.error if gate is not None else None
        with self._lock:
            if self._failure is None:
                self._failure = late or next(iter(group.stop_errors), None)
            self._running = False
            self._finished = True
        self._notify()

    def _member_exited(self, error: BaseException | None) -> None:
        """The first member of the group that ended on its own (from its thread)."""
        group = self._group
        exited = group.exited if group is not None else None
        if self.health is not None and exited == self.health.name:
            error = error or _health_stopped()
            self._on_fatal(error)  # as a controller's fatal error: the term raises it
        self._end(error if error is not None else RuntimeError(f"{exited} stopped unexpectedly"))

    def _end(self, error: BaseException) -> None:
        """The run ends on its own with `error`: tell the term, the owner's wait, `on_exit`."""
        with self._lock:
            first = self._failure is None and not self._asked
            if first:
                self._failure = error
            self._lock.notify_all()
        if not first:
            return
        if self._gate is not None:
            self._gate.interrupt()
        if self._group is not None:
            self._group.stop_event.set()
        if self._on_exit is not None:
            self._on_exit(error)

    # -- one term of leader work (the gate's thread) ------------------------------------------

    def _term_body(self, stop: threading.Event) -> None:
        """The controllers, inside the leader lifespan; the lifespan sees how leadership ended
        (the gate reports a loss or an election failure, with its reason)."""
        election = self.leader_election
        if election is None:
            self._run_controllers(stop)
            return
        lifespan = self._leader_lifespan
        try:
            with lifespan() if lifespan is not None else nullcontext():
                self._run_controllers(stop, election=election)
                if election.failure is not None:
                    raise election.failure
                if election.lost.is_set():
                    raise LeadershipLost(f"Lost leadership of Lease {election.name}")
        except LeadershipLost:
            return
        except BaseException as error:
            if error is not election.failure:
                raise

    def _warm_up(self) -> None:
        """Build the runtimes and start their informers now (their workers start on leading)."""
        election = self.leader_election
        assert election is not None
        self._begin_term(Term(election.fence, stops=self._stops)).start()  # informers, for now
        log.info("Warm standby: informers listing and watching before leading")

    def _end_unled_term(self) -> None:
        """A warm standby that never led: its informers stop (after the Lease's release)."""
        term, work = self._term, self._work
        if term is not None and work is not None and not term.ended:
            term.shut_down(self._set.runtimes())
            work.stop()

    def _run_controllers(
        self, stop: threading.Event, *, election: LeaderElection | None = None
    ) -> None:
        """Run the term's group (`Term.services`): informers, then passes once synced; wait;
        stop it in reverse (passes by `Term.shut_down`, then informers).

        The term's fence is the election's (closed past the renew deadline); without
        election the term has its own.
        """
        work = self._work
        fence = None if election is None else election.fence
        try:
            if work is None:
                work = self._begin_term(Term(fence, stops=(stop, *self._stops)))
            else:  # warmed up while standing by: informers already started
                self._require_term().watch(stop)
            term = self._require_term()
            work.add(Passes(term, self._set.runtimes, lambda r: self._start_when_synced(r, stop)))
            work.start()
            self._wait_stopped(stop, election)
            self._stopping = True
            lost = election is not None and election.lost.is_set()
            log.info("Stopping controllers%s", " (leadership lost)" if lost else "")
        except BaseException:
            self._stopping = True
            raise
        finally:
            if work is not None:
                work.stop()
            self._notify()

    def _begin_term(self, term: Term) -> ServiceGroup:
        """Build the term's runtimes (every informer handler registered) and its group."""
        self._term = term
        work = self._work = term.services(
            self._set.runtimes, self._set.pools, informer_stop_timeout=budgets.INFORMER_STOP
        )
        self._set.build(term)
        return work

    def _require_term(self) -> Term:
        assert self._term is not None
        return self._term

    def _start_when_synced(self, runtime: ControllerRuntime, stop: threading.Event) -> bool:
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
            runtime.wait_synced(timeout=0)  # synced: raises a failure it saw
        except BaseException as error:
            if error is self._fatal:
                self._check_fatal()  # the same error, explained
            raise
        runtime.start_workers()
        self._notify()
        return True

    def _wait_stopped(self, stop: threading.Event, election: LeaderElection | None) -> None:
        """Until `stop` is set (by the owner, a loss or `_on_fatal`: then its error is raised)
        or, on this replica's own clock, the renew deadline passes unrenewed."""
        self._check_fatal()  # failed before we started waiting
        while True:
            left = None if election is None else election.time_left()
            if election is not None and left is None:
                break  # no longer leading
            if stop.wait(left) or (election is not None and not election.check()):
                break
        self._check_fatal()

    def _on_fatal(self, error: BaseException) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = error
            self._lock.notify_all()
        gate = self._gate
        if gate is not None and gate.started:
            gate.interrupt()  # the term raises the error (explained) and ends the run
        else:  # a warm standby's informer died: stop standing by, report it
            self._end(self._set.explained(error))
        self._notify()

    def _check_fatal(self) -> None:
        error = self._fatal
        if error is not None:
            raise self._set.explained(error)


def _names(controllers: Sequence[Controller[Any]]) -> tuple[str, ...]:
    """The controllers' metric names (``<kind>-<position>`` for unnamed ones), checked."""
    if not controllers:
        raise ValueError("A manager needs at least one controller")
    if any(not isinstance(c, Controller) for c in controllers):
        raise TypeError("Manager expects Controller instances")
    if len({id(c) for c in controllers}) != len(controllers):
        raise ValueError("A controller cannot be registered twice")
    names = tuple(
        c.name or f"{c.resource.gvk().kind.lower()}-{index}"
        for index, c in enumerate(controllers, 1)
    )
    if len(set(names)) != len(names):
        raise ValueError("Managed controllers must have distinct metric names")
    return names


def _health_stopped() -> RuntimeError:
    return RuntimeError("The health server stopped serving")
