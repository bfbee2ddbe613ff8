"""The lease thread: drives one `LeaseMachine` against its Lease API until stopped.

It does what :meth:`LeaseMachine.plan` says: acquire, renew, or wait. Waits are on the
machine's condition (a stop, a loss declared by the leader-work supervisor or any transition
wakes it at once); a standby's wait is a watch on the Lease when the API offers one, so a
release wakes it in milliseconds rather than a retry period. On stop it releases the Lease if
it still holds it, from its own thread, then ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from cloudcoil_sync._internal.service import ExitCallback, joined
from cloudcoil_sync.client import ClientError, Forbidden
from cloudcoil_sync.controller._internal.lease import LeaseMachine
from cloudcoil_sync.controller._internal.lease_problems import advice

__all__ = ["Elector", "LeadershipLost"]

logger = logging.getLogger("cloudcoil_sync.controller.leader")


class LeadershipLost(Exception):
    """The leader can no longer prove it holds the Lease; its leader work was stopped."""


class Elector:
    """Owns the lease thread of one `LeaseMachine` (started once, stopped and joined once).

    ``on_exit`` is called once from the lease thread when the election ends unasked: with
    `LeadershipLost` after a loss, or with the fatal error (e.g. 403 Forbidden).
    ``on_leading`` is called once from the lease thread when leadership begins (it must
    return quickly: the lease thread renews after it).
    """

    def __init__(
        self,
        machine: LeaseMachine,
        *,
        on_exit: ExitCallback | None = None,
        on_leading: Callable[[], None] | None = None,
    ) -> None:
        self.machine = machine
        self._on_exit = on_exit
        self._on_leading = on_leading
        self._stopping = self._watch_denied = False
        self._thread = threading.Thread(
            target=self._main, name=f"cloudcoil-lease-{machine.settings.name}", daemon=True
        )

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self.machine.begin()
        self._thread.start()

    def stop(self, timeout: float | None) -> bool:
        """End the thread (it releases the Lease if still held); whether it exited in time."""
        with self.machine.condition:
            self._stopping = True
            self.machine.condition.notify_all()
        interrupt = getattr(self.machine.api, "interrupt", None)
        if interrupt is not None:
            interrupt()  # a standby waiting on the Lease's watch
        return joined(self._thread, timeout)  # False from on_exit: it ends once that returns

    def _main(self) -> None:
        try:
            self._drive()
        except BaseException as error:
            self.machine.fail(error)
            settings = self.machine.settings
            logger.error(
                "Leader election failed: %s", advice(error, settings.name, settings.namespace)
            )
            self._exited(error)
            self._wait_for_stop()
        finally:
            if self.machine.held:
                self.machine.release()

    def _drive(self) -> None:
        machine = self.machine
        while not self._stopping:
            plan = machine.plan()
            if self._on_leading is not None and machine.leading.is_set():
                leading, self._on_leading = self._on_leading, None
                leading()  # once, whichever thread's check saw the start of leading
            if plan.action == "acquire":
                machine.acquire()
            elif plan.action == "renew":
                machine.renew()
            elif plan.action == "wait":
                self._wait(plan.wait, plan.version, watch=machine.state == "acquiring")
            elif plan.action == "lost":
                name = machine.settings.name
                self._exited(LeadershipLost(f"Lost leadership of Lease {name}: {machine.reason}"))
                self._wait_for_stop()
                return
            else:
                return

    def _exited(self, error: BaseException) -> None:
        if self._on_exit is not None and not self._stopping:
            try:
                self._on_exit(error)
            except Exception:
                logger.exception("on_exit of Lease %s failed", self.machine.settings.name)

    def _wait_for_stop(self) -> None:
        with self.machine.condition:
            while not self._stopping:
                self.machine.condition.wait()

    def _wait(self, limit: float, version: int, *, watch: bool) -> None:
        """Until the next step: ``limit``, a transition, a stop, or (standby) a Lease change."""
        waiter: Any = getattr(self.machine.api, "wait_change", None)
        if watch and waiter is not None and not self._watch_denied and limit >= 1:
            try:
                waiter(self.machine.seen_version, int(limit))
            except Forbidden:
                self._watch_denied = True
                logger.info(
                    "No watch permission on Lease %s: polling it instead",
                    self.machine.settings.name,
                )
            except ClientError as error:
                logger.debug("Watching Lease %s failed: %s", self.machine.settings.name, error)
            else:
                self.machine.retry_now()  # changed (or the watch ended): read it again
                return
            plan = self.machine.plan()
            limit, version = max(0.0, plan.wait), plan.version
        with self.machine.condition:
            # A transition since the plan (a loss the supervisor declared) is not slept over.
            if not self._stopping and limit > 0 and self.machine.version == version:
                self.machine.condition.wait(limit)
