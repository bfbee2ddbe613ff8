"""`LeaderGate`: the leader-election runnables of a Manager, as one `Service` of its group.

Added to the group after the election, it starts one term of leader work (``body(stop)``,
on a thread of its own) when the election reports leading (`LeaderElection.when_leading`,
from the lease thread), or at once without an election. A standby therefore runs no thread
here. The term ends when the owner stops the gate, when it is interrupted (a loss, a fatal
error: the body sees ``stop`` set), or when the body returns or raises. Once the body has
returned, the writes still on the wire are waited for (the election's fence); only then may
the group go on to stop the election, which releases the Lease. A term that does not end
within `stop`'s timeout abandons the election: its Lease expires instead of being released.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from cloudcoil_sync._internal.service import ExitCallback, joined
from cloudcoil_sync.controller._internal.elector import LeadershipLost
from cloudcoil_sync.controller._internal.event_relay import StopEvent
from cloudcoil_sync.controller._internal.fence import WriteFence

__all__ = ["GatedElection", "LeaderGate", "TermBody", "WarmInformers"]

log = logging.getLogger("cloudcoil_sync.manager")

#: One term of leader work: returns once its stop event is set, raises on failure.
TermBody = Callable[[threading.Event], None]
# Warn this often while waiting, with no timeout, for a term that does not stop.
_JOIN_WARN_SECONDS = 10.0


class GatedElection(Protocol):
    """What the gate needs of a `LeaderElection` (which imports the gate for its `run`)."""

    name: str
    fence: WriteFence
    lost: threading.Event

    @property
    def http_timeout(self) -> float: ...

    @property
    def failure(self) -> BaseException | None: ...

    @property
    def reason(self) -> str: ...

    def when_leading(self, callback: Callable[[], None]) -> None: ...

    def abandon(self) -> None: ...


class LeaderGate:
    """Run `body` on its own thread while leading (always, without an election).

    `wake` is called whenever the term's stop event is set, so that waits on a condition
    other than the event (the Manager's) notice at once.
    """

    name = "leader work"

    def __init__(
        self,
        body: TermBody,
        election: GatedElection | None,
        *,
        wake: Callable[[], None],
    ) -> None:
        self._body = body
        self._election = election
        self._wake = wake
        #: The term's stop: set by `stop`, `interrupt`, or once the body ended.
        #: A StopEvent: a body may wait on a condition it notifies (no relay thread).
        self.stop_event = StopEvent()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._on_exit: ExitCallback | None = None
        self._asked = False  # stop() was called: the end is not reported
        self._open = False  # start() was called: a term may begin
        self._led = False  # the election reported leading
        #: What ended the term (the body's error, a loss, a write left on the wire, a term
        #: that did not stop in time), once it ended.
        self.error: BaseException | None = None
        if election is not None:
            election.when_leading(self._leading)  # before the election starts

    @property
    def started(self) -> bool:
        """Whether a term began (its thread was started)."""
        with self._lock:
            return self._thread is not None

    def start(self, on_exit: ExitCallback | None = None) -> None:
        with self._lock:
            self._on_exit = on_exit
            self._open = True
            if self._election is None or self._led:
                self._begin()

    def _leading(self) -> None:
        """From the lease thread (registered before the election starts)."""
        with self._lock:
            self._led = True
            if self._open:
                self._begin()

    def _begin(self) -> None:
        if self._thread is not None or self._asked or self.stop_event.is_set():
            return  # stopped or interrupted before leading: no term
        election = self._election
        name = "cloudcoil-manager" if election is None else f"cloudcoil-leader-work-{election.name}"
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def interrupt(self) -> None:
        """End the running term (its body drains and returns), or let none begin."""
        self.stop_event.set()
        self._wake()

    def stop(self, timeout: float | None = None) -> bool:
        """End the term and join its thread within `timeout`; past it, abandon the election."""
        with self._lock:
            self._asked = True
            thread = self._thread
        self.interrupt()
        if thread is threading.current_thread():
            return False  # from the term itself: it ends once the caller returns
        if self._join(thread, timeout):
            return True
        election = self._election
        lease = "" if election is None else f" for Lease {election.name}"
        limit = "" if timeout is None else f" within {timeout:g} s"
        error = RuntimeError(
            f"Leader work{lease} did not stop{limit}; the Lease was not released and will expire"
        )
        log.error("%s", error)
        with self._lock:
            self.error = self.error or error
        if election is not None:
            election.abandon()
        return False

    def _join(self, thread: threading.Thread | None, timeout: float | None) -> bool:
        """`joined`; with no timeout, it warns every 10 s while the term goes on."""
        while timeout is None and not joined(thread, _JOIN_WARN_SECONDS):
            election = self._election
            log.warning(
                "Waiting for leader work%s to stop",
                "" if election is None else f" of Lease {election.name}",
            )
        return joined(thread, timeout)

    def wait_ready(self, timeout: float | None = None) -> bool:
        return True  # readiness is the Manager's (synced controllers), not the gate's

    def healthy(self) -> bool:
        return self.error is None

    def _main(self) -> None:
        error: BaseException | None = None
        try:
            self._body(self.stop_event)
        except BaseException as failure:
            error = failure
        error = self._settled(error)
        with self._lock:
            self.error = error
            asked = self._asked
        self.stop_event.set()
        self._wake()
        if not asked and self._on_exit is not None:
            self._on_exit(error)

    def _settled(self, error: BaseException | None) -> BaseException | None:
        """The term's outcome, once no write of its can still land (else the Lease expires)."""
        election = self._election
        if election is None:
            return error
        # Released only once no fenced write can still land (the term closed the fence
        # already unless its writes are unfenced; then this returns at once).
        if not election.fence.close(election.http_timeout):
            election.abandon()
            return RuntimeError(
                f"A write of the leader work for Lease {election.name} was still on the "
                "wire; the Lease was not released and will expire"
            )
        if error is None and election.failure is not None:
            return election.failure
        if error is None and election.lost.is_set():
            return LeadershipLost(f"Lost leadership of Lease {election.name}: {election.reason}")
        return error


class WarmInformers:
    """A warm standby's informers as a `Service` before the election (so started before
    leading). Their stop, after the Lease's, matters only if the replica never led: a term
    stops the informers it used."""

    name = "warm informers"

    def __init__(self, warm_up: Callable[[], None], end_unled: Callable[[], None]) -> None:
        self._warm_up = warm_up
        self._end_unled = end_unled

    def start(self, on_exit: ExitCallback | None = None) -> None:
        self._warm_up()  # their failures reach the Manager through each runtime's on_fatal

    def stop(self, timeout: float | None = None) -> bool:
        self._end_unled()
        return True

    def wait_ready(self, timeout: float | None = None) -> bool:
        return True

    def healthy(self) -> bool:
        return True
