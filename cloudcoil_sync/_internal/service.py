"""The one lifecycle contract every long-running part of an operator follows.

An informer, a controller's workers, the leader election, the webhook server, the health
server and the running application are each a `Service`: they own their threads, start them in
`start`, and stop and join them in `stop`. A group runner starts services in a declared order,
learns that one ended through its exit callback (never by polling), and stops them in reverse
order (controller-runtime's Runnable groups).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cloudcoil_sync._internal.signals import join_thread, wait_event

__all__ = ["ExitCallback", "Service", "ServiceGroup", "ServiceNotReady", "await_ready", "joined"]

log = logging.getLogger("cloudcoil_sync.service")

#: Called once, from the service's own thread, when a service ends without being asked to:
#: with the exception that ended it, or ``None`` when it finished on its own.
ExitCallback = Callable[[BaseException | None], None]


@runtime_checkable
class Service(Protocol):
    """Start, stop, readiness and health of one part of a running operator."""

    @property
    def name(self) -> str:
        """What logs and errors call this service."""
        ...

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Start the service's threads and return at once; raise if it cannot start.

        ``on_exit`` is called once if the service ends before `stop` is called.
        """
        ...

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the service to stop and wait up to ``timeout`` seconds (``None``: no limit).

        Returns whether every thread it owns has exited. Safe to call twice, and before `start`.
        """
        ...

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the service is ready (synced, serving, leading or standing by)."""
        ...

    def healthy(self) -> bool:
        """Whether the service is running as it should (the liveness probe's answer)."""
        ...


class ServiceNotReady(RuntimeError):
    """A service the start order waits for did not become ready in time."""


def joined(thread: threading.Thread | None, timeout: float | None) -> bool:
    """Join `thread` within `timeout` (``None``: no limit); whether it has ended.

    True for no thread or one not running; False, without joining, when called from `thread`
    itself (a stop from its own callback: it ends once that returns).
    """
    if thread is None or not thread.is_alive():
        return True
    if thread is threading.current_thread():
        return False
    join_thread(thread, timeout)
    return not thread.is_alive()


def await_ready(
    changed: threading.Condition,
    ready: Callable[[], bool],
    *,
    failure: Callable[[], BaseException | None],
    finished: Callable[[], bool],
    what: str,
    timeout: float | None,
) -> bool:
    """The one `wait_ready` loop: block on `changed` until `ready()`; False after `timeout`.

    Raises the failure, or RuntimeError if `what` finished first. Whatever changes the
    predicates must notify `changed`: nothing here re-checks on a timer.
    """

    def settled() -> bool:
        return ready() or failure() is not None or finished()

    with changed:
        changed.wait_for(settled, timeout)
    if ready():
        return True
    error = failure()
    if error is not None:
        raise error
    if finished():
        raise RuntimeError(f"{what} stopped before becoming ready")
    return False


@dataclass
class _Member:
    service: Service
    stop_timeout: float | None
    ready_timeout: float | None  # wait for readiness before starting the next member
    log_exit: bool = True  # False: its owner reports how it ended (the group does not log it)
    started: bool = False


class ServiceGroup:
    """Services started in a declared order, supervised by their exit callbacks, stopped in
    reverse order (controller-runtime's runnable groups).

    `stop_event` is the one event the group's owner waits on (`wait`): set by `stop` and by
    the exit callback of any member that ends on its own (the first such exit is kept in
    `exit_error`/`exited`). Pass an owner's own stop event to have both wake one wait.
    The group is itself a `Service`, so groups nest.
    """

    def __init__(self, name: str, *, stop_event: threading.Event | None = None) -> None:
        self._name = name
        self.stop_event = stop_event if stop_event is not None else threading.Event()
        self._members: list[_Member] = []
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()  # one stop at a time; a second waits for its answer
        self._stopper: threading.Thread | None = None  # the thread stopping the members
        self._on_exit: ExitCallback | None = None
        self._stopping = False
        self._stopped: bool | None = None  # stop's answer, once it ran
        self.exited: str | None = None  # the first member that ended on its own
        self.exit_error: BaseException | None = None
        self.late: tuple[str, ...] = ()  # members that did not stop within their timeout
        self.stop_errors: tuple[BaseException, ...] = ()  # raised by members' stop

    @property
    def name(self) -> str:
        return self._name

    def add(
        self,
        service: Service,
        *,
        stop_timeout: float | None = 10.0,
        ready_timeout: float | None = None,
        log_exit: bool = True,
    ) -> None:
        """Append `service`; with `ready_timeout`, later members start only once it is ready.
        With ``log_exit=False`` its ending on its own is not logged (its owner reports it)."""
        self._members.append(_Member(service, stop_timeout, ready_timeout, log_exit))

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Start every member not started yet, in order (members added later start on the
        next call). If one fails to start or to become ready, stop every member whose start
        was attempted (the failed one too: stop is safe before start) in reverse, and raise."""
        self._on_exit = on_exit
        for member in self._members:
            if self.stop_event.is_set():
                return  # asked to stop while starting: start no more
            if member.started:
                continue
            try:
                self._start(member)
            except BaseException:
                self.stop()
                raise

    def _start(self, member: _Member) -> None:
        service = member.service
        member.started = True  # stopped even if its start raises half way
        service.start(on_exit=self._exit_callback(member))
        limit = member.ready_timeout
        if limit is not None and not self.stop_event.is_set() and not service.wait_ready(limit):
            raise ServiceNotReady(f"{service.name} did not become ready within {limit:g}s")

    def _exit_callback(self, member: _Member) -> ExitCallback:
        def exited(error: BaseException | None) -> None:
            self._exited(member, error)

        return exited

    def _exited(self, member: _Member, error: BaseException | None) -> None:
        name = member.service.name
        with self._lock:
            first = self.exited is None and not self._stopping
            if first:
                self.exited, self.exit_error = name, error
        if not first:
            return
        if member.log_exit and error is None:
            log.error("%s: %s stopped unexpectedly", self._name, name)
        elif member.log_exit:
            log.error("%s: %s failed: %s", self._name, name, error)
        self.stop_event.set()
        if self._on_exit is not None:
            self._on_exit(error)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the group is asked to stop or a member ends (True), or `timeout`."""
        return wait_event(self.stop_event, timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the started members in reverse order, each within its own stop timeout
        (capped by what is left of `timeout`). An error raised by a member's stop is kept in
        `stop_errors` (the others still stop); False (and `late` names them) if some member
        did not stop in time. A call while another runs waits (within `timeout`) for that
        one's answer; a later call returns the first's answer."""
        with self._lock:
            self._stopping = True
            if self._stopper is threading.current_thread():
                return False  # from a member's stop, on the stopping thread: it is under way
        self.stop_event.set()
        if not self._stop_lock.acquire(timeout=-1 if timeout is None else timeout):
            return False  # another thread is still stopping the members
        try:
            if self._stopped is None:
                self._stopper = threading.current_thread()
                self._stopped = self._stop_members(timeout)
            return self._stopped
        finally:
            self._stopper = None
            self._stop_lock.release()

    def _stop_members(self, timeout: float | None) -> bool:
        give_up = None if timeout is None else time.monotonic() + timeout
        late: list[str] = []
        errors: list[BaseException] = []
        for member in reversed(self._members):
            if not member.started:
                continue
            limit = _capped(member.stop_timeout, give_up)
            try:
                stopped = member.service.stop(limit)
            except Exception as error:
                log.error("%s: stopping %s failed: %s", self._name, member.service.name, error)
                errors.append(error)
                continue
            if not stopped:
                late.append(member.service.name)
        self.late, self.stop_errors = tuple(late), tuple(errors)
        if late:
            log.warning("%s: %s did not stop in time", self._name, ", ".join(late))
        return not late

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Every member ready, asked in start order within one overall `timeout`."""
        give_up = None if timeout is None else time.monotonic() + timeout
        return all(m.service.wait_ready(_capped(None, give_up)) for m in self._members)

    def healthy(self) -> bool:
        return self.exited is None and all(m.service.healthy() for m in self._members)


def _capped(limit: float | None, give_up: float | None) -> float | None:
    if give_up is None:
        return limit
    left = max(0.0, give_up - time.monotonic())
    return left if limit is None else min(limit, left)
