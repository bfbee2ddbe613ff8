"""The Lease state machine: what one candidate does next, decided from what it has seen.

`LeaseMachine` starts no thread and never sleeps. Given the Lease it last observed, the reading
of its (injected) monotonic clock and its identity, :meth:`LeaseMachine.plan` says what to do
now: acquire, renew, wait how long, or that leadership was lost; :meth:`LeaseMachine.acquire`,
:meth:`~LeaseMachine.renew` and :meth:`~LeaseMachine.release` each make one round of calls on
the (injected) `LeaseAPI`. The elector thread (`elector`) drives it;
tests drive it step by step on a fake clock.

States: ``idle -> acquiring -> holding -> leading -> lost``; ``holding -> acquiring`` (a Lease
we created was lost before we led on it); any state ``-> stopped`` (except ``lost``). Safety
rules (client-go's): a held record is taken only once it stayed unchanged for its duration on
our clock (`LeaseObserver`); leadership ends once ``renew_deadline`` passed since the *start*
of the last successful renewal, and a renewal that started past it never counts; writes are
optimistic (PUT with the read resourceVersion). The machine's `fence` admits writes only
while leading within the deadline, and every transition notifies :attr:`condition`.
"""

from __future__ import annotations

import copy
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cloudcoil_sync.client import AlreadyExists, ClientError, Conflict, NotFound
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.lease_problems import LeaseProblems
from cloudcoil_sync.controller._internal.lease_record import (
    LeaseAPI,
    LeaseObserver,
    holder,
    is_fatal,
    micro_time,
    spec,
    uid,
)

__all__ = ["Action", "LeaseMachine", "LeaseSettings", "Plan", "State"]

logger = logging.getLogger("cloudcoil_sync.controller.leader")

State = Literal["idle", "acquiring", "holding", "leading", "lost", "stopped"]
_HOLDING = ("holding", "leading")  # the states in which the Lease is ours
Action = Literal["idle", "acquire", "renew", "wait", "lost", "stopped"]


@dataclass(frozen=True)
class LeaseSettings:
    """One candidate's Lease, identity and timing (validated by `LeaderElection`)."""

    name: str
    namespace: str
    identity: str
    lease_duration_seconds: int
    renew_deadline: float
    retry_period: float

    @property
    def http_timeout(self) -> float:
        """Per-request timeout, as controller-runtime: max(1 s, renew_deadline / 2)."""
        return max(1.0, self.renew_deadline / 2)


@dataclass(frozen=True)
class Plan:
    """What to do now; ``wait`` is how long until the next step when ``action == "wait"``."""

    action: Action
    wait: float = 0.0
    #: `LeaseMachine.version` when planned: a wait is only begun while it is unchanged.
    version: int = 0


class LeaseMachine:
    """One candidate's view of one Lease, advanced one step at a time (thread-safe)."""

    def __init__(
        self,
        settings: LeaseSettings,
        api: LeaseAPI,
        *,
        clock: Callable[[], float] = time.monotonic,
        fence: WriteFence | None = None,
        leading: threading.Event | None = None,
        lost: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.api = api
        self.clock = clock
        #: Notified on every transition and renewal; owners may wait on it and notify it.
        self.condition = threading.Condition()
        #: Set once this candidate leads (stays set).
        self.leading = leading if leading is not None else threading.Event()
        #: Set when leadership is lost (deadline, holder/UID change, deletion, fatal error).
        self.lost = lost if lost is not None else threading.Event()
        #: Whether a Lease read was answered: the candidate knows whether it may lead.
        self.answered = False
        self.observer = LeaseObserver()
        #: WARNINGs with advice for what keeps failing (missing namespace, RBAC, network).
        self.problems = LeaseProblems(settings.name, settings.namespace, clock=clock)
        self._troubled = False  # the current acquire attempt met a problem
        self.lost_at: float | None = None
        self.failure: BaseException | None = None
        self.reason = ""
        self.acquisitions = 0
        self.renewal_failures = 0
        #: resourceVersion of the Lease at the last acquire GET (where a watch resumes).
        self.seen_version: str | None = None
        #: Counts transitions and renewals (each notifies `condition`).
        self.version = 0
        self._state: State = "idle"
        self._lease: dict[str, Any] | None = None
        self._held = False
        self._renewed_at = -math.inf
        self._work_from = math.inf  # holding: when a Lease we created may guard leader work
        self._next_attempt = -math.inf
        self._acquire_delay = 0.0  # until the observed holder's record may be taken
        #: Open only while leading within the renew deadline.
        self.fence = fence or WriteFence(
            -math.inf,
            reason=f"leadership of Lease {settings.name} is not proven "
            "(renew deadline, loss or stop)",
            clock=lambda: self.clock(),
            cause="shutdown",
            deadline_cause="renew_deadline",
        )

    # -- what it knows -----------------------------------------------------------------------

    @property
    def state(self) -> State:
        with self.condition:
            return self._state

    @property
    def held(self) -> bool:
        """Whether the Lease is ours to release (cleared when it must be left to expire)."""
        with self.condition:
            return self._held

    @property
    def lease(self) -> dict[str, Any] | None:
        """The Lease as last written or read by us while holding it (a copy)."""
        with self.condition:
            return copy.deepcopy(self._lease)

    @property
    def deadline(self) -> float | None:
        """Monotonic time leadership ends unless renewed before; None when not leading."""
        with self.condition:
            return self._deadline() if self._state == "leading" else None

    @property
    def is_leader(self) -> bool:
        """Leading and within the renew deadline on our clock."""
        with self.condition:
            return self._state == "leading" and self.clock() < self._deadline()

    def _deadline(self) -> float:
        return self._renewed_at + self.settings.renew_deadline

    def _notify(self) -> None:
        self.version += 1
        self.condition.notify_all()

    # -- decisions ---------------------------------------------------------------------------

    def plan(self) -> Plan:
        """What to do now (after applying the deadline and the start of leading)."""
        self.check()
        with self.condition:
            state, now, version = self._state, self.clock(), self.version
            if state in ("idle", "lost", "stopped"):
                return Plan(state, version=version)
            if now >= self._next_attempt:
                return Plan("acquire" if state == "acquiring" else "renew", version=version)
            wake = self._next_attempt
            if state in _HOLDING:
                wake = min(wake, self._deadline())
            if state == "holding":
                wake = min(wake, self._work_from)
            return Plan("wait", wake - now, version)

    def retry_now(self) -> None:
        """The Lease changed (a standby's watch saw it): the next acquire attempt is now."""
        with self.condition:
            if self._state == "acquiring":
                self._next_attempt = -math.inf

    def check(self) -> bool:
        """Apply the renew deadline and the start of leading; True while holding the Lease."""
        with self.condition:
            now = self.clock()
            if self._state in _HOLDING and now >= self._deadline():
                self.lose(
                    "no successful renewal within the "
                    f"{self.settings.renew_deadline:g} s renew deadline"
                )
            if self._state == "holding" and now >= self._work_from:
                self._state = "leading"
                self.fence.deadline = self._deadline()
                self.leading.set()
                self._notify()
                logger.info(
                    "Leading with Lease %s as %s", self.settings.name, self.settings.identity
                )
            return self._state in _HOLDING

    # -- transitions -------------------------------------------------------------------------

    def begin(self) -> None:
        """idle -> acquiring; an instance elects once."""
        with self.condition:
            if self._state != "idle":
                raise RuntimeError("LeaderElection instances can only run once")
            self._state = "acquiring"
            self._notify()

    def lose(self, reason: str) -> None:
        """Leadership ends (leading -> lost), or a Lease not yet led on is given up."""
        with self.condition:
            if self._state == "leading":
                self._state = "lost"
                # No wait: writes on the wire finish, no new one is admitted.
                self.fence.close(0, cause="leadership_lost")
                self.reason = reason
                self.lost_at = self.clock()
                logger.warning("Lost leadership of Lease %s: %s", self.settings.name, reason)
                self.lost.set()
            elif self._state == "holding":
                self._state, self._held, self._lease = "acquiring", False, None
                self._next_attempt = -math.inf
                logger.info("Gave up the new Lease %s: %s", self.settings.name, reason)
            self._notify()

    def fail(self, error: BaseException) -> None:
        """A fatal error (e.g. 403 Forbidden) ends the election."""
        with self.condition:
            self.failure = error
            self.lose(f"fatal error: {error}")
            if self._state in ("acquiring", "holding"):
                self._state = "stopped"
            self._notify()

    def stop(self, *, release: bool = True) -> None:
        """No more attempts; ``release=False`` leaves the Lease to expire (work still runs)."""
        self.fence.close(0, cause="shutdown")  # before a release: nothing fenced after it
        with self.condition:
            if not release:
                self._held = False
            if self._state != "lost":
                self._state = "stopped"
            self._notify()

    # -- steps (one round of Lease calls each) -----------------------------------------------

    def acquire(self) -> bool:
        """One GET and, when allowed, one create or optimistic PUT; True once holding.

        A non-fatal API error is logged and retried at the next plan; a fatal one is raised.
        """
        started = self.clock()
        self._troubled = False
        try:
            acquired = self._try_acquire()
        except ClientError as error:
            if is_fatal(error):
                raise
            self.problems.report(error)
            self._troubled, acquired = True, None
        if not self._troubled:
            self.problems.cleared()
        if acquired is not None:
            return self._hold(*acquired, started)
        with self.condition:
            delay = self.settings.retry_period * random.uniform(0.9, 1.1)
            if self._acquire_delay > 0:
                delay = min(delay, self._acquire_delay)
            self._next_attempt = self.clock() + delay
        return False

    def _try_acquire(self) -> tuple[dict[str, Any], bool] | None:
        current = self.api.get(self.settings.http_timeout)
        now = self.clock()
        with self.condition:
            if not self.answered:
                self.answered = True
                self._notify()
        fallback = float(self.settings.lease_duration_seconds)
        self.observer.observe(current, now, fallback=fallback)
        metadata = (current or {}).get("metadata")
        self.seen_version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        identity = self.settings.identity
        wait = self.observer.wait_before_acquire(current, identity, now, fallback=fallback)
        self._acquire_delay = wait
        if wait:
            return None
        try:
            if current is None:
                return self.api.create(self._new_lease(), self.settings.http_timeout), True
            return self.api.replace(self._taken(current), self.settings.http_timeout), False
        except NotFound as error:
            if current is None:  # a create answered 404: the namespace does not exist
                self.problems.report(error, creating=True)
                self._troubled = True
            else:  # deleted between our read and our write: a race
                logger.debug("Lost the race for Lease %s: %s", self.settings.name, error)
            return None
        except (AlreadyExists, Conflict) as error:
            logger.debug("Lost the race for Lease %s: %s", self.settings.name, error)
            return None

    def _new_lease(self) -> dict[str, Any]:
        stamp = micro_time()
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.settings.name, "namespace": self.settings.namespace},
            "spec": {
                "holderIdentity": self.settings.identity,
                "leaseDurationSeconds": self.settings.lease_duration_seconds,
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        }

    def _taken(self, current: dict[str, Any]) -> dict[str, Any]:
        body, fields, stamp = copy.deepcopy(current), spec(current), micro_time()
        if holder(current) != self.settings.identity:
            fields["acquireTime"] = stamp
            fields["leaseTransitions"] = int(fields.get("leaseTransitions") or 0) + 1
        fields.update(
            holderIdentity=self.settings.identity,
            leaseDurationSeconds=self.settings.lease_duration_seconds,
            renewTime=stamp,
        )
        body["spec"] = fields
        return body

    def _hold(self, lease: dict[str, Any], created: bool, started: float) -> bool:
        fallback = float(self.settings.lease_duration_seconds)
        with self.condition:
            if self._state != "acquiring":
                return False
            self._lease, self._held = lease, True
            self._renewed_at = started  # the attempt's start: the conservative deadline
            self._state = "holding"
            quarantine = self.observer.quarantine(fallback) if created else 0.0
            self._work_from = self.clock() + quarantine if created else -math.inf
            self._next_attempt = self.clock() + self.settings.retry_period
            self.acquisitions += 1
            self._notify()
        if quarantine:
            logger.info(
                "Created Lease %s after seeing it held; leading in %g s",
                self.settings.name,
                quarantine,
            )
        elif created:
            logger.info("Created Lease %s", self.settings.name)
        return self.check()

    def renew(self) -> None:
        """One renewal: an optimistic PUT of our last record, on 409 one re-read and retry.

        A non-fatal API error counts in `renewal_failures`; a fatal one is raised.
        """
        started = self.clock()
        with self.condition:
            self._next_attempt = started + self.settings.retry_period
        try:
            if not self._try_renew(started):
                self.renewal_failures += 1
            else:
                self.problems.cleared()
        except ClientError as error:
            if is_fatal(error):
                raise
            self.renewal_failures += 1
            self.problems.report(error, doing=" (renewing)")

    def _try_renew(self, started: float) -> bool:
        """False when both PUTs met a 409 from writes that left the Lease ours."""
        for _ in range(2):
            with self.condition:
                if self._state not in _HOLDING:
                    return True
                timeout = min(self.settings.http_timeout, self._deadline() - self.clock())
                body = copy.deepcopy(self._lease or {})
            if timeout <= 0:
                self.check()
                return True
            fields = spec(body)
            fields.update(
                holderIdentity=self.settings.identity,
                leaseDurationSeconds=self.settings.lease_duration_seconds,
                renewTime=micro_time(),
            )
            body["spec"] = fields
            try:
                renewed = self.api.replace(body, timeout)
            except NotFound:
                self.lose("the Lease was deleted")
                return True
            except Conflict:
                if not self._reread():
                    return True
                continue
            self._renewed(renewed, started)
            return True
        return False

    def _renewed(self, lease: dict[str, Any], started: float) -> None:
        with self.condition:
            if self._state in _HOLDING and started < self._deadline():
                self._lease = lease
                self._renewed_at = max(self._renewed_at, started)
                if self._state == "leading":
                    self.fence.deadline = self._deadline()
                self._notify()

    def _reread(self) -> bool:
        """After a 409: True if the Lease is still ours (its fresh resourceVersion kept)."""
        with self.condition:
            timeout = min(self.settings.http_timeout, self._deadline() - self.clock())
            ours = self._lease or {}
        if timeout <= 0:
            self.check()
            return False
        current = self.api.get(timeout)
        with self.condition:
            if current is None:
                self.lose("the Lease was deleted")
            elif holder(current) != self.settings.identity:
                self.lose(f"the Lease is now held by {holder(current) or 'nobody'!r}")
            elif uid(current) != uid(ours):
                self.lose("the Lease was deleted and re-created")
            else:
                self._lease = current
                return True
            return False

    def release(self) -> bool:
        """Hand the Lease back (holder "", duration 1 s) if it is still ours; best effort."""
        with self.condition:
            ours = self._lease or {}
            self._held = False
        timeout = self.settings.http_timeout
        try:
            for _ in range(2):
                current = self.api.get(timeout)
                if current is None or holder(current) != self.settings.identity:
                    return False
                if uid(current) != uid(ours):
                    return False
                body, fields = copy.deepcopy(current), spec(current)
                fields.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time())
                body["spec"] = fields
                try:
                    self.api.replace(body, timeout)
                except Conflict:
                    continue
                logger.info("Released Lease %s", self.settings.name)
                return True
        except ClientError as error:
            logger.warning(
                "Could not release Lease %s; it will expire: %s", self.settings.name, error
            )
        return False
