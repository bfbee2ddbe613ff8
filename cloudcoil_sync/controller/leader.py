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
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import random
import socket
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import uuid4

import requests
from prometheus_client import CollectorRegistry, Gauge

from cloudcoil_sync._compat.prometheus_client import registered
from cloudcoil_sync._compat.urllib3 import response_socket
from cloudcoil_sync.client.errors import (
    AlreadyExists,
    APIError,
    ClientError,
    Conflict,
    Forbidden,
    NotFound,
    TransportError,
)
from cloudcoil_sync.client.fence import WriteFence
from cloudcoil_sync.names import is_dns_label, is_dns_subdomain
from cloudcoil_sync.script_errors import install_for_script

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["LeaderElection", "LeadershipLost", "LeaseAPI", "LeaseObserver"]

logger = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
_RECORD_FIELDS = (
    "holderIdentity",
    "leaseDurationSeconds",
    "acquireTime",
    "renewTime",
    "leaseTransitions",
)
# How often a waiting owner re-checks an external stop event it cannot be woken by.
_TICK = 0.05
_HOLDING = ("holding", "leading")
# Warn this often while waiting for leader work that does not stop.
_JOIN_WARN_SECONDS = 10.0


class LeadershipLost(Exception):
    """The leader can no longer prove it holds the Lease; its leader work was stopped."""


class LeaseAPI(Protocol):
    """The three Lease calls the elector makes; each must give up after ``timeout`` seconds."""

    def get(self, timeout: float) -> dict[str, Any] | None:
        """The Lease as JSON, or None when it does not exist."""

    def create(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """POST; AlreadyExists/Conflict when another candidate was faster."""

    def replace(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """PUT with ``metadata.resourceVersion`` as optimistic lock; Conflict when stale."""


def _dns_name(value: str, *, label: bool) -> str:
    """A DNS subdomain (Lease name) or a DNS label (namespace), else ValueError."""
    if not (is_dns_label(value) if label else is_dns_subdomain(value)):
        raise ValueError("Lease name and namespace must be valid Kubernetes DNS names")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("Require 0 < retry_period < renew_deadline < lease_duration")
    return float(value)


def _micro_time() -> str:
    """A Kubernetes MicroTime: always six fractional digits, UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _spec(lease: Mapping[str, Any]) -> dict[str, Any]:
    spec = lease.get("spec")
    return dict(spec) if isinstance(spec, Mapping) else {}


def _uid(lease: Mapping[str, Any]) -> str | None:
    metadata = lease.get("metadata")
    return metadata.get("uid") if isinstance(metadata, Mapping) else None


def _holder(lease: Mapping[str, Any]) -> str:
    return str(_spec(lease).get("holderIdentity") or "")


def _is_fatal(error: BaseException) -> bool:
    """4xx answers other than 404/408/409/429 mean a setup error retrying cannot fix."""
    if isinstance(error, APIError):
        return 400 <= error.status_code < 500 and error.status_code not in (404, 408, 409, 429)
    return not isinstance(error, ClientError)


class LeaseObserver:
    """What a candidate has seen of the Lease, timed on its own monotonic clock.

    Pure bookkeeping (no I/O, the caller passes ``now``), so the takeover rule can be tested
    without HTTP: a held record may be taken once it stayed unchanged for its
    ``leaseDurationSeconds``; a released record (empty holder) or an absent Lease at once
    (a created Lease then waits out :meth:`quarantine`, zero unless a holder was seen).
    """

    def __init__(self) -> None:
        self._record: str | None = None
        self._since = 0.0
        self._longest_held = 0.0

    def observe(self, lease: Mapping[str, Any] | None, now: float, *, fallback: float) -> None:
        """Record a GET answer (None = 404). ``fallback`` replaces an invalid duration."""
        if lease is None:
            self._record = None
            return
        spec = _spec(lease)
        record = json.dumps(
            {"uid": _uid(lease), **{key: spec.get(key) for key in _RECORD_FIELDS}},
            sort_keys=True,
            default=str,
        )
        if record != self._record:
            self._record, self._since = record, now
        if _holder(lease):
            self._longest_held = max(self._longest_held, self.duration(lease, fallback))

    @staticmethod
    def duration(lease: Mapping[str, Any], fallback: float) -> float:
        value = _spec(lease).get("leaseDurationSeconds")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            # Never shorter than our own setting: an odd record must not speed up takeover.
            return fallback
        return float(value)

    def wait_before_acquire(
        self, lease: Mapping[str, Any] | None, identity: str, now: float, *, fallback: float
    ) -> float:
        """Seconds ``identity`` must still wait before taking the Lease (0 = may take now)."""
        if lease is None:
            return 0.0
        holder = _holder(lease)
        if not holder or holder == identity:
            return 0.0
        return max(0.0, self._since + self.duration(lease, fallback) - now)

    def quarantine(self, fallback: float) -> float:
        """How long to hold a Lease we created before starting leader work.

        Zero if no holder was ever seen: the create was atomic, nobody else holds it. If one
        was, the Lease was deleted under it, maybe while it still leads (polls cannot prove
        the absence was continuous); it stops by its renew deadline, shorter than its lease
        duration: ours, or the longest a holder was seen using.
        """
        return max(fallback, self._longest_held) if self._longest_held else 0.0


_MASTER_STATUS = "leader_election_master_status"
_GAUGES: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()
_GAUGES_LOCK = threading.Lock()


def _master_status_gauge(registry: CollectorRegistry) -> Gauge:
    with _GAUGES_LOCK:
        gauge = _GAUGES.get(registry)
        if gauge is None:
            try:
                gauge = Gauge(
                    _MASTER_STATUS,
                    "Gauge of if the reporting system is master of the relevant lease, "
                    "0 indicates backup, 1 indicates master. 'name' is the string used to "
                    "identify the lease.",
                    ["name"],
                    registry=registry,
                )
            except ValueError:
                # Already declared in this registry (e.g. by the operator's metrics): share it.
                existing = registered(registry, _MASTER_STATUS)
                if not isinstance(existing, Gauge):
                    raise
                gauge = existing
            _GAUGES[registry] = gauge
        return gauge


class LeaderElection:
    """Elect one active replica through a coordination.k8s.io/v1 Lease.

    Defaults follow client-go/controller-runtime: 15 s lease, 10 s renew deadline, 2 s retry.
    ``lease_duration`` may be a float (short values are for tests); the Lease records it
    rounded up to whole seconds, which only makes standbys wait longer.

    Owners either call :meth:`run` with the leader work, or drive the parts themselves:
    :meth:`start`, :meth:`wait_leader`, watch :attr:`lost` / :attr:`deadline`, stop their work,
    then :meth:`stop` (which releases the Lease). An instance elects once: after leadership is
    lost it does not try again (build a new one, or let the process restart).

    ``warm=True`` (as controller-runtime's warmup) makes a Manager's standbys start their
    informers before they lead: a takeover reconciles from a synced cache at once, for the
    standby's cache memory and one list plus one open watch per informer.
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
    ) -> None:
        install_for_script()
        self.name = _dns_name(name, label=False)
        if not isinstance(warm, bool):
            raise TypeError("warm must be True or False")
        #: Standbys list and watch their informers before they lead (a Manager reads this).
        self.warm = warm
        self.namespace = _dns_name(namespace, label=True) if namespace is not None else None
        self.identity = identity if identity is not None else f"{socket.gethostname()}_{uuid4()}"
        if not isinstance(self.identity, str) or not 1 <= len(self.identity) <= 128:
            raise ValueError("Lease identity must have 1-128 characters")
        if (
            isinstance(lease_duration, bool)
            or not isinstance(lease_duration, int | float)
            or not math.isfinite(lease_duration)
            or not 0 < lease_duration <= _INT32_MAX
        ):
            raise ValueError("lease_duration must be a positive int32 number of seconds")
        renew, retry = _seconds(renew_deadline), _seconds(retry_period)
        if not 0 < retry < renew < lease_duration:
            raise ValueError("Require 0 < retry_period < renew_deadline < lease_duration")
        self.lease_duration = lease_duration
        self.renew_deadline = renew
        self.retry_period = retry
        self.config = config
        #: Set once this elector holds the Lease (stays set; see :attr:`is_leader`).
        self.leading = threading.Event()
        #: Set when leadership is lost (deadline, holder/UID change, deletion, fatal error).
        self.lost = threading.Event()
        #: Monotonic time the loss was declared (None while not lost).
        self.lost_at: float | None = None
        self.acquisitions = 0
        self.renewal_failures = 0
        self._clock: Callable[[], float] = time.monotonic
        self._cond = threading.Condition()
        # idle -> acquiring -> (holding ->) leading -> lost; holding -> acquiring; any -> stopped
        self._state = "idle"
        self._work_from = math.inf  # holding: when a Lease we created may guard leader work
        self._renewed_at = -math.inf
        self._lease: dict[str, Any] | None = None
        self._held = False
        self._reason = ""
        self._failure: BaseException | None = None
        self._observer = LeaseObserver()
        self._stop_requested = threading.Event()
        self._thread: threading.Thread | None = None
        self._runner: threading.Thread | None = None  # the thread inside run()
        self._run_stop = threading.Event()  # stop() called while run() is active
        self._lease_api: LeaseAPI | None = None
        self._seen_version: str | None = None  # of the Lease at the last acquire GET
        self._acquire_delay = 0.0  # until the observed holder's record may be taken
        self._watch_denied = False
        #: Open only while leading within the renew deadline (see the module docstring).
        self.fence = WriteFence(
            -math.inf,
            reason=f"leadership of Lease {self.name} is not proven (renew deadline, loss or stop)",
            clock=lambda: self._clock(),
        )

    # -- settings-derived values -------------------------------------------------------------

    @property
    def lease_duration_seconds(self) -> int:
        """What the Lease records: whole seconds, never less than the configured duration."""
        return max(1, math.ceil(self.lease_duration))

    @property
    def http_timeout(self) -> float:
        """Per-request timeout, as controller-runtime: max(1 s, renew_deadline / 2)."""
        return max(1.0, self.renew_deadline / 2)

    # -- state -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Holding the Lease and within the renew deadline (local monotonic clock)."""
        with self._cond:
            return self._state == "leading" and self._clock() < self._deadline_locked()

    @property
    def standing_by(self) -> bool:
        """Inside :meth:`run` and not (yet) leading: :meth:`stop` ends the run at once."""
        with self._cond:
            return self._runner is not None and not self.leading.is_set()

    @property
    def deadline(self) -> float | None:
        """Monotonic time leadership ends unless renewed before; None when not leading."""
        with self._cond:
            return self._deadline_locked() if self._state == "leading" else None

    @property
    def failure(self) -> BaseException | None:
        """The fatal error (e.g. 403 Forbidden) that ended the election, if any."""
        return self._failure

    def bind_metrics(self, registry: CollectorRegistry) -> None:
        """Export ``leader_election_master_status{name}`` (1 while leader) in ``registry``."""
        gauge = _master_status_gauge(registry)
        gauge.labels(name=self.name).set_function(lambda: 1.0 if self.is_leader else 0.0)

    def _deadline_locked(self) -> float:
        return self._renewed_at + self.renew_deadline

    def _lose_locked(self, reason: str) -> None:
        if self._state == "leading":
            self._state = "lost"
            self.fence.close(0)  # no wait: writes on the wire finish, no new one is admitted
            self._reason = reason
            self.lost_at = self._clock()
            logger.warning("Lost leadership of Lease %s: %s", self.name, reason)
            self.lost.set()
            self._cond.notify_all()
        elif self._state == "holding":
            # No leader work ran yet: compete again.
            self._state, self._held, self._lease = "acquiring", False, None
            logger.info("Gave up the new Lease %s: %s", self.name, reason)
            self._cond.notify_all()

    def _check_deadline(self) -> bool:
        """Mark the loss once the renew deadline passed; True while still holding the Lease."""
        with self._cond:
            if self._state in _HOLDING and self._clock() >= self._deadline_locked():
                self._lose_locked(
                    f"no successful renewal within the {self.renew_deadline:g} s renew deadline"
                )
            if self._state == "holding" and self._clock() >= self._work_from:
                self._state = "leading"
                self.fence.deadline = self._deadline_locked()
                self.leading.set()
                self._cond.notify_all()
                logger.info("Leading with Lease %s as %s", self.name, self.identity)
            return self._state in _HOLDING

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, config: Config | None = None) -> None:
        """Start the lease thread (once). ``config`` defaults to the constructor's."""
        with self._cond:
            if self._state != "idle":
                raise RuntimeError("LeaderElection instances can only run once")
            if self._lease_api is None:
                self._lease_api = self._client_api(config if config is not None else self.config)
            self._state = "acquiring"
            self._thread = threading.Thread(
                target=self._main, name=f"cloudcoil-lease-{self.name}", daemon=True
            )
        self._thread.start()

    def wait_leader(self, timeout: float | None = None) -> bool:
        """Block until leading (True), or until ``timeout``/stop/loss (False).

        Raises the fatal error (e.g. 403 Forbidden) if the election failed.
        """
        end = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._failure is not None:
                    raise self._failure
                if self._state == "leading":
                    return True
                if self._state not in ("acquiring", "holding"):
                    return False
                remaining = None if end is None else end - self._clock()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)

    def stop(self, timeout: float | None = None) -> None:
        """The leader work has stopped: release the Lease if still ours, join the lease thread.

        Call this only once the work guarded by the election is over. While :meth:`run` is
        running on another thread, this only asks it to stop (it drains, then releases).
        """
        with self._cond:
            if self._runner is not None and self._runner is not threading.current_thread():
                self._run_stop.set()
                self._cond.notify_all()
                return
        self.fence.close(0)  # before the release: nothing fenced is admitted after it
        self._stop_requested.set()
        interrupt = getattr(self._lease_api, "interrupt", None)
        if interrupt is not None:
            interrupt()  # a standby waiting on the Lease's watch
        with self._cond:
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            wait = timeout if timeout is not None else 3 * self.http_timeout + 1
            thread.join(wait)
            if thread.is_alive():
                logger.warning("Lease thread for %s did not stop within %.1f s", self.name, wait)
        with self._cond:
            if self._state != "lost":
                self._state = "stopped"
            self._cond.notify_all()

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
        expires) and RuntimeError is raised.
        """
        with self._cond:
            if self._runner is not None:
                raise RuntimeError("LeaderElection.run is already running")
            if self._state in ("lost", "stopped"):
                raise RuntimeError("LeaderElection instances can only run once")
            self._runner = threading.current_thread()
        if self._thread is None:
            self.start(config)
        outcome = "stopped"
        errors: list[BaseException] = []
        joined = False
        try:
            if not self._await_leadership(stop):
                return
            work_stop = threading.Event()
            done = threading.Event()
            worker = threading.Thread(
                target=self._work,
                args=(leader_work, work_stop, done, errors),
                name=f"cloudcoil-leader-work-{self.name}",
                daemon=True,
            )
            worker.start()
            outcome = self._supervise(stop, done)
            work_stop.set()
            if not self._join_work(worker, join_timeout):
                raise RuntimeError(
                    f"Leader work for Lease {self.name} did not stop within {join_timeout:g} s; "
                    "the Lease was not released and will expire"
                )
            # Released only once no fenced write can still land (the work closed it already
            # unless it sends unfenced writes, then this returns at once).
            if not self.fence.close(self.http_timeout):
                raise RuntimeError(
                    f"A write of the leader work for Lease {self.name} was still on the wire; "
                    "the Lease was not released and will expire"
                )
            joined = True
        finally:
            with self._cond:
                self._runner = None
            if joined or not self.leading.is_set():
                self.stop()
            else:
                self._stop_without_release()
        if self._failure is not None:
            raise self._failure
        if errors:
            raise errors[0]
        if outcome == "lost":
            raise LeadershipLost(f"Lost leadership of Lease {self.name}: {self._reason}")

    # -- run() helpers -----------------------------------------------------------------------

    def _await_leadership(self, stop: threading.Event | None) -> bool:
        """True once leading; False if ``stop`` is set or the election ended first."""
        with self._cond:
            while True:
                if self._failure is not None:
                    raise self._failure
                if self._state == "leading":
                    return True
                if self._state not in ("acquiring", "holding") or self._stopping(stop):
                    return False
                self._cond.wait(_TICK if stop is not None else None)

    def _stopping(self, stop: threading.Event | None) -> bool:
        return self._run_stop.is_set() or (stop is not None and stop.is_set())

    def _work(
        self,
        leader_work: Callable[[threading.Event], None],
        work_stop: threading.Event,
        done: threading.Event,
        errors: list[BaseException],
    ) -> None:
        try:
            leader_work(work_stop)
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()
            with self._cond:
                self._cond.notify_all()

    def _supervise(self, stop: threading.Event | None, done: threading.Event) -> str:
        """Wait for loss (own deadline clock, not the lease thread's), stop or work end."""
        with self._cond:
            while True:
                if self._state != "leading":
                    return "lost"
                remaining = self._deadline_locked() - self._clock()
                if remaining <= 0:
                    self._lose_locked(
                        f"no successful renewal within the {self.renew_deadline:g} s renew deadline"
                    )
                    return "lost"
                if done.is_set():
                    return "finished"
                if self._stopping(stop):
                    return "stopped"
                self._cond.wait(min(remaining, _TICK) if stop is not None else remaining)

    def _join_work(self, worker: threading.Thread, join_timeout: float | None) -> bool:
        end = None if join_timeout is None else self._clock() + join_timeout
        while True:
            step = _JOIN_WARN_SECONDS
            if end is not None:
                step = min(step, end - self._clock())
            worker.join(max(0.0, step))
            if not worker.is_alive():
                return True
            if end is not None and self._clock() >= end:
                return False
            logger.warning("Waiting for leader work of Lease %s to stop", self.name)

    def _stop_without_release(self) -> None:
        with self._cond:
            self._held = False  # the lease thread must not release under running work
        self.stop()

    # -- lease thread ------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            while self._acquire_loop():
                self._renew_loop()
                with self._cond:
                    if self._state != "acquiring":
                        break
            self._stop_requested.wait()
        except BaseException as error:
            with self._cond:
                self._failure = error
                self._lose_locked(f"fatal error: {error}")
                self._cond.notify_all()
            logger.error("Leader election for Lease %s failed: %s", self.name, error)
            self._stop_requested.wait()
        finally:
            with self._cond:
                release = self._held
            if release:
                self._release()

    def _acquire_loop(self) -> bool:
        while not self._stop_requested.is_set():
            started = self._clock()
            try:
                acquired = self._try_acquire()
            except ClientError as error:
                if _is_fatal(error):
                    raise
                logger.info("Lease %s acquire attempt failed: %s", self.name, error)
                acquired = None
            if acquired is not None:
                return self._hold(*acquired, started)
            self._await_change(self.retry_period * random.uniform(0.9, 1.1))
        return False

    def _await_change(self, limit: float) -> None:
        """Until the next attempt: ``limit``, or the takeover time if sooner, or a change.

        A standby watches the Lease rather than sleeping: a release (or any renewal) wakes it
        at once, so a handover after SIGTERM takes milliseconds, not a retry period, and the
        takeover rule times each record from when it was written, not when it was polled.
        """
        if self._acquire_delay > 0:
            limit = min(limit, self._acquire_delay)
        api = self._api()
        waiter = getattr(api, "wait_change", None)
        if waiter is None or self._watch_denied or limit < 1:
            self._stop_requested.wait(limit)
            return
        end = self._clock() + limit
        try:
            waiter(self._seen_version, int(limit))
        except Forbidden:
            self._watch_denied = True
            logger.info("No watch permission on Lease %s: polling it instead", self.name)
        except ClientError as error:
            logger.debug("Watching Lease %s failed: %s", self.name, error)
        else:
            return
        self._stop_requested.wait(max(0.0, end - self._clock()))

    def _hold(self, lease: dict[str, Any], created: bool, started: float) -> bool:
        with self._cond:
            if self._state != "acquiring":
                return False
            self._lease, self._held = lease, True
            # The attempt's start, not its end: the conservative local deadline.
            self._renewed_at = started
            self._state = "holding"
            quarantine = self._observer.quarantine(float(self.lease_duration_seconds))
            self._work_from = self._clock() + quarantine if created else -math.inf
            self.acquisitions += 1
        if created and quarantine:
            logger.info(
                "Created Lease %s after seeing it held; leading in %g s", self.name, quarantine
            )
        elif created:
            logger.info("Created Lease %s", self.name)
        self._check_deadline()
        return True

    def _try_acquire(self) -> tuple[dict[str, Any], bool] | None:
        """One GET and, when allowed, one create or optimistic PUT: (Lease, created) or None."""
        api = self._api()
        current = api.get(self.http_timeout)
        now = self._clock()
        fallback = float(self.lease_duration_seconds)
        self._observer.observe(current, now, fallback=fallback)
        metadata = (current or {}).get("metadata")
        self._seen_version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        wait = self._observer.wait_before_acquire(current, self.identity, now, fallback=fallback)
        self._acquire_delay = wait
        if wait:
            return None
        stamp = _micro_time()
        try:
            if current is None:
                namespace = self._namespace()
                created = api.create(
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": namespace},
                        "spec": {
                            "holderIdentity": self.identity,
                            "leaseDurationSeconds": self.lease_duration_seconds,
                            "acquireTime": stamp,
                            "renewTime": stamp,
                            "leaseTransitions": 0,
                        },
                    },
                    self.http_timeout,
                )
                return created, True
            body = copy.deepcopy(current)
            spec = _spec(current)
            if _holder(current) != self.identity:
                spec["acquireTime"] = stamp
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec.update(
                holderIdentity=self.identity,
                leaseDurationSeconds=self.lease_duration_seconds,
                renewTime=stamp,
            )
            body["spec"] = spec
            return api.replace(body, self.http_timeout), False
        except (AlreadyExists, Conflict, NotFound) as error:
            logger.debug("Lost the race for Lease %s: %s", self.name, error)
            return None

    def _renew_loop(self) -> None:
        """Renew every retry_period while holding; returns on loss or stop."""
        last_attempt = self._clock()
        while True:
            with self._cond:
                if self._state not in _HOLDING:
                    return
                wake = min(last_attempt + self.retry_period, self._deadline_locked())
                if self._state == "holding":
                    wake = min(wake, self._work_from)
            if self._stop_requested.wait(max(0.0, wake - self._clock())):
                return
            if not self._check_deadline():
                return
            if self._clock() < last_attempt + self.retry_period:
                continue  # woke to start leading, not to renew
            last_attempt = self._clock()
            try:
                self._try_renew(last_attempt)
            except ClientError as error:
                if _is_fatal(error):
                    raise
                self.renewal_failures += 1
                logger.info("Lease %s renewal failed: %s", self.name, error)

    def _try_renew(self, started: float) -> None:
        """Optimistic PUT of our last record; on 409 re-read once and decide."""
        api = self._api()
        for _ in range(2):
            with self._cond:
                if self._state not in _HOLDING:
                    return
                timeout = min(self.http_timeout, self._deadline_locked() - self._clock())
                body = copy.deepcopy(self._lease or {})
            if timeout <= 0:
                self._check_deadline()
                return
            spec = _spec(body)
            spec.update(
                holderIdentity=self.identity,
                leaseDurationSeconds=self.lease_duration_seconds,
                renewTime=_micro_time(),
            )
            body["spec"] = spec
            try:
                renewed = api.replace(body, timeout)
            except NotFound:
                with self._cond:
                    self._lose_locked("the Lease was deleted")
                return
            except Conflict:
                if not self._reread(api):
                    return
                continue
            with self._cond:
                if self._state in _HOLDING and started < self._deadline_locked():
                    self._lease = renewed
                    self._renewed_at = max(self._renewed_at, started)
                    if self._state == "leading":
                        self.fence.deadline = self._deadline_locked()
                    self._cond.notify_all()
            return
        self.renewal_failures += 1

    def _reread(self, api: LeaseAPI) -> bool:
        """After a 409: True if the Lease is still ours (fresh resourceVersion stored)."""
        with self._cond:
            timeout = min(self.http_timeout, self._deadline_locked() - self._clock())
            ours = self._lease or {}
        if timeout <= 0:
            self._check_deadline()
            return False
        current = api.get(timeout)
        with self._cond:
            if current is None:
                self._lose_locked("the Lease was deleted")
                return False
            if _holder(current) != self.identity:
                self._lose_locked(f"the Lease is now held by {_holder(current) or 'nobody'!r}")
                return False
            if _uid(current) != _uid(ours):
                self._lose_locked("the Lease was deleted and re-created")
                return False
            self._lease = current
            return True

    def _release(self) -> None:
        """Hand the Lease back (holder "", duration 1 s) if it is still ours; best effort."""
        with self._cond:
            ours = self._lease or {}
        try:
            api = self._api()
            for _ in range(2):
                current = api.get(self.http_timeout)
                if current is None or _holder(current) != self.identity:
                    return
                if _uid(current) != _uid(ours):
                    return
                body = copy.deepcopy(current)
                spec = _spec(current)
                spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time())
                body["spec"] = spec
                try:
                    api.replace(body, self.http_timeout)
                except Conflict:
                    continue
                logger.info("Released Lease %s", self.name)
                return
        except ClientError as error:
            logger.warning("Could not release Lease %s; it will expire: %s", self.name, error)

    # -- API access --------------------------------------------------------------------------

    def _api(self) -> LeaseAPI:
        if self._lease_api is None:
            raise RuntimeError("LeaderElection is not started")
        return self._lease_api

    def _namespace(self) -> str:
        if self.namespace is not None:
            return self.namespace
        namespace = getattr(self.config, "namespace", None) or "default"
        return _dns_name(namespace, label=True)

    def _client_api(self, config: Config | None) -> LeaseAPI:
        if config is None:
            raise ValueError("LeaderElection needs a Config: pass config= to it or to start()")
        self.config = config
        return _ClientLeaseAPI(config, self._namespace(), self.name)


class _ClientLeaseAPI:
    """LeaseAPI over the ``cloudcoil_sync.client`` transport: raw JSON, no client retries.

    The elector does its own retrying within its deadline, so every call is a single attempt
    with the caller's read timeout.
    """

    def __init__(self, config: Config, namespace: str, name: str) -> None:
        self._transport = config.transport
        self._name = name
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._item = f"{self._collection}/{name}"
        self._lock = threading.Lock()
        self._watching: Any = None
        self._interrupted = False

    def _send(self, method: str, path: str, timeout: float, body: Any = None) -> dict[str, Any]:
        timeout = max(0.05, timeout)
        # The connect and TLS handshake are bounded too: a partition must not outlast it.
        answer = self._transport.request_json(
            method, path, body=body, read_timeout=timeout, connect_timeout=timeout, retries=0
        )
        if not isinstance(answer, dict):
            raise TransportError(f"{method} {path}: the answer is not a JSON object")
        return answer

    def get(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self._send("GET", self._item, timeout)
        except NotFound:
            return None

    def create(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._send("POST", self._collection, timeout, body)

    def replace(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._send("PUT", self._item, timeout, body)

    def wait_change(self, resource_version: str | None, seconds: int) -> None:
        """Return at the first watch event on the Lease after ``resource_version`` (any
        change, or a 410), or when the server ends the watch after ``seconds``."""
        params = {
            "watch": "1",
            "fieldSelector": f"metadata.name={self._name}",
            "timeoutSeconds": str(seconds),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        response = self._transport.request(
            "GET",
            self._collection,
            params=params,
            stream=True,
            read_timeout=seconds + 2.0,
            connect_timeout=float(seconds),
            retries=0,
        )
        with self._lock:
            if self._interrupted:
                response.close()
                return
            self._watching = response
        try:
            for line in response.iter_lines(chunk_size=None):
                if line:
                    return
        except (OSError, requests.RequestException) as error:
            if not self._interrupted:
                raise TransportError(f"watch of Lease {self._name} broke: {error}") from None
        finally:
            with self._lock:
                self._watching = None
            response.close()

    def interrupt(self) -> None:
        """Wake a ``wait_change`` blocked on another thread (it returns); for stop."""
        with self._lock:
            self._interrupted = True
            response = self._watching
        sock = response_socket(getattr(response, "raw", None))
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
