"""`Controller`: the definition of one reconcile loop (the reusable "group").

A controller names one primary kind and collects, without I/O and without running
any of them, its handlers (reconcile, stages, cases, finalizer), its secondary
watches (`owns`, `watch`) and its scoped admission routes. `validate_definition()`
checks and freezes it; the runtime (Manager, informers, workers) reads the public
attributes and attaches itself through `attach()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import require_sync
from cloudcoil_sync._internal.names import dns_label
from cloudcoil_sync.admission._internal.routes import Route, ScopedAdmission
from cloudcoil_sync.controller._internal.change_api import ChangeAPI
from cloudcoil_sync.controller._internal.extensions import Extensions
from cloudcoil_sync.controller._internal.filters import (
    NO_FILTERS,
    Filters,
    watch_filters,
)
from cloudcoil_sync.controller._internal.progress import ProgressStorage
from cloudcoil_sync.controller._internal.registry import Registry, positive
from cloudcoil_sync.controller._internal.reporting import PassRequest
from cloudcoil_sync.controller._internal.stages import Cases, Stages, StageScope
from cloudcoil_sync.controller._internal.types import ResourceKey

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.events import EventRecorder

__all__ = ["AttachedRuntime", "Controller", "Owned", "Watched"]

# Eight, where cloudcoil 0.8 and controller-runtime have one: a pass waits milliseconds for
# each API write on a real server, so one thread reconciles ~100 objects/s at best, and four
# stayed below kopf's default concurrency (bench/results-real.md). Passes still never overlap
# for one key; idle workers cost no CPU.
DEFAULT_WORKERS = 8

T = TypeVar("T", bound=Resource)
U = TypeVar("U", bound=Resource)
F = TypeVar("F", bound=Callable[..., Any])
Mapper = Callable[[Any], Iterable[ResourceKey]]

MIN_RESYNC, MAX_RESYNC = 30.0, 86400.0


@dataclass(frozen=True)
class Owned:
    """A child kind: events map to the controller-owner; `prune` deletes unensured children."""

    resource: type[Resource]
    prune: bool = False


@dataclass(frozen=True)
class Watched:
    """A dependency kind whose events `mapper` turns into primary keys (read-only access)."""

    resource: type[Resource]
    mapper: Mapper
    filters: Filters = NO_FILTERS


class AttachedRuntime(Protocol):
    """What a running controller sees of the `ControllerRuntime` that attached it."""

    @property
    def ready(self) -> bool: ...

    def enqueue(self, key: ResourceKey) -> None: ...

    def cached(self, resource: type[Any]) -> Any: ...


def _status_updates(explicit: bool | None, reconcile: object, report_status: bool) -> bool:
    """Whether status-only updates wake the controller: not when it reports status itself."""
    if explicit is not None:
        return explicit
    return not (isinstance(reconcile, Stages | Cases) or (reconcile is None and report_status))


def _check_types(
    resource: object,
    reconcile: object,
    label_selector: object,
    events: object,
    status_updates: object,
) -> None:
    if not isinstance(resource, type) or not issubclass(resource, Resource):
        raise TypeError(f"Controller resource must be a Resource class, got {resource!r}")
    if label_selector is not None and not isinstance(label_selector, str):
        raise TypeError(f"label_selector must be a string, got {label_selector!r}")
    if not isinstance(events, bool):
        from cloudcoil_sync.controller._internal.events import EventRecorder

        if not isinstance(events, EventRecorder):
            raise TypeError(f"events must be a bool or EventRecorder, got {events!r}")
    if status_updates is not None and not isinstance(status_updates, bool):
        raise TypeError(f"status_updates must be a bool, got {status_updates!r}")
    if reconcile is not None and not isinstance(reconcile, Stages | Cases):
        require_sync(reconcile, "reconcilers")


def _check_settings(
    *,
    name: str | None,
    namespace: str | None,
    all_namespaces: bool,
    workers: int,
    resync_period: float,
    timeouts: dict[str, float | None],
) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    for setting, value in timeouts.items():
        positive(setting, value)
    positive("resync_period", resync_period)
    if not MIN_RESYNC <= resync_period <= MAX_RESYNC:
        raise ValueError(
            f"resync_period must be between 30 and 86400 seconds, got {resync_period!r}"
        )
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("Controller name must not be empty")
        if len(name) > 118:
            raise ValueError("Controller name must have at most 118 characters")
    if namespace is not None:
        dns_label(namespace, "Controller namespace")
        if all_namespaces:
            raise ValueError("Controller namespace and all_namespaces are mutually exclusive")


class Controller(ChangeAPI, Extensions, Generic[T]):
    """Reconcile one primary kind, with optional child (`owns`) and dependency watches.

    Handlers are plain functions taking `(resource)` or `(resource, ctx)`; they may
    block. `reconcile=` is the low-level form: a function of the Request, or a
    `Stages`/`Cases` value. Register everything before the controller runs.
    """

    def __init__(
        self,
        resource: type[T],
        reconcile: Callable[[Any], Any] | Stages[T] | Cases[T] | None = None,
        *,
        name: str | None = None,
        owns: Iterable[type[Resource]] = (),
        report_status: bool | None = None,
        config: Config | None = None,
        namespace: str | None = None,
        all_namespaces: bool = False,
        label_selector: str | None = None,
        workers: int = DEFAULT_WORKERS,
        resync_period: float = 300,
        sync_timeout: float = 30,
        shutdown_timeout: float = 10,
        reconcile_timeout: float | None = None,
        slow_pass_warning: float | None = 30,
        events: bool | EventRecorder = True,
        status_updates: bool | None = None,
        event_flush_timeout: float = 2,
        progress: ProgressStorage = "annotations",
    ) -> None:
        _check_types(resource, reconcile, label_selector, events, status_updates)
        _check_settings(
            name=name,
            namespace=namespace,
            all_namespaces=all_namespaces,
            workers=workers,
            resync_period=resync_period,
            timeouts={
                "sync_timeout": sync_timeout,
                "shutdown_timeout": shutdown_timeout,
                "reconcile_timeout": reconcile_timeout,
                "event_flush_timeout": event_flush_timeout,
                "slow_pass_warning": slow_pass_warning,
            },
        )
        self.resource, self.name, self.reconciler = resource, name, reconcile
        self.config, self.namespace = config, namespace
        self.all_namespaces = bool(all_namespaces)
        self.label_selector = label_selector
        self.workers = workers
        self.resync_period = float(resync_period)
        self.sync_timeout = float(sync_timeout)
        self.shutdown_timeout = float(shutdown_timeout)
        self.reconcile_timeout = None if reconcile_timeout is None else float(reconcile_timeout)
        self.event_flush_timeout = float(event_flush_timeout)
        # A pass running this long is logged once with its stack (None: never).
        self.slow_pass_warning = None if slow_pass_warning is None else float(slow_pass_warning)
        self.events = events
        self.registry: Registry[T] = Registry(resource, report_status, progress=progress)
        self.report_status = self.registry.report_status
        self.status_updates = _status_updates(status_updates, reconcile, self.report_status)
        self.admission = ScopedAdmission(self.registry.check)
        self.owned: tuple[Owned, ...] = ()
        self.watches: tuple[Watched, ...] = ()
        self._runtime: AttachedRuntime | None = None
        self.owns(*owns)

    # Handlers -----------------------------------------------------------------

    def reconcile(
        self, function: object = None, /, *, every: float | None = None
    ) -> Callable[[F], F]:
        """Register the reconcile handler: `(resource)` or `(resource, ctx)`.

        It returns the edited resource (persisted as a guarded patch), a `Result`,
        or None; it may raise `Wait`. `every` requeues after that many seconds.
        """
        if function is not None:
            raise TypeError("Use @controller.reconcile() with parentheses")
        if self.reconciler is not None:
            raise ValueError("A constructor reconciler is already registered")
        return self.registry.reconcile(every=every)

    def stage(
        self,
        name: str | None = None,
        *,
        condition: str,
        depends: object | tuple[object, ...] | None = None,
    ) -> StageScope[T]:
        """A stage establishing `condition`; decorate its handler or add cases to it."""
        return self.registry.add_stage(name, condition, depends)

    def case(
        self, *, when: Callable[..., bool], after: object | tuple[object, ...] | None = None
    ) -> Callable[[F], F]:
        """A root-level first-match case; `when` is a plain predicate returning bool."""
        return self.registry.branches.case(when=when, after=after)

    def otherwise(self, function: object = None, /) -> Callable[[F], F]:
        """The mandatory fallback of root-level cases."""
        if function is not None:
            raise TypeError("Use @controller.otherwise() with parentheses")
        return self.registry.branches.otherwise()

    def finalize(self, key: str) -> Callable[[F], F]:
        """Cleanup that must succeed before finalizer `key` (example.com/cleanup) is removed."""
        return self.registry.finalize(key)

    # Admission ----------------------------------------------------------------

    def validate(self, **options: Any) -> Callable[[F], F]:
        """Admission validation of this controller's resource (same options as the app's)."""
        return self.admission.validate(self.resource, **options)

    def mutate(self, **options: Any) -> Callable[[F], F]:
        """Admission mutation of this controller's resource, returning the edited resource."""
        return self.admission.mutate(self.resource, **options)

    @property
    def routes(self) -> tuple[Route, ...]:
        return tuple(self.admission.routes.values())

    # Watches ------------------------------------------------------------------

    def owns(self, *resources: type[Resource], prune: bool = False) -> Controller[T]:
        """Watch child kinds; a child event enqueues its controller-owner of this kind.

        `prune=True` deletes controller-owned children of that kind that a successful
        pass did not `ctx.ensure` (and grants `delete` on that kind).
        """
        self._check_watches()
        owned = list(self.owned)
        for resource in resources:
            _require_resource(resource, "owns")
            index = next((i for i, o in enumerate(owned) if o.resource is resource), None)
            if index is None:
                owned.append(Owned(resource, bool(prune)))
            else:
                owned[index] = Owned(resource, owned[index].prune or bool(prune))
        self.owned = tuple(owned)
        return self

    @overload
    def watch(self, resource: type[U], *, mapper: Mapper, **filters: Any) -> Controller[T]: ...

    @overload
    def watch(self, resource: type[U], **filters: Any) -> Callable[[F], F]: ...

    def watch(
        self, resource: type[U], *, mapper: Mapper | None = None, **filters: Any
    ) -> Controller[T] | Callable[[F], F]:
        """Map events of a dependency kind to primary keys with a plain function.

        `mapper(obj)` gets a copy of the object (old and new on updates) and returns
        an iterable of `ResourceKey`. `filters`: `label_selector`, `field_selector`,
        `changed`, `when`, as `filter()` (module `filters`).
        """
        _require_resource(resource, "watch")
        checked = watch_filters(filters)
        if mapper is not None:
            self._add_watch(resource, mapper, checked)
            return self

        def register(function: F) -> F:
            self._add_watch(resource, function, checked)
            return function

        return register

    def _add_watch(self, resource: type[Resource], mapper: Mapper, filters: Filters) -> None:
        require_sync(mapper, "watch mappers")
        self._check_watches()
        self.watches = (*self.watches, Watched(resource, mapper, filters))

    def _check_watches(self) -> None:
        if self.registry.frozen or self._runtime is not None:
            raise RuntimeError("Configure watches before running the controller")

    # Definition ---------------------------------------------------------------

    @property
    def frozen(self) -> bool:
        return self.registry.frozen

    @property
    def kinds(self) -> tuple[type[Resource], ...]:
        """Every kind this controller watches: primary first, then owned, then mapped."""
        seen: list[type[Resource]] = [self.resource]
        for kind in (*(o.resource for o in self.owned), *(w.resource for w in self.watches)):
            if kind not in seen:
                seen.append(kind)
        return tuple(seen)

    @property
    def pruned(self) -> tuple[type[Resource], ...]:
        return tuple(o.resource for o in self.owned if o.prune)

    @property
    def reporting_controller(self) -> str:
        """The Events `reportingController` of the default recorder."""
        return f"cloudcoil/{self.name or self.resource.gvk().kind.lower()}"

    def watched_namespace(self, operator_namespace: str) -> str | None:
        """The namespace the primary informer watches; None means all namespaces."""
        return None if self.all_namespaces else self.namespace or operator_namespace

    def run_pass(self, request: PassRequest) -> Any:
        """Execute one pass's handlers for `request` (the runtime's per-pass request).

        The constructor reconciler (a function, `Stages` or `Cases`) receives the request;
        decorated handlers run through the registry (stages, cases or reconcile).
        Finalizer handling and persistence are the runtime's, around this call.
        """
        self.validate_definition(freeze=True)
        if self.reconciler is not None:
            return self.reconciler(request)
        return self.registry.run(request)

    def validate_definition(self, *, freeze: bool = False) -> None:
        """Check the completed definition; with `freeze`, refuse later registration."""
        if self.reconciler is None:
            self.registry.validate(freeze=freeze)
        elif self.registry.populated:
            raise ValueError(
                "Constructor reconciliation cannot be combined with decorated handlers"
            )
        elif isinstance(self.reconciler, Stages | Cases):
            self.reconciler.freeze(self.resource)
        if freeze:
            self.registry.frozen = True

    # Runtime hooks --------------------------------------------------------------

    def attach(self, runtime: AttachedRuntime) -> None:
        """Called by the runtime when it starts this (frozen) controller; once only."""
        if self._runtime is not None:
            raise RuntimeError("Controller instances can only run once")
        self.validate_definition(freeze=True)
        self._runtime = runtime

    @property
    def runtime(self) -> AttachedRuntime | None:
        return self._runtime

    @property
    def ready(self) -> bool:
        """Whether every informer has synced and workers are running."""
        return self._runtime is not None and self._runtime.ready

    def enqueue(self, key: ResourceKey) -> None:
        """Request a pass for `key`, e.g. from an external event source (while running)."""
        if not isinstance(key, ResourceKey):
            raise TypeError("enqueue expects a ResourceKey")
        if self._runtime is None:
            raise RuntimeError(
                "enqueue needs a running controller; start it with app.run() or a Manager"
            )
        self._runtime.enqueue(key)

    def cached(self, resource: type[U]) -> Any:
        """Cached reads of a declared kind (for mappers); needs a running controller."""
        if resource not in self.kinds and resource not in self.dynamic_kinds:
            raise ValueError(f"{resource.__name__} is not initialized; declare a watch first")
        if self._runtime is None:
            raise RuntimeError(
                "cached reads need a running controller; start it with app.run() or a Manager"
            )
        return self._runtime.cached(resource)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<Controller{label} {self.resource.__name__}>"


def _require_resource(resource: object, method: str) -> None:
    if not isinstance(resource, type) or not issubclass(resource, Resource):
        raise TypeError(f"{method} expects Resource classes, got {resource!r}")
