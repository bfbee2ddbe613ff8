"""The one lifecycle contract every long-running part of an operator follows.

An informer, a controller's workers, the leader election, the webhook server, the health
server and the running application are each a `Service`: they own their threads, start them in
`start`, and stop and join them in `stop`. A group runner starts services in a declared order,
learns that one ended through its exit callback (never by polling), and stops them in reverse
order (controller-runtime's Runnable groups).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["ExitCallback", "Service"]

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
