"""Supervising leader-scope work: run it only while leading, stop it at the moment of loss.

`LeaderWork` waits for the `LeaseMachine` to lead, runs ``work(work_stop)`` on its own thread,
and waits on the machine's condition for whichever comes first: the loss (declared by the
lease thread, or here, on our own clock, once the renew deadline passed), the work returning,
or a stop. It then sets ``work_stop``, joins the work and waits for the fenced writes still on
the wire; only then may the Lease be released. Every wait is woken by a notification (a
transition, the work's end, a stop, `event_relay` for a caller's stop event) or ends at the
renew deadline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Literal

from cloudcoil_sync.controller._internal.lease import LeaseMachine

__all__ = ["LeaderWork", "Outcome", "await_leadership"]

logger = logging.getLogger("cloudcoil_sync.controller.leader")

Outcome = Literal["lost", "finished", "stopped"]
# Warn this often while waiting for leader work that does not stop.
_JOIN_WARN_SECONDS = 10.0


def await_leadership(machine: LeaseMachine, stopping: Callable[[], bool]) -> bool:
    """True once leading; False once ``stopping()`` or the election ended first."""
    with machine.condition:
        while True:
            if machine.failure is not None:
                raise machine.failure
            state = machine.state
            if state == "leading":
                return True
            if state not in ("acquiring", "holding") or stopping():
                return False
            machine.condition.wait()  # a transition, a stop or the stop relay notifies


class LeaderWork:
    """One term's leader work on its own thread (``cloudcoil-leader-work-<lease>``)."""

    def __init__(self, machine: LeaseMachine, work: Callable[[threading.Event], None]) -> None:
        self.machine = machine
        self.work_stop = threading.Event()
        self.errors: list[BaseException] = []
        self._work = work
        self._done = False
        self._thread = threading.Thread(
            target=self._run,
            name=f"cloudcoil-leader-work-{machine.settings.name}",
            daemon=True,
        )

    def run(self, stopping: Callable[[], bool], join_timeout: float | None) -> Outcome:
        """Start the work, supervise, stop and join it; raise if it or its writes linger."""
        name = self.machine.settings.name
        self._thread.start()
        outcome = self._supervise(stopping)
        self.work_stop.set()
        if not self._join(join_timeout):
            raise RuntimeError(
                f"Leader work for Lease {name} did not stop within {join_timeout:g} s; "
                "the Lease was not released and will expire"
            )
        # Released only once no fenced write can still land (the work closed it already
        # unless it sends unfenced writes, then this returns at once).
        if not self.machine.fence.close(self.machine.settings.http_timeout):
            raise RuntimeError(
                f"A write of the leader work for Lease {name} was still on the wire; "
                "the Lease was not released and will expire"
            )
        return outcome

    def _run(self) -> None:
        try:
            self._work(self.work_stop)
        except BaseException as error:
            self.errors.append(error)
        finally:
            with self.machine.condition:
                self._done = True
                self.machine.condition.notify_all()

    def _supervise(self, stopping: Callable[[], bool]) -> Outcome:
        """Wait for loss (on our own deadline clock, not the lease thread's), stop or the end."""
        machine = self.machine
        with machine.condition:
            while True:
                if not machine.check() or machine.state != "leading":
                    return "lost"
                if self._done:
                    return "finished"
                if stopping():
                    return "stopped"
                deadline = machine.deadline
                assert deadline is not None  # leading
                machine.condition.wait(max(0.0, deadline - machine.clock()))

    def _join(self, join_timeout: float | None) -> bool:
        clock = self.machine.clock
        end = None if join_timeout is None else clock() + join_timeout
        while True:
            step = _JOIN_WARN_SECONDS if end is None else min(_JOIN_WARN_SECONDS, end - clock())
            self._thread.join(max(0.0, step))
            if not self._thread.is_alive():
                return True
            if end is not None and clock() >= end:
                return False
            logger.warning(
                "Waiting for leader work of Lease %s to stop", self.machine.settings.name
            )
