"""`RuntimeSet`: a Manager's controller runtimes and the informer pools they share.

One pool per Config: controllers on one Config share compatible informers. Built once per
term (a warm standby builds it before leading); read from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.informer import Informer, InformerFailed
from cloudcoil_sync.controller._internal.informer_pool import InformerPool
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime
from cloudcoil_sync.controller._internal.term import Term

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.share import Share

__all__ = ["RuntimeSet"]


class RuntimeSet:
    """The runtimes of `controllers` (named `names`), built by `build`."""

    def __init__(
        self,
        controllers: Sequence[Controller[Any]],
        names: Sequence[str],
        *,
        config: Config | None,
        metrics: OperatorMetrics,
        shard: Share | None,
        on_synced: Callable[[], None],
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self._controllers = tuple(zip(controllers, names, strict=True))
        self._config = config
        self._metrics = metrics
        self._shard = shard  # a sharded replica's: informers narrowed to its share
        self._on_synced = on_synced
        self._on_fatal = on_fatal
        self._lock = threading.Lock()
        self._pools: dict[int, InformerPool] = {}
        self._runtimes: list[ControllerRuntime] = []

    def runtimes(self) -> list[ControllerRuntime]:
        with self._lock:
            return list(self._runtimes)

    def pools(self) -> list[InformerPool]:
        with self._lock:
            return list(self._pools.values())

    @property
    def informer_count(self) -> int:
        with self._lock:
            return sum(len(pool) for pool in self._pools.values())

    def build(self, term: Term) -> None:
        """One runtime per controller (every informer handler registered), in `term`."""
        for controller, name in self._controllers:
            config = controller.config or self._config
            if config is None:
                raise ValueError(f"Controller {name} has no Config: pass config= to the Manager")
            with self._lock:
                pool = self._pools.get(id(config))
            if pool is None:
                pool = InformerPool(config, on_synced=self._on_synced)
            runtime = ControllerRuntime(
                controller,
                config,
                informers=pool,
                metrics=self._metrics,
                name=name,
                on_fatal=self._on_fatal,
                term=term,
                shard=self._shard,
            )
            with self._lock:  # a new pool's informer is counted with the runtime reading it
                self._pools.setdefault(id(config), pool)
                self._runtimes.append(runtime)

    def cached(self, resource: type[Any], namespace: str | None = None) -> Any:
        """A reader over the informer of the first runtime that watches `resource`."""
        for runtime in self.runtimes():
            try:
                return runtime.cached(resource, namespace=namespace)
            except ValueError:
                continue
        raise ValueError(
            f"{resource.__name__} is not cached by any running controller (standby replicas "
            "run no informers); use request.client(...) for a live read"
        )

    def explained(self, error: BaseException) -> BaseException:
        """A failed informer's error with a hint (CRD installed? RBAC?), else `error`."""
        informer = self._failed_informer(error)
        if informer is None:
            return error
        if not informer.synced:
            explained = informer.failure()  # with the hint (CRD installed? RBAC?)
            if explained is not None:
                return explained
        failed = InformerFailed(f"Informer {informer.name} failed: {error}")
        failed.__cause__ = error
        return failed

    def _failed_informer(self, error: BaseException) -> Informer | None:
        for runtime in self.runtimes():
            for kind in runtime.controller.kinds:
                informer = runtime.informer_for(kind)
                if informer.error is error:
                    return informer
        return None
