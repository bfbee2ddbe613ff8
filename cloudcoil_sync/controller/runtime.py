"""`ControllerRuntime`: one definition `Controller` running against one Config.

A Manager (or a test) builds one `InformerPool` per Config, one `ControllerRuntime` per
controller (its constructor registers every informer handler, without I/O), then starts
and stops them in order::

    pool = InformerPool(config)
    runtimes = [ControllerRuntime(c, config, informers=pool, metrics=m) for c in controllers]
    for runtime in runtimes:
        runtime.start()                 # starts pooled informers (handlers all registered)
    for runtime in runtimes:
        runtime.wait_synced()           # within sync_timeout; then its workers start
    ...
    for runtime in reversed(runtimes):
        runtime.stop(drain=True)        # in-flight passes finish (shutdown_timeout)
    pool.stop()

A runtime given no pool makes its own and stops it in `stop()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cloudcoil.resources import Resource

from cloudcoil_sync.controller.informer import Informer
from cloudcoil_sync.controller.metrics import ControllerStatus, OperatorMetrics
from cloudcoil_sync.controller.types import ResourceKey

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller.definition import Controller

__all__ = ["ControllerRuntime", "InformerPool", "SyncTimeout"]


class SyncTimeout(TimeoutError):
    """A controller's informers did not complete their first list within `sync_timeout`."""


class InformerPool:
    """Informers of one Config shared by (kind, namespace, label selector)."""

    def __init__(self, config: Config) -> None:
        raise NotImplementedError

    def informer(
        self,
        resource: type[Resource],
        *,
        namespace: str | None,
        label_selector: str | None = None,
        resync_period: float = 300.0,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> Informer:
        """The shared informer for that view (created on first request, not started)."""
        raise NotImplementedError

    def start(self) -> None:
        """Start every informer not yet started (register all handlers first)."""
        raise NotImplementedError

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop and join every informer; True when all ended in time."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class ControllerRuntime:
    """Run one controller: informers → event-to-key mapping → WorkQueue → worker threads."""

    def __init__(
        self,
        controller: Controller[Any],
        config: Config,
        *,
        informers: InformerPool | None = None,
        metrics: OperatorMetrics | None = None,
        name: str | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Attach to `controller` and register informer handlers (no I/O, no threads).

        `name` is the metric/log name (default: the controller's name or its kind in lower
        case); `on_fatal` is called once, from the failing thread, when an informer dies
        or a watch mapper raises.
        """
        raise NotImplementedError

    def start(self, *, wait: bool = False) -> None:
        """Start the informers (pooled ones too); with `wait`, also `wait_synced()`."""
        raise NotImplementedError

    def wait_synced(self, timeout: float | None = None) -> None:
        """Block until every informer listed (default `sync_timeout`), then start workers.

        Raises `SyncTimeout`, `InformerFailed` or the fatal error.
        """
        raise NotImplementedError

    @property
    def ready(self) -> bool:
        """Informers synced, workers running, not stopping, no fatal error."""
        raise NotImplementedError

    @property
    def fatal_error(self) -> BaseException | None:
        raise NotImplementedError

    @property
    def status(self) -> ControllerStatus:
        raise NotImplementedError

    def stop(self, *, drain: bool = True, timeout: float | None = None) -> bool:
        """Stop workers (in-flight passes finish within `timeout`, default shutdown_timeout).

        With `drain`, keys already queued are processed too. Then stops the informers if
        this runtime owns its pool. True if every pass finished in time.
        """
        raise NotImplementedError

    def enqueue(self, key: ResourceKey) -> None:
        raise NotImplementedError

    def cached(self, resource: type[Any]) -> Any:
        raise NotImplementedError
