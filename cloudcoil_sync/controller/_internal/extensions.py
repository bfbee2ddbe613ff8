"""The parts of a `Controller` definition beyond one reconcile loop: indexes
(`indexes`), event filters (`filters`), deletion notices (`deletions`), per-object
daemons and timers (`daemons`). A mixin of `Controller`, kept apart from `definition`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Self, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import require_sync
from cloudcoil_sync._internal.names import dns_label
from cloudcoil_sync.controller._internal.daemons import DEFAULT_MAX_THREADS, Daemon, Timer
from cloudcoil_sync.controller._internal.filters import (
    NO_FILTERS,
    Filters,
    make_filters,
    watch_filters,
)
from cloudcoil_sync.controller._internal.indexes import Index, IndexFunction, check_index
from cloudcoil_sync.controller._internal.registry import positive

__all__ = ["Extensions"]

F = TypeVar("F", bound=Callable[..., Any])
U = TypeVar("U", bound=Resource)


class Extensions:
    # Immutable defaults, replaced (never mutated) by index(), filter(), deleted(),
    # daemon() and timer(); `max_object_threads` bounds the daemon and timer threads.
    indexes: tuple[Index, ...] = ()
    filters: Filters = NO_FILTERS  # the primary's events
    on_deleted: Callable[[Any], Any] | None = None
    object_threads: tuple[Daemon | Timer, ...] = ()  # daemons and timers
    max_object_threads: int = DEFAULT_MAX_THREADS
    namespaces: tuple[str, ...] = ()  # watch_namespaces(): one informer per namespace
    namespace_selector: str | None = None  # watch_namespaces(selector=): while running
    dynamic_kinds: tuple[type[Resource], ...] = ()  # may_watch(): watched while running

    def may_watch(self, *resources: type[Resource]) -> Self:
        """Declare kinds `start_watching` may watch while running (RBAC: read access)."""
        self._check_watches()
        for resource in resources:
            if not isinstance(resource, type) or not issubclass(resource, Resource):
                raise TypeError(f"may_watch expects Resource classes, got {resource!r}")
        self.dynamic_kinds = tuple(dict.fromkeys((*self.dynamic_kinds, *resources)))
        return self

    def start_watching(
        self, resource: type[Resource], *, mapper: Callable[[Any], Any], **filters: Any
    ) -> None:
        """While running: watch a kind declared with `may_watch`, mapping its events with
        `mapper` (the `watch` filters apply; module `dynamic`)."""
        if resource not in self.dynamic_kinds:
            raise ValueError(
                f"{getattr(resource, '__name__', resource)} was not declared with "
                "may_watch(): its RBAC is generated before the operator runs"
            )
        require_sync(mapper, "watch mappers")
        self._running_dynamic().start(resource, mapper, watch_filters(filters))

    def stop_watching(self, resource: type[Resource]) -> None:
        """While running: stop a watch `start_watching` started and drop its cache."""
        self._running_dynamic().stop(resource)

    def _running_dynamic(self) -> Any:
        dynamic = getattr(getattr(self, "runtime", None), "dynamic", None)
        if dynamic is None:
            raise RuntimeError("start_watching and stop_watching need a running controller")
        return dynamic

    def watch_namespaces(self, *namespaces: str, selector: str | None = None) -> Self:
        """Watch only these namespaces (every namespaced kind of this controller), with a
        Role in each instead of a ClusterRole (module `scope`); or, with `selector`, the
        namespaces with those labels, joining and leaving while running (module
        `namespaces`: RBAC is then a ClusterRole)."""
        self._check_watches()
        if selector is not None:
            if namespaces or not isinstance(selector, str) or not selector.strip():
                raise ValueError("watch_namespaces takes namespaces or a non-empty selector")
            if getattr(self, "namespace", None) or getattr(self, "all_namespaces", False):
                raise ValueError("watch_namespaces excludes namespace= and all_namespaces=")
            self.namespace_selector = selector
            return self
        if not namespaces:
            raise ValueError("watch_namespaces needs at least one namespace")
        for namespace in namespaces:
            dns_label(namespace, "Controller namespace")
        if getattr(self, "namespace", None) or getattr(self, "all_namespaces", False):
            raise ValueError("watch_namespaces excludes namespace= and all_namespaces=")
        self.namespaces = tuple(dict.fromkeys(namespaces))
        return self

    def filter(
        self,
        *,
        field_selector: str | None = None,
        changed: str | Iterable[str] = (),
        when: Callable[[Any, Any], bool] | None = None,
    ) -> Self:
        """Which events of the primary kind start a pass (module `filters`): a
        `field_selector` sent to the API server; updates must change one of `changed`
        ("generation", "labels", "annotations") and satisfy `when(old, new)`."""
        self._check_watches()
        self.filters = make_filters(field_selector=field_selector, changed=changed, when=when)
        return self

    def index(self, resource: type[U], name: str, function: IndexFunction | None = None) -> Any:
        """File the cached objects of a watched kind under `function(obj)`'s values (a
        string, strings or None), for `cached(Kind).list/keys(index=name, value=...)`;
        without `function`, a decorator (see `indexes`)."""
        if function is None:

            def register(function: F) -> F:
                self.index(resource, name, function)
                return function

            return register
        check_index(resource, name, function)
        self._check_watches()
        if any(i.resource is resource and i.name == name for i in self.indexes):
            raise ValueError(f"Index {name!r} on {resource.__name__} is already declared")
        self.indexes = (*self.indexes, Index(resource, name, function))
        return self

    def deleted(self, function: object = None, /) -> Callable[[F], F]:
        """A notice once an object is gone, with the last known object: at most once,
        no finalizer needed (module `deletions`); `(resource)`."""
        if function is not None:
            raise TypeError("Use @controller.deleted() with parentheses")
        self._check_watches()

        def register(handler: F) -> F:
            require_sync(handler, "deletion handlers")
            if self.on_deleted is not None:
                raise ValueError("A deleted handler is already registered")
            self.on_deleted = handler
            return handler

        return register

    def daemon(self, *, retry: float = 10.0) -> Callable[[F], F]:
        """A thread per object running `(resource, stop)` while the object exists; `stop`
        (a `DaemonStop`) is set on its deletion, leadership loss or shutdown, and
        `stop.latest()` reads the object as it is now (module `daemons`)."""
        positive("retry", retry)
        return self._object_thread(lambda function: Daemon(function, float(retry)))

    def timer(
        self, *, interval: float, initial_delay: float = 0.0, idle: float | None = None
    ) -> Callable[[F], F]:
        """`(resource)` every `interval` s per object, after `initial_delay`; with `idle`,
        only once the object has not changed for that long (module `daemons`)."""
        positive("interval", interval)
        positive("idle", idle)
        if initial_delay < 0:
            raise ValueError("initial_delay must not be negative")
        return self._object_thread(
            lambda function: Timer(function, float(interval), float(initial_delay), idle)
        )

    def _object_thread(self, make: Callable[[Any], Daemon | Timer]) -> Callable[[F], F]:
        self._check_watches()

        def register(function: F) -> F:
            require_sync(function, "daemons and timers")
            self.object_threads = (*self.object_threads, make(function))
            return function

        return register

    def _check_watches(self) -> None:
        raise NotImplementedError  # the Controller's: refuse once frozen or running
