"""Leader election on a coordination.k8s.io/v1 Lease.

One lease thread per elector acquires and renews the Lease. Safety rests on three rules,
as in client-go: a candidate takes a held Lease only after the holder's record stayed unchanged
for its ``leaseDurationSeconds`` on the candidate's own monotonic clock (remote timestamps are
never trusted); the leader stops its work once ``renew_deadline`` (< lease duration) has passed
since the *start* of its last successful write; and the Lease is released only after the leader
work has stopped. Writes are optimistic (PUT with the read resourceVersion), so two candidates
can never both win one round.

A Lease this elector *creates* (it was absent) is led at once, as client-go does: the create
is atomic (a POST that succeeds means nobody else holds that Lease; a competing create gets
409). The one case a create cannot rule out is a Lease deleted under a live leader; a
candidate that saw the Lease held and then finds it absent is watching exactly that, so it
holds the Lease it creates for the longest lease duration it saw before leading (the old
leader stops by its renew deadline, which is shorter). A replica that never saw a holder
(a fresh cluster, a first install) has nothing to wait for.

Fencing: :attr:`LeaderElection.fence` (a `WriteFence`) admits writes only while the last
successful renewal is younger than ``renew_deadline`` on the monotonic clock; each renewal
moves its deadline forward, a loss closes it. Leader work that sends its writes from threads
inside ``fenced(election.fence)`` (the Manager's workers do) cannot write past the deadline,
even after a pause (SIGSTOP, a long GC, a suspended VM): after one the fence stays closed,
since a renewal that started past the deadline never counts. Writes already on the wire
when it closes are the remaining window (see docs/deployment.md).

Owner API::

    election = LeaderElection("widgets", config=config)
    election.bind_metrics(registry)                # leader_election_master_status{name}
    election.run(work, stop=stop_event)            # work(work_stop: threading.Event) -> None

``run`` starts the lease thread, waits to lead, runs ``work`` on its own thread and returns
after ``stop_event`` (graceful: renewals go on while the work drains) or raises
:class:`LeadershipLost` after a loss (``work_stop`` is set at the moment of loss, and
:attr:`LeaderElection.lost` tells a draining owner to abort rather than drain). The Lease is
released only once ``work`` has returned.

It is also a `cloudcoil_sync._internal.service.Service`: ``start(on_exit)``, ``wait_ready``,
``healthy`` and ``stop(timeout) -> bool``. The parts: `lease.LeaseMachine` decides each step
from the observed Lease and the clock (no threads), `elector.Elector` is the lease thread that
carries the steps out, and `run` supervises the leader work as a Manager does (a `ServiceGroup`
of the election and a `leader_gate.LeaderGate`); all of them wait on the machine's condition,
which every transition, renewal and stop notifies.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from uuid import uuid4

from prometheus_client import CollectorRegistry

from cloudcoil_sync._internal.service import ExitCallback, ServiceGroup
from cloudcoil_sync._internal.signals import main_slice
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal import budgets
from cloudcoil_sync.controller._internal.elector import Elector, LeadershipLost
from cloudcoil_sync.controller._internal.event_relay import relay
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.leader_gate import LeaderGate
from cloudcoil_sync.controller._internal.leader_options import (
    TIMING_RANGE,
    dns_name,
    lease_duration_value,
    seconds,
)
from cloudcoil_sync.controller._internal.lease import LeaseMachine, LeaseSettings
from cloudcoil_sync.controller._internal.lease_client import ClientLeaseAPI
from cloudcoil_sync.controller._internal.lease_record import LeaseAPI, LeaseObserver
from cloudcoil_sync.controller._internal.metrics import master_status_gauge

__all__ = ["LeaderElection", "LeadershipLost", "LeaseAPI", "LeaseObserver"]

logger = logging.getLogger("cloudcoil_sync.controller.leader")  # the component's logger


class LeaderElection:
    """Elect one active replica through a coordination.k8s.io/v1 Lease (a `Service`).

    Defaults follow client-go/controller-runtime: 15 s lease, 10 s renew deadline, 2 s retry.
    ``lease_duration`` may be a float (short values are for tests); the Lease records it
    rounded up to whole seconds, which only makes standbys wait longer.

    Owners either call :meth:`run` with the leader work, or drive the parts themselves:
    :meth:`start`, :meth:`wait_leader`, watch :attr:`lost` / :attr:`deadline`, stop their work,
    then :meth:`stop` (which releases the Lease). An instance elects once: after leadership is
    lost it does not try again (build a new one, or let the process restart).

    ``warm=True`` (controller-runtime's warmup): a Manager's standbys start their informers
    before leading, so a takeover reconciles from a synced cache at once. For tests:
    ``lease_api`` replaces the Lease calls (any `LeaseAPI`), ``clock`` the monotonic clock.
    """

    def __init__(
        self,
        name: str,
        *,
        namespace: str | None = None,
        identity: str | None = None,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        config: Config | None = None,
        warm: bool = False,
        lease_api: LeaseAPI | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.name = dns_name(name, label=False)
        if not isinstance(warm, bool):
            raise TypeError("warm must be True or False")
        #: Standbys list and watch their informers before they lead (a Manager reads this).
        self.warm = warm
        self.namespace = dns_name(namespace, label=True) if namespace is not None else None
        self.identity = identity if identity is not None else f"{socket.gethostname()}_{uuid4()}"
        if not isinstance(self.identity, str) or not 1 <= len(self.identity) <= 128:
            raise ValueError("Lease identity must have 1-128 characters")
        self.lease_duration = lease_duration_value(lease_duration)
        renew, retry = seconds(renew_deadline), seconds(retry_period)
        if not 0 < retry < renew < lease_duration:
            raise ValueError(TIMING_RANGE)
        self.renew_deadline = renew
        self.retry_period = retry
        self.config = config
        self._lease_api = lease_api
        self._clock: Callable[[], float] = clock if clock is not None else time.monotonic
        #: Set once this elector holds the Lease (stays set; see :attr:`is_leader`).
        self.leading = threading.Event()
        #: Set when leadership is lost (deadline, holder/UID change, deletion, fatal error).
        self.lost = threading.Event()
        #: Open only while leading within the renew deadline (see the module docstring).
        self.fence = WriteFence(
            -math.inf,
            reason=f"leadership of Lease {self.name} is not proven (renew deadline, loss or stop)",
            clock=self._clock,
            cause="shutdown",
            deadline_cause="renew_deadline",
        )
        self._lock = threading.Condition()
        self._machine: LeaseMachine | None = None
        self._elector: Elector | None = None
        self._runner: threading.Thread | None = None  # the thread inside run()
        self._run_stop = False  # stop() called while run() is active
        self._stopped = False  # stop() ran (before start, or after the election)
        self._on_leading: Callable[[], None] | None = None

    # -- settings-derived values -------------------------------------------------------------

    @property
    def lease_duration_seconds(self) -> int:
        """What the Lease records: whole seconds, never less than the configured duration."""
        return max(1, math.ceil(self.lease_duration))

    @property
    def http_timeout(self) -> float:
        """Per-request timeout, as controller-runtime: max(1 s, renew_deadline / 2)."""
        return budgets.lease_request_timeout(self.renew_deadline)

    # -- state -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Holding the Lease and within the renew deadline (local monotonic clock)."""
        machine = self._machine
        return machine is not None and machine.is_leader

    @property
    def standing_by(self) -> bool:
        """Inside :meth:`run` and not (yet) leading: :meth:`stop` ends the run at once."""
        with self._lock:
            return self._runner is not None and not self.leading.is_set()

    @property
    def deadline(self) -> float | None:
        """Monotonic time leadership ends unless renewed before; None when not leading."""
        machine = self._machine
        return None if machine is None else machine.deadline

    @property
    def failure(self) -> BaseException | None:
        """The fatal error (e.g. 403 Forbidden) that ended the election, if any."""
        machine = self._machine
        return None if machine is None else machine.failure

    @property
    def lost_at(self) -> float | None:
        """Monotonic time the loss was declared (None while not lost)."""
        machine = self._machine
        return None if machine is None else machine.lost_at

    @property
    def reason(self) -> str:
        """Why leadership was lost ("" while not lost)."""
        machine = self._machine
        return "" if machine is None else machine.reason

    @property
    def acquisitions(self) -> int:
        machine = self._machine
        return 0 if machine is None else machine.acquisitions

    @property
    def renewal_failures(self) -> int:
        machine = self._machine
        return 0 if machine is None else machine.renewal_failures

    def __repr__(self) -> str:
        machine = self._machine
        state = "idle" if machine is None else machine.state
        return (
            f"<LeaderElection {self.name} {self.identity} {state} deadline={self.deadline} "
            f"reason={self.reason!r} renewal_failures={self.renewal_failures}>"
        )

    def bind_metrics(self, registry: CollectorRegistry) -> None:
        """Export ``leader_election_master_status{name}`` (1 while leader) in ``registry``."""
        gauge = master_status_gauge(registry)
        gauge.labels(name=self.name).set_function(lambda: 1.0 if self.is_leader else 0.0)

    # -- Service -----------------------------------------------------------------------------

    def start(
        self,
        on_exit: ExitCallback | Config | None = None,
        *,
        config: Config | None = None,
    ) -> None:
        """Start the lease thread (once) and return. ``config`` defaults to the constructor's.

        ``on_exit`` is called once, from the lease thread, if the election ends before
        :meth:`stop`: with `LeadershipLost` after a loss, or with the fatal error. For the
        callers written before the `Service` contract, ``start(config)`` still works.
        """
        if isinstance(on_exit, Config):
            config, on_exit = on_exit if config is None else config, None
        elif on_exit is not None and not callable(on_exit):
            raise TypeError("start() takes an on_exit callback and a Config")
        with self._lock:
            if self._elector is not None or self._stopped:
                raise RuntimeError("LeaderElection instances can only run once")
            chosen = config if config is not None else self.config
            api = self._lease_api or self._client_api(chosen)
            self._machine = LeaseMachine(
                self._settings(),
                api,
                clock=self._clock,
                fence=self.fence,
                leading=self.leading,
                lost=self.lost,
            )
            self._elector = Elector(self._machine, on_exit=on_exit, on_leading=self._on_leading)
            self._elector.start()
            self._lock.notify_all()  # a waiter that came before start (run() on a thread)

    def when_leading(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, from the lease thread, when leadership begins (before
        :meth:`start`; it must return quickly: renewals wait for it)."""
        with self._lock:
            if self._elector is not None:
                raise RuntimeError("when_leading() must be called before start()")
            self._on_leading = callback

    def check(self) -> bool:
        """Apply the renew deadline on this replica's own clock now (declaring the loss if
        it passed, whatever the lease thread is doing); whether it still leads."""
        machine = self._machine
        return machine is not None and machine.check() and machine.state == "leading"

    def time_left(self) -> float | None:
        """Seconds until the renew deadline on this replica's clock; None when not leading."""
        deadline = self.deadline
        return None if deadline is None else max(0.0, deadline - self._clock())

    def abandon(self) -> None:
        """The leader work did not stop: stop electing and leave the Lease to expire (it is
        never released, so no successor leads while that work may still write)."""
        self._stop_elector(None, release=False)

    def wait_leader(self, timeout: float | None = None) -> bool:
        """Block until leading (True), or until ``timeout``/stop/loss (False).

        Raises the fatal error (e.g. 403 Forbidden) if the election failed. Before the
        start it waits for it.
        """
        machine, timeout = self._started_machine(timeout)
        if machine is None:
            return False
        with machine.condition:
            ended = machine.condition.wait_for(
                lambda: (
                    machine.failure is not None or machine.state not in ("acquiring", "holding")
                ),
                timeout,
            )
            if machine.failure is not None:
                raise machine.failure
            return ended and machine.state == "leading"

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until this replica leads or knows it stands by (its first Lease read was
        answered); False on ``timeout``, after a fatal error, or once stopped."""
        machine, timeout = self._started_machine(timeout)
        if machine is None:
            return False
        with machine.condition:
            machine.condition.wait_for(
                lambda: machine.answered or machine.state in ("lost", "stopped"), timeout
            )
            return machine.answered and machine.failure is None and machine.state != "stopped"

    def _started_machine(self, timeout: float | None) -> tuple[LeaseMachine | None, float | None]:
        """The machine once started (None: not in time, or stopped first); time left."""
        start = time.monotonic()
        with self._lock:
            self._lock.wait_for(lambda: self._machine is not None or self._stopped, timeout)
            machine = self._machine
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        return machine, left

    def healthy(self) -> bool:
        """Electing as it should: started, the lease thread alive, no loss, no fatal error."""
        machine, elector = self._machine, self._elector
        if machine is None or elector is None:
            return False
        return elector.alive and machine.failure is None and machine.state != "lost"

    def stop(self, timeout: float | None = None) -> bool:
        """The leader work has stopped: release the Lease if still ours, join the lease thread.

        Returns whether the lease thread has exited (True if it never started). Call this only
        once the work guarded by the election is over. While :meth:`run` is running on another
        thread, this only asks it to stop (it drains, then releases) and waits up to
        ``timeout`` for it to end; with no ``timeout`` it returns at once (False).
        """
        with self._lock:
            runner = self._runner
            asking = runner is not None and runner is not threading.current_thread()
            self._run_stop = self._run_stop or asking
            machine = self._machine
        if not asking:
            return self._stop_elector(timeout, release=True)
        if machine is not None:
            with machine.condition:
                machine.condition.notify_all()
        return self._wait_run_end(timeout)

    def _wait_run_end(self, timeout: float | None) -> bool:
        if timeout is None:
            return False
        with self._lock:
            self._lock.wait_for(lambda: self._runner is None, timeout)
        elector = self._elector
        return self._runner is None and (elector is None or not elector.alive)

    def _stop_elector(self, timeout: float | None, *, release: bool) -> bool:
        self.fence.close(0, cause="shutdown")  # before the release: nothing fenced after it
        with self._lock:
            self._stopped = True  # a stopped election never starts (again)
            self._lock.notify_all()  # nor keeps a waiter for its start
            machine, elector = self._machine, self._elector
        if machine is None or elector is None:
            return True
        machine.stop(release=release)
        wait = timeout if timeout is not None else budgets.lease_release(self.http_timeout)
        stopped = elector.stop(wait)
        if not stopped:
            logger.warning("Lease thread for %s did not stop within %.1f s", self.name, wait)
        return stopped

    # -- run ---------------------------------------------------------------------------------

    def run(
        self,
        leader_work: Callable[[threading.Event], None],
        *,
        stop: threading.Event | None = None,
        config: Config | None = None,
        join_timeout: float | None = None,
    ) -> None:
        """Elect, run ``leader_work(stop_event)`` on a worker thread while leading, release.

        Returns when ``stop`` is set (after a graceful drain: renewals continue until the work
        returns) or when the work returns by itself. On loss the work's event is set at once,
        the work is joined, the Lease released if still ours, then :class:`LeadershipLost` is
        raised. A fatal API error (403...) is raised as is; so is an exception from the work.
        If the work does not return within ``join_timeout`` the Lease is not released (it
        expires) and RuntimeError is raised. The election must not be started before.

        The parts are a `ServiceGroup` of this election and a `LeaderGate` (the work's term),
        as in a Manager: stopped in reverse, so the work has ended before the release.
        """
        self._enter_run(config)
        gate = LeaderGate(leader_work, self, wake=self._wake_run)
        group = ServiceGroup(f"leader election {self.name}")
        group.add(self, stop_timeout=None, log_exit=False)  # bounds its own stop
        group.add(gate, stop_timeout=join_timeout, log_exit=False)  # run() raises the outcome
        try:
            group.start(on_exit=lambda error: self._wake_run())
            self._supervise(group, stop)
        finally:
            try:
                group.stop()
            finally:
                with self._lock:
                    self._runner = None
                    self._lock.notify_all()
        self._raise_outcome(gate.error)

    def _enter_run(self, config: Config | None) -> None:
        with self._lock:
            if self._runner is not None:
                raise RuntimeError("LeaderElection.run is already running")
            machine = self._machine
            if self._stopped or (machine is not None and machine.state == "lost"):
                raise RuntimeError("LeaderElection instances can only run once")
            if self._elector is not None:
                raise RuntimeError("LeaderElection.run() starts the election: do not start() it")
            self._runner = threading.current_thread()
            self._run_stop = False
            if config is not None:
                self.config = config

    def _wake_run(self) -> None:
        machine = self._machine
        if machine is not None:
            with machine.condition:
                machine.condition.notify_all()

    def _supervise(self, group: ServiceGroup, stop: threading.Event | None) -> None:
        """Until asked to stop (``stop``, `stop`), a member ended (the work, a loss, a fatal
        error), or the renew deadline passed unrenewed on this replica's own clock (whatever
        the lease thread is doing). Every wait is woken by a notification or the deadline."""
        machine = self._machine
        assert machine is not None  # started by the group
        unsubscribe = relay(stop, machine.condition) if stop is not None else None

        def ended() -> bool:
            return (
                group.stop_event.is_set()
                or self._run_stop
                or self.lost.is_set()
                or (stop is not None and stop.is_set())
            )

        try:
            with machine.condition:
                while not ended():
                    left = self.time_left()
                    if left is not None and not self.check():
                        return  # lost on our clock: the group's stop ends the work at once
                    machine.condition.wait(main_slice(left))  # run() may be on main
        finally:
            if unsubscribe is not None:
                unsubscribe()

    def _raise_outcome(self, error: BaseException | None) -> None:
        if self.failure is not None:
            raise self.failure
        if error is not None:
            raise error
        if self.lost.is_set():
            raise LeadershipLost(f"Lost leadership of Lease {self.name}: {self.reason}")

    # -- API access --------------------------------------------------------------------------

    def _namespace(self) -> str:
        if self.namespace is not None:
            return self.namespace
        namespace = getattr(self.config, "namespace", None) or "default"
        return dns_name(namespace, label=True)

    def _settings(self) -> LeaseSettings:
        return LeaseSettings(
            name=self.name,
            namespace=self._namespace(),
            identity=self.identity,
            lease_duration_seconds=self.lease_duration_seconds,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )

    def _client_api(self, config: Config | None) -> LeaseAPI:
        if config is None:
            raise ValueError("LeaderElection needs a Config: pass config= to it or to start()")
        self.config = config
        return ClientLeaseAPI(config, self._namespace(), self.name)
