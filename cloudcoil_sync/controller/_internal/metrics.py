"""Prometheus metrics named as controller-runtime names them, on a registry per operator.

Existing controller-runtime dashboards work unchanged: same metric names, label names and
histogram buckets (`controller` and `name` carry the controller name; no object names are
ever label values). `cloudcoil_*` gauges add what controller-runtime lacks. Each
`OperatorMetrics` owns its `CollectorRegistry`, which never emits the `_created` series.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import Metric

from cloudcoil_sync._compat.prometheus_client import registered

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

# controller-runtime pkg/internal/controller/metrics: reconcile_time_seconds buckets.
RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
    0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)  # fmt: skip

# client-go workqueue and webhook latency: prometheus.ExponentialBuckets(10e-9, 10, 12).
WORKQUEUE_BUCKETS = tuple(float(f"1e{exponent}") for exponent in range(-8, 4))


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


class _Family(NamedTuple):
    """One metric family: its type, name, help text, label names and histogram buckets."""

    type: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    help: str
    labels: tuple[str, ...] = ("controller",)
    buckets: tuple[float, ...] | None = None

    def declare(self, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
        if self.buckets is None:
            return self.type(self.name, self.help, self.labels, registry=registry)
        return Histogram(self.name, self.help, self.labels, buckets=self.buckets, registry=registry)


_QUEUE = ("name", "controller")

#: The families of one operator, by the `OperatorMetrics` attribute that holds each:
#: controller-runtime's reconcile and webhook families, client-go's workqueue families
#: (per queue and controller), and the `cloudcoil_*` ones controller-runtime lacks.
FAMILIES = {
    "reconcile_total": _Family(
        Counter,
        "controller_runtime_reconcile_total",
        "Total number of reconciliations per controller",
        ("controller", "result"),
    ),
    "reconcile_errors": _Family(
        Counter,
        "controller_runtime_reconcile_errors_total",
        "Total number of reconciliation errors per controller",
    ),
    "terminal_errors": _Family(
        Counter,
        "controller_runtime_terminal_reconcile_errors_total",
        "Total number of terminal reconciliation errors per controller",
    ),
    "reconcile_timeouts": _Family(
        Counter,
        "controller_runtime_reconcile_timeouts_total",
        "Total number of reconciliation timeouts per controller",
    ),
    "reconcile_time": _Family(
        Histogram,
        "controller_runtime_reconcile_time_seconds",
        "Length of time per reconciliation per controller",
        buckets=RECONCILE_TIME_BUCKETS,
    ),
    "max_concurrent": _Family(
        Gauge,
        "controller_runtime_max_concurrent_reconciles",
        "Maximum number of concurrent reconciles per controller",
    ),
    "active_workers": _Family(
        Gauge,
        "controller_runtime_active_workers",
        "Number of currently used workers per controller",
    ),
    "invalid_objects": _Family(
        Counter,
        "cloudcoil_invalid_objects_total",
        "Objects the model rejected, per controller and where they were read (pass, mapper)",
        ("controller", "source"),
    ),
    "fenced_passes": _Family(
        Counter,
        "cloudcoil_fenced_passes_total",
        "Passes whose writes a closed write fence refused, per controller and cause "
        "(timeout, renew_deadline, leadership_lost, shutdown)",
        ("controller", "cause"),
    ),
    "pass_causes": _Family(
        Counter,
        "cloudcoil_reconcile_causes_total",
        "Passes by why they ran (a pass with several causes counts once for each kind)",
        ("controller", "cause"),
    ),
    "mapper_errors": _Family(
        Counter,
        "cloudcoil_mapper_errors_total",
        "Watch mapper calls that raised (the event was dropped), per controller",
    ),
    "object_threads": _Family(
        Gauge,
        "cloudcoil_object_threads",
        "Running per-object daemon and timer threads, per controller and handler",
        ("controller", "handler"),
    ),
    "object_handler_errors": _Family(
        Counter,
        "cloudcoil_object_handler_errors_total",
        "Daemon and timer calls that raised, per controller and handler",
        ("controller", "handler"),
    ),
    "filtered_events": _Family(
        Counter,
        "cloudcoil_filtered_events_total",
        "Updates a controller's filters dropped (the passes they saved), per controller and filter",
        ("controller", "filter"),
    ),
    "queue_depth": _Family(
        Gauge, "workqueue_depth", "Current depth of workqueue", ("name", "controller", "priority")
    ),
    "queue_adds": _Family(
        Counter, "workqueue_adds_total", "Total number of adds handled by workqueue", _QUEUE
    ),
    "queue_retries": _Family(
        Counter, "workqueue_retries_total", "Total number of retries handled by workqueue", _QUEUE
    ),
    "queue_duration": _Family(
        Histogram,
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        _QUEUE,
        WORKQUEUE_BUCKETS,
    ),
    "work_duration": _Family(
        Histogram,
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes",
        _QUEUE,
        WORKQUEUE_BUCKETS,
    ),
    "unfinished_work": _Family(
        Gauge,
        "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been "
        "observed by work_duration. Large values indicate stuck threads. One can deduce "
        "the number of stuck threads by observing the rate at which this increases.",
        _QUEUE,
    ),
    "longest_running": _Family(
        Gauge,
        "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running",
        _QUEUE,
    ),
    "webhook_latency": _Family(
        Histogram,
        "controller_runtime_webhook_latency_seconds",
        "Histogram of the latency of processing admission requests",
        ("webhook",),
        WORKQUEUE_BUCKETS,
    ),
    "webhook_requests": _Family(
        Counter,
        "controller_runtime_webhook_requests_total",
        "Total number of admission requests by HTTP status code",
        ("webhook", "code"),
    ),
    "webhook_in_flight": _Family(
        Gauge,
        "controller_runtime_webhook_requests_in_flight",
        "Current number of admission requests being served",
        ("webhook",),
    ),
    "controller_ready": _Family(
        Gauge,
        "cloudcoil_controller_ready",
        "1 when the controller's informers are synced and its workers run",
    ),
    "delayed_keys": _Family(
        Gauge,
        "cloudcoil_controller_delayed_keys",
        "Keys waiting for a retry or a scheduled requeue",
    ),
    "manager_healthy": _Family(
        Gauge, "cloudcoil_manager_healthy", "1 while the manager runs without failure", ()
    ),
    "manager_ready": _Family(
        Gauge,
        "cloudcoil_manager_ready",
        "1 when the manager leads (if electing) and every controller is ready",
        (),
    ),
    "manager_informers": _Family(
        Gauge, "cloudcoil_manager_informers", "Informers the manager runs", ()
    ),
}


class OperatorMetrics:
    """All collectors of one Application or Manager: one attribute per family of
    `FAMILIES`, and `leader_status` (`leader_election_master_status{name}`)."""

    reconcile_total: Counter
    reconcile_errors: Counter
    terminal_errors: Counter
    reconcile_timeouts: Counter
    reconcile_time: Histogram
    max_concurrent: Gauge
    active_workers: Gauge
    invalid_objects: Counter
    fenced_passes: Counter
    pass_causes: Counter
    mapper_errors: Counter
    filtered_events: Counter
    object_threads: Gauge
    object_handler_errors: Counter
    queue_depth: Gauge
    queue_adds: Counter
    queue_retries: Counter
    queue_duration: Histogram
    work_duration: Histogram
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
        for result in RECONCILE_RESULTS:
            metrics.reconcile_total.labels(controller=name, result=result).inc(0)
        self._totals = {
            result: metrics.reconcile_total.labels(controller=name, result=result)
            for result in RECONCILE_RESULTS
        }
        self._errors = metrics.reconcile_errors.labels(controller=name)
        self._terminal = metrics.terminal_errors.labels(controller=name)
        self._timeouts = metrics.reconcile_timeouts.labels(controller=name)
        self._time = metrics.reconcile_time.labels(controller=name)
        self._active = metrics.active_workers.labels(controller=name)
        for child in (self._errors, self._terminal, self._timeouts):
            child.inc(0)
        self._active.set(0)
        metrics.max_concurrent.labels(controller=name).set(workers)
        self.queue = QueueMetricsRecorder(metrics, name)
        self._causes: dict[str, Counter] = {}

    def reconciled(self, result: str, seconds: float, *, terminal: bool = False) -> None:
        """Count one pass: `result` is success, error, requeue or requeue_after."""
        if result not in self._totals:
            raise ValueError(f"Unknown reconcile result {result!r}")
        self._time.observe(seconds)
        self._totals[result].inc()
        if result == "error":
            self._errors.inc()
            if terminal:
                self._terminal.inc()

    def timed_out(self) -> None:
        self._timeouts.inc()

    def invalid(self, source: str) -> None:
        """An object the model rejects, read by a pass or a mapper."""
        self._metrics.invalid_objects.labels(controller=self.name, source=source).inc()

    def fenced(self, cause: str) -> None:
        """A pass's write refused by a closed fence (not a reconcile_timeout: `timed_out`)."""
        self._metrics.fenced_passes.labels(controller=self.name, cause=cause).inc()

    def caused(self, kind: str) -> None:
        """A pass ran for a cause of this kind (`causes.CAUSE_KINDS`)."""
        child = self._causes.get(kind)
        if child is None:
            child = self._causes[kind] = self._metrics.pass_causes.labels(self.name, kind)
        child.inc()

    def mapper_failed(self) -> None:
        self._metrics.mapper_errors.labels(controller=self.name).inc()

    def filtered(self, name: str) -> None:
        self._metrics.filtered_events.labels(controller=self.name, filter=name).inc()

    def object_threads(self, handler: str, change: int) -> None:
        self._metrics.object_threads.labels(controller=self.name, handler=handler).inc(change)

    def object_handler_failed(self, handler: str) -> None:
        self._metrics.object_handler_errors.labels(controller=self.name, handler=handler).inc()

    def worker_started(self) -> None:
        self._active.inc()

    def worker_finished(self) -> None:
        self._active.dec()

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
        labels = {"name": name, "controller": name}
        self._adds = metrics.queue_adds.labels(**labels)
        self._retries = metrics.queue_retries.labels(**labels)
        self._queued = metrics.queue_duration.labels(**labels)
        self._worked = metrics.work_duration.labels(**labels)
        metrics.queue_depth.labels(priority="", **labels).set(0)
        metrics.delayed_keys.labels(controller=name).set(0)
        self._adds.inc(0)
        self._retries.inc(0)
        metrics.unfinished_work.labels(**labels).set(0)
        metrics.longest_running.labels(**labels).set(0)

    def added(self) -> None:
        self._adds.inc()

    def retried(self) -> None:
        self._retries.inc()

    def queued_for(self, seconds: float) -> None:
        self._queued.observe(seconds)

    def worked_for(self, seconds: float) -> None:
        self._worked.observe(seconds)


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
