"""Prometheus metrics named as controller-runtime names them, on a registry per operator.

Existing controller-runtime dashboards work unchanged: same metric names, label names and
histogram buckets (`metric_families`; `controller` and `name` carry the controller name, no
object names are ever label values). `cloudcoil_*` families add what controller-runtime lacks.
Each `OperatorMetrics` owns its `CollectorRegistry`, which never emits the `_created` series.
The series a reconciled object touches are `metric_cells`: `ControllerMetrics` and
`QueueMetricsRecorder` change them under their own lock in the one call that records them
(a prometheus_client `inc` or `observe` costs several Python calls more).
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import Metric

from cloudcoil_sync._compat.prometheus_client import registered
from cloudcoil_sync.controller._internal.metric_cells import (
    Cell,
    CellCounter,
    CellGauge,
    CellHistogram,
)
from cloudcoil_sync.controller._internal.metric_families import (
    FAMILIES,
    RECONCILE_TIME_BUCKETS,
    WORKQUEUE_BUCKETS,
)

__all__ = [
    "CONTENT_TYPE",
    "MASTER_STATUS",
    "RECONCILE_RESULTS",
    "RECONCILE_TIME_BUCKETS",
    "WORKQUEUE_BUCKETS",
    "ControllerMetrics",
    "ControllerStatus",
    "OperatorMetrics",
    "QueueMetricsRecorder",
    "WebhookMetrics",
    "master_status_gauge",
]

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

MASTER_STATUS = "leader_election_master_status"
_GAUGES: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()
_GAUGES_LOCK = threading.Lock()

RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")


@dataclass(frozen=True)
class ControllerStatus:
    """A snapshot of one controller; counts start at zero when the controller starts."""

    ready: bool
    queued: int
    processing: int
    delayed: int
    successes: int
    errors: int
    terminal_errors: int
    cancellations: int
    duration_seconds: float


class _Registry(CollectorRegistry):
    """A registry whose scrapes leave out the OpenMetrics `_created` samples."""

    def collect(self) -> Iterator[Metric]:
        for family in super().collect():
            created = family.name + "_created"
            if any(sample.name == created for sample in family.samples):
                trimmed = Metric(family.name, family.documentation, family.type, family.unit)
                trimmed.samples = [s for s in family.samples if s.name != created]
                yield trimmed
            else:
                yield family


class OperatorMetrics:
    """All collectors of one Application or Manager: one attribute per family of
    `FAMILIES`, and `leader_status` (`leader_election_master_status{name}`)."""

    reconcile_total: CellCounter
    reconcile_errors: CellCounter
    terminal_errors: CellCounter
    reconcile_timeouts: CellCounter
    reconcile_time: CellHistogram
    max_concurrent: Gauge
    active_workers: CellGauge
    invalid_objects: Counter
    fenced_passes: Counter
    pass_causes: CellCounter
    mapper_errors: Counter
    filtered_events: CellCounter
    object_threads: Gauge
    object_handler_errors: Counter
    queue_depth: Gauge
    queue_adds: CellCounter
    queue_retries: CellCounter
    queue_duration: CellHistogram
    work_duration: CellHistogram
    unfinished_work: Gauge
    longest_running: Gauge
    webhook_latency: Histogram
    webhook_requests: Counter
    webhook_in_flight: Gauge
    controller_ready: Gauge
    delayed_keys: Gauge
    manager_healthy: Gauge
    manager_ready: Gauge
    manager_informers: Gauge

    def __init__(self) -> None:
        self.registry: CollectorRegistry = _Registry(auto_describe=True)
        for attribute, family in FAMILIES.items():
            setattr(self, attribute, family.declare(self.registry))
        self.leader_status = master_status_gauge(self.registry)
        self._controllers: dict[str, ControllerMetrics] = {}

    def controller(self, name: str, *, workers: int) -> ControllerMetrics:
        """The metrics of one controller; its name must be unique in this registry."""
        if name in self._controllers:
            raise ValueError(f"Controller metric name {name!r} is already registered")
        metrics = ControllerMetrics(self, name, workers)
        self._controllers[name] = metrics
        return metrics

    def webhook(self, path: str) -> WebhookMetrics:
        """The metrics of one admission route (labelled by its path, as controller-runtime)."""
        return WebhookMetrics(self, path)

    def leader(self, name: str) -> Gauge:
        """The 0/1 gauge for the Lease `name`; starts at 0."""
        gauge = self.leader_status.labels(name=name)
        gauge.set(0)
        return gauge

    def manager(
        self,
        *,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        informers: Callable[[], int],
    ) -> None:
        """Read the manager's state at each scrape."""
        self.manager_healthy.set_function(lambda: float(healthy()))
        self.manager_ready.set_function(lambda: float(ready()))
        self.manager_informers.set_function(lambda: float(informers()))

    def render(self) -> bytes:
        """The Prometheus text exposition (content type `CONTENT_TYPE`)."""
        return generate_latest(self.registry)


class ControllerMetrics:
    """Series of one controller, pre-initialised as controller-runtime does."""

    def __init__(self, metrics: OperatorMetrics, name: str, workers: int) -> None:
        self.name = name
        self._metrics = metrics
        self._lock = lock = threading.Lock()  # guards this controller's cells
        self._totals = {
            result: metrics.reconcile_total.cell((name, result), lock)
            for result in RECONCILE_RESULTS
        }
        self._errors = metrics.reconcile_errors.cell((name,), lock)
        self._terminal = metrics.terminal_errors.cell((name,), lock)
        self._timeouts = metrics.reconcile_timeouts.cell((name,), lock)
        self._time = metrics.reconcile_time.cell((name,), lock)
        self._bounds = metrics.reconcile_time.bounds
        self._active = metrics.active_workers.cell((name,), lock)
        metrics.max_concurrent.labels(controller=name).set(workers)
        self.queue = QueueMetricsRecorder(metrics, name)
        self._causes: dict[str, Cell] = {}
        self._filters: dict[str, Cell] = {}

    def reconciled(self, result: str, seconds: float, *, terminal: bool = False) -> None:
        """Count one pass: `result` is success, error, requeue or requeue_after."""
        total = self._totals.get(result)
        if total is None:
            raise ValueError(f"Unknown reconcile result {result!r}")
        spent = self._time
        with self._lock:
            spent[bisect_left(self._bounds, seconds)] += 1
            spent[-1] += seconds
            total[0] += 1
            if result == "error":
                self._errors[0] += 1
                if terminal:
                    self._terminal[0] += 1

    def timed_out(self) -> None:
        with self._lock:
            self._timeouts[0] += 1

    def invalid(self, source: str) -> None:
        """An object the model rejects, read by a pass or a mapper."""
        self._metrics.invalid_objects.labels(controller=self.name, source=source).inc()

    def fenced(self, cause: str) -> None:
        """A pass's write refused by a closed fence (not a reconcile_timeout: `timed_out`)."""
        self._metrics.fenced_passes.labels(controller=self.name, cause=cause).inc()

    def caused(self, kind: str) -> None:
        """A pass ran for a cause of this kind (`causes.CAUSE_KINDS`)."""
        cell = self._causes.get(kind)
        if cell is None:
            family = self._metrics.pass_causes
            cell = self._causes[kind] = family.cell((self.name, kind), self._lock)
        with self._lock:
            cell[0] += 1

    def mapper_failed(self) -> None:
        self._metrics.mapper_errors.labels(controller=self.name).inc()

    def filtered(self, name: str) -> None:
        cell = self._filters.get(name)
        if cell is None:
            family = self._metrics.filtered_events
            cell = self._filters[name] = family.cell((self.name, name), self._lock)
        with self._lock:
            cell[0] += 1

    def object_threads(self, handler: str, change: int) -> None:
        self._metrics.object_threads.labels(controller=self.name, handler=handler).inc(change)

    def object_handler_failed(self, handler: str) -> None:
        self._metrics.object_handler_errors.labels(controller=self.name, handler=handler).inc()

    def worker_started(self) -> None:
        with self._lock:
            self._active[0] += 1

    def worker_finished(self) -> None:
        with self._lock:
            self._active[0] -= 1

    def bind(
        self,
        *,
        ready: Callable[[], bool],
        unfinished: Callable[[], float],
        longest: Callable[[], float],
        depth: Callable[[], int],
        delayed: Callable[[], int],
    ) -> None:
        """Read the controller's live state at each scrape (typically from its WorkQueue)."""
        m, name = self._metrics, self.name
        m.controller_ready.labels(controller=name).set_function(lambda: float(ready()))
        m.unfinished_work.labels(name=name, controller=name).set_function(unfinished)
        m.longest_running.labels(name=name, controller=name).set_function(longest)
        m.queue_depth.labels(priority="", name=name, controller=name).set_function(depth)
        m.delayed_keys.labels(controller=name).set_function(delayed)


class QueueMetricsRecorder:
    """`QueueMetrics` hooks for a WorkQueue, labelled name=controller=<controller name>."""

    def __init__(self, metrics: OperatorMetrics, name: str) -> None:
        self._lock = lock = threading.Lock()  # guards this queue's cells
        labels = {"name": name, "controller": name}
        self._adds = metrics.queue_adds.cell((name, name), lock)
        self._retries = metrics.queue_retries.cell((name, name), lock)
        self._queued = metrics.queue_duration.cell((name, name), lock)
        self._worked = metrics.work_duration.cell((name, name), lock)
        self._queue_bounds = metrics.queue_duration.bounds
        self._work_bounds = metrics.work_duration.bounds
        metrics.queue_depth.labels(priority="", **labels).set(0)
        metrics.delayed_keys.labels(controller=name).set(0)
        metrics.unfinished_work.labels(**labels).set(0)
        metrics.longest_running.labels(**labels).set(0)

    def added(self) -> None:
        with self._lock:
            self._adds[0] += 1

    def retried(self) -> None:
        with self._lock:
            self._retries[0] += 1

    def queued_for(self, seconds: float) -> None:
        queued = self._queued
        with self._lock:
            queued[bisect_left(self._queue_bounds, seconds)] += 1
            queued[-1] += seconds

    def worked_for(self, seconds: float) -> None:
        worked = self._worked
        with self._lock:
            worked[bisect_left(self._work_bounds, seconds)] += 1
            worked[-1] += seconds


class WebhookMetrics:
    """Latency, status codes and in-flight count of one admission route."""

    def __init__(self, metrics: OperatorMetrics, path: str) -> None:
        self._path = path
        self._requests = metrics.webhook_requests
        self._latency = metrics.webhook_latency.labels(webhook=path)
        self._in_flight = metrics.webhook_in_flight.labels(webhook=path)
        self._in_flight.set(0)

    def started(self) -> None:
        self._in_flight.inc()

    def finished(self, code: int, seconds: float) -> None:
        self._in_flight.dec()
        self._latency.observe(seconds)
        self._requests.labels(webhook=self._path, code=str(code)).inc()


def master_status_gauge(registry: CollectorRegistry) -> Gauge:
    """`leader_election_master_status{name}` in `registry`, declared once per registry."""
    with _GAUGES_LOCK:
        gauge = _GAUGES.get(registry)
        if gauge is None:
            try:
                gauge = Gauge(
                    MASTER_STATUS,
                    "Gauge of if the reporting system is master of the relevant lease, "
                    "0 indicates backup, 1 indicates master. 'name' is the string used to "
                    "identify the lease.",
                    ["name"],
                    registry=registry,
                )
            except ValueError:
                # Already declared in this registry (e.g. by the operator's metrics): share it.
                existing = registered(registry, MASTER_STATUS)
                if not isinstance(existing, Gauge):
                    raise
                gauge = existing
            _GAUGES[registry] = gauge
        return gauge
