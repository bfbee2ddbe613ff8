"""`ControllerRuntime`: one definition `Controller` running against one Config.

A Manager (or a test) builds one `InformerPool` per Config and one `ControllerRuntime` per
controller (its constructor registers every informer handler, without I/O), starts them all
(the pooled informers start once every handler is registered), waits for each to sync
(within sync_timeout; then its workers start), and stops them in reverse (in-flight passes
finish within shutdown_timeout) before the pool. A runtime given no pool makes its own and
stops it in `stop()`.

Events become keys on the informer threads: primary events key themselves (status-only
updates are ignored unless `status_updates`), owned children key their controller-owner,
watched dependencies key what the mapper returns (`mapping`: mappers run once the caches
synced; a mapper exception is logged and the event dropped). A pass runs the finalizer
step, the controller's handlers, then stages its status onto what the handler returned; the
reconciler persists it; failures report status through `PassHooks`; queued Events are flushed
once the pass has settled. A primary the model rejects is reported on the object
(`invalid`) and not retried until it changes; a pass abandoned at reconcile_timeout is too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from cloudcoil.models.kubernetes.core.v1 import Namespace
from cloudcoil.resources import Resource

from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync.controller._internal import invalid as rejects
from cloudcoil_sync.controller._internal.additions import (
    add_indexes,
    deletion_notices,
    object_threads,
)
from cloudcoil_sync.controller._internal.cache import Caches
from cloudcoil_sync.controller._internal.causes import ENQUEUE, TAKEOVER
from cloudcoil_sync.controller._internal.dynamic import DynamicWatches, WatchScope
from cloudcoil_sync.controller._internal.echoes import Echoes
from cloudcoil_sync.controller._internal.events import recorder_for
from cloudcoil_sync.controller._internal.filters import EventFilter, Filters
from cloudcoil_sync.controller._internal.handling import PassHandler
from cloudcoil_sync.controller._internal.informer import Informer
from cloudcoil_sync.controller._internal.informer_pool import InformerPool
from cloudcoil_sync.controller._internal.mapping import MappedEvents
from cloudcoil_sync.controller._internal.metrics import ControllerStatus, OperatorMetrics
from cloudcoil_sync.controller._internal.namespaces import NamespaceSelection
from cloudcoil_sync.controller._internal.queue import WorkQueue
from cloudcoil_sync.controller._internal.reconciler import Reconciler
from cloudcoil_sync.controller._internal.scope import NamespaceSet, describe
from cloudcoil_sync.controller._internal.term import Term
from cloudcoil_sync.controller._internal.triggers import Triggers
from cloudcoil_sync.controller._internal.types import ResourceKey
from cloudcoil_sync.controller._internal.workers import Workers

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.definition import Controller
    from cloudcoil_sync.controller._internal.share import Share

__all__ = ["ControllerRuntime", "InformerPool", "SyncTimeout"]

JSON = dict[str, Any]


class SyncTimeout(TimeoutError):
    """A controller's informers did not complete their first list within `sync_timeout`."""


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
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        term: Term | None = None,
        shard: Share | None = None,
    ) -> None:
        """Attach to `controller` and register informer handlers (no I/O, no threads).

        `name` is the metric/log name (default: the controller's name or its kind in lower
        case); `on_fatal` is called once, from the failing thread, when an informer dies.
        `base_delay`/`max_delay` tune the retry backoff. `term` (shared by a Manager's
        runtimes) decides when passes may start and fences their writes; without one the
        runtime has its own, closed by `stop()`. `shard` (a sharded replica's) narrows the
        primary and owned informers to its share and answers drains.
        `clock` (monotonic seconds) times the queue's backoff and delayed adds and the
        workers' reconcile_timeout and slow_pass_warning (tests).
        """
        if controller.runtime is not None:
            raise RuntimeError("Controller instances can only run once")
        controller.validate_definition(freeze=True)
        self.controller = controller
        self._config = config
        self.name = name or controller.name or controller.resource.gvk().kind.lower()
        self.log = logging.getLogger(f"cloudcoil_sync.controller.{self.name}")
        self._on_fatal = on_fatal
        self._lock = threading.Lock()
        self._fatal: BaseException | None = None
        self._started = self._running = self._stopping = self._stopped = False
        self._owns_term = term is None
        self.term = term if term is not None else Term()
        self._owns_pool = informers is None
        self._pool = informers if informers is not None else InformerPool(config)
        self._metrics = (metrics or OperatorMetrics()).controller(
            self.name, workers=controller.workers
        )
        self.queue: WorkQueue[ResourceKey] = WorkQueue(
            base_delay=base_delay, max_delay=max_delay, metrics=self._metrics.queue, clock=clock
        )
        self._clock = clock
        self._client = config.client(controller.resource)
        self._mapping = self._client.mapping
        self.caches = Caches(config)  # what a pass reads: handed down, not the runtime
        self._all: list[Informer] = []
        self._shard = shard
        self.triggers = self._triggers()
        self._mapped = MappedEvents(self.log, self.triggers.add, self._metrics)
        self.primary = self._wire_informers()
        self.recorder = recorder_for(controller.events, controller.reporting_controller, config)
        self.reconciler, self.workers = self._pass_machinery()
        self._bind_metrics()
        controller.attach(self)

    def _bind_metrics(self) -> None:
        """The controller's gauges read this runtime and its queue when scraped."""
        self._metrics.bind(
            ready=lambda: self.ready,
            unfinished=self.queue.unfinished_work_seconds,
            longest=self.queue.longest_running_processor_seconds,
            depth=lambda: self.queue.pending,
            delayed=lambda: self.queue.delayed,
        )

    def _triggers(self) -> Triggers:
        """The informer handlers: events in, keys added to the queue (not for the echoes of
        the reconciler's own writes)."""
        self.echoes = Echoes(lambda key: self.triggers.add(key))
        return Triggers(
            self.queue,
            group=self._mapping.group,
            kind=self._mapping.kind,
            namespaced=self._mapping.namespaced,
            status_updates=self.controller.status_updates,
            lookup=lambda key: self.primary.store.get(key.namespace, key.name),
            echo=self.echoes.is_echo,
        )

    def _wire_informers(self) -> Informer:
        """Register the handlers that turn events into keys; the primary informer."""
        controller, shard = self.controller, self._shard
        self._views: list[NamespaceSet] = []  # selected namespaces' informers (not pooled)
        self._selection: NamespaceSelection | None = None
        narrow = shard.selector if shard is not None else lambda base: base
        primary = self._informer(
            controller.resource,
            controller.watched_namespace(self._config.namespace),
            narrow(controller.label_selector),
            controller.filters.field_selector,
        )
        if shard is not None:
            shard.count(primary)
        triggers = self.triggers
        primary.add_handler(
            on_add=triggers.primary,
            on_update=self._filter(controller.resource, controller.filters).update(
                triggers.primary_update
            ),
            on_delete=triggers.primary_deleted,
        )
        registry = controller.registry  # raw event handlers, delete handlers' last objects
        hooks = registry.raw_events.informer_handlers(registry.changes)
        if hooks:
            primary.add_handler(**hooks)
        scope = self.primary_scope
        for owned in controller.owned:
            child = self._informer(owned.resource, scope, narrow(None))
            child.add_handler(**triggers.child_handlers(owned.resource.gvk().kind))
        for watched in controller.watches:
            kind, filters = watched.resource, watched.filters
            dependency = self._informer(kind, scope, filters.label_selector, filters.field_selector)
            handler = self._mapped.handler(kind, watched.mapper)  # names the cause
            update = self._filter(kind, filters, prefix=f"{kind.__name__}:").update(handler)
            dependency.add_handler(on_add=handler, on_update=update, on_delete=handler)
        add_indexes(controller, self.caches.informers, self.name)
        self.deletions = deletion_notices(controller, primary, self.term, self.log, self.name)
        self.daemons = object_threads(controller, primary, self.term, self.log, self._metrics)
        self.dynamic = DynamicWatches(
            self._config,
            self.caches.informers,
            scope=WatchScope(
                controller.watched_namespace(self._config.namespace),
                controller.namespaces,
                (lambda: self._selection) if controller.namespace_selector else None,
            ),
            resync_period=controller.resync_period,
            handler=self._mapped.handler,
            event_filter=lambda kind, filters: self._filter(
                kind, filters, prefix=f"{kind.__name__}:"
            ),
            on_failure=self._fail,
            log=self.log,
        )
        return primary

    def _filter(self, kind: type[Resource], filters: Filters, *, prefix: str = "") -> EventFilter:
        primary = not prefix
        return EventFilter(
            kind,
            filters,
            count=self._metrics.filtered,
            log=self.log,
            prefix=prefix,
            status_only_dropped=primary and not self.controller.status_updates,
        )

    def _pass_machinery(self) -> tuple[Reconciler[Any], Workers]:
        """The reconciler (the definition's `PassHandler`, persistence) and its workers."""
        if not self.controller.resource.__pydantic_complete__:
            # A model deferred at import (`_internal/models.py`) is built here, once, not by
            # the first passes at the same time.
            self.controller.resource.model_rebuild()
        where = f"Controller {self.name}"
        marks = rejects.Marks(self._client, self.recorder, self.controller, where, self.log)
        handler = PassHandler(
            self.controller, self.caches, marks, term=self.term, shard=self._shard
        )
        store = self.primary.store
        reconciler: Reconciler[Any] = Reconciler(
            self.controller.resource,
            handler,
            lookup=lambda key: store.get_json(key.namespace, key.name),
            client=lambda key: self._client,
            name=self.name,
            metrics=self._metrics,
            hooks=handler,
            echoes=self.echoes,
        )
        workers = Workers(
            reconciler,
            self.queue,
            workers=self.controller.workers,
            reconcile_timeout=self.controller.reconcile_timeout,
            slow_pass_warning=self.controller.slow_pass_warning,
            metrics=self._metrics,
            fence=self.term.fence,
            clock=self._clock,
        )
        return reconciler, workers

    # -- wiring -------------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    @property
    def primary_scope(self) -> str | None:
        """The namespace of the primary informer (None: all namespaces or cluster scope)."""
        if not self._mapping.namespaced:
            return None
        return self.controller.watched_namespace(self._config.namespace)

    def _informer(
        self,
        resource: type[Resource],
        namespace: str | None,
        selector: str | None,
        field_selector: str | None = None,
    ) -> Informer:
        """The pooled informer of that view; with `controller.namespaces`, one per listed
        namespace for a namespaced kind, seen as one (`scope.NamespaceSet`)."""
        listed, chosen = self.controller.namespaces, self.controller.namespace_selector
        mapping = self._config.client(resource).mapping
        if chosen and mapping.namespaced:
            if self._selection is None:
                namespaces = self._pooled(Namespace, None, chosen, None)
                self._selection = NamespaceSelection(namespaces, chosen, self.log)
            selected = self._selection.build(
                self._config.client(resource),
                (selector, field_selector),
                resync_period=self.controller.resync_period,
                on_failure=self._fail,
            )
            self._selection.follow(selected)  # before the Namespace informer starts
            self._views.append(selected)
            view = cast(Informer, selected)
        elif listed and mapping.namespaced:
            parts = {ns: self._pooled(resource, ns, selector, field_selector) for ns in listed}
            name = f"{mapping.plural}@{','.join(listed)}"
            view = cast(Informer, NamespaceSet(parts, name=name))  # duck-typed: reads, handlers
        else:
            view = self._pooled(resource, namespace, selector, field_selector)
        self.caches.informers.setdefault(resource, view)
        return view

    def _pooled(
        self,
        resource: type[Resource],
        namespace: str | None,
        selector: str | None,
        field_selector: str | None,
    ) -> Informer:
        informer = self._pool.informer(
            resource,
            namespace=namespace,
            label_selector=selector,
            field_selector=field_selector,
            resync_period=self.controller.resync_period,
            on_failure=self._fail,
        )
        if informer not in self._all:
            self._all.append(informer)
        return informer

    # -- failures -----------------------------------------------------------------------------

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if self._fatal is not None:
                return
            self._fatal = error
        self.triggers.close()
        self.log.error("Controller %s failed: %s", self.name, error)
        if self._on_fatal is not None:
            try:
                self._on_fatal(error)
            except Exception:
                self.log.exception("The fatal-error callback of %s raised", self.name)

    # AttachedRuntime (Controller.cached and friends)

    def informer_for(self, resource: type[Any]) -> Informer:
        return self.caches.informer_for(resource)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, on_exit: ExitCallback | None = None, *, wait: bool = False) -> None:
        """Start the informers (pooled too); `wait`: also `wait_synced()`, then
        `start_workers()` (a runtime on its own). Failures: `on_fatal`."""
        with self._lock:
            if self._started:
                raise RuntimeError(f"Controller {self.name} was already started")
            self._started = True
        self._pool.start()
        self.log.info("Controller %s watches %s", self.name, self._scope())
        if wait:
            self.wait_synced()
            self.start_workers()

    def _scope(self) -> str:
        return describe(
            self.controller.resource.__name__,
            namespaced=self._mapping.namespaced,
            namespaces=self.controller.namespaces or (self.primary_scope or "",),
            label_selector=self.controller.label_selector,
            field_selector=self.controller.filters.field_selector,
            namespace_selector=self.controller.namespace_selector,
        )

    def wait_synced(self, timeout: float | None = None) -> None:
        """Block until every informer listed (default `sync_timeout`); nothing else.

        Raises `SyncTimeout`, `InformerFailed` or the fatal error; returns early, without
        error, if `stop()` was called meanwhile.
        """
        if not self._started:
            raise RuntimeError("start() the controller before waiting for it")
        limit = self.controller.sync_timeout if timeout is None else timeout
        give_up = time.monotonic() + limit
        informers: list[Informer | NamespaceSet] = [*self._all, *self._views]
        for informer in informers:
            if not informer.wait_synced(max(0.0, give_up - time.monotonic())):
                if self._fatal is not None:
                    raise self._fatal
                if self._stopping:
                    return  # stopped while waiting
                raise SyncTimeout(
                    f"Controller {self.name}: informer {informer.name} did not sync within "
                    f"{limit:g}s (sync_timeout)"
                )
        if self._fatal is not None:
            raise self._fatal

    def start_workers(self) -> bool:
        """Once synced: run the watch mappers and start the workers (once; not once
        stopping). Whether the workers run."""
        if not self.synced:
            raise RuntimeError(f"Controller {self.name}: start_workers() before its caches synced")
        with self._lock:
            if self._running or self._stopping:
                return self._running and not self._stopping
            self._running = True
        self._mapped.open()  # every cache a mapper may read has listed
        if self.term.elected:  # the keys listed while standing by: run for the takeover
            self.queue.note_pending(TAKEOVER)
        for extra in (self.deletions, self.daemons):
            if extra is not None:
                extra.start()
        self.workers.start()
        self.log.info("Controller %s is ready", self.name)
        return True

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the informers' first list (False instead of `SyncTimeout`); ready once
        the owner also started the workers. Starts nothing."""
        with contextlib.suppress(SyncTimeout):  # not ready: False, as the contract says
            self.wait_synced(timeout)
        return self.ready

    def healthy(self) -> bool:
        return self._fatal is None

    @property
    def synced(self) -> bool:
        """Every informer of this controller completed its first list."""
        return all(i.synced for i in self._all) and all(v.synced for v in self._views)

    @property
    def ready(self) -> bool:
        """Informers synced, workers running, not stopping, no fatal error."""
        return self._running and not self._stopping and self._fatal is None

    @property
    def fatal_error(self) -> BaseException | None:
        return self._fatal

    @property
    def status(self) -> ControllerStatus:
        counts, seconds, _ = self.reconciler.stats()
        return ControllerStatus(
            ready=self.ready,
            queued=self.queue.depth,
            processing=self.queue.processing,
            delayed=self.queue.delayed,
            successes=counts["success"],
            errors=counts["error"],
            terminal_errors=counts["terminal"],
            cancellations=counts["cancelled"],
            duration_seconds=seconds,
        )

    def stop(self, timeout: float | None = None) -> bool:
        """Stop workers: queued keys stay unstarted, in-flight passes finish within `timeout`
        (default shutdown_timeout). Then stops the informers if this runtime owns its pool.
        True if every pass finished in time."""
        return self._stop(timeout, drain=False)

    def drain(self, timeout: float | None = None) -> bool:
        """As `stop`, but the keys already queued are processed first (within `timeout`)."""
        return self._stop(timeout, drain=True)

    def _stop(self, timeout: float | None, *, drain: bool) -> bool:
        with self._lock:
            if self._stopped:
                return True
            self._stopping = self._stopped = True
            running = self._running
        limit = self.controller.shutdown_timeout if timeout is None else timeout
        finished = True
        if running:
            finished = self.workers.drain(limit) if drain else self.workers.stop(limit)
        else:
            self.queue.shutdown(immediate=True)
        for extra in (self.deletions, self.daemons, self._selection):
            if extra is not None:
                finished &= extra.stop(limit)
        finished &= self.dynamic.stop_all(limit)
        if self._owns_term:
            self.term.end()
            self.term.fence.close(0, cause="shutdown")  # abandoned passes write nothing more
        if self._owns_pool:
            self._pool.stop(timeout=limit)
        return finished

    # -- attach API ---------------------------------------------------------------------------

    def enqueue(self, key: ResourceKey) -> None:
        self.triggers.add(key, ENQUEUE)

    def cached(self, resource: type[Any], *, namespace: str | None = None) -> Any:
        return self.caches.cached(resource, namespace=namespace)
