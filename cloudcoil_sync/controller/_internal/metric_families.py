"""The metric families of one operator: names, help texts, label names and buckets.

controller-runtime's reconcile and webhook families and client-go's workqueue families are
named, labelled and bucketed as there, so that existing dashboards work unchanged; the
`cloudcoil_*` families add what controller-runtime lacks. The families a reconciled object
touches are `metric_cells` families (`Cell*`), the rest prometheus_client collectors.
"""

from __future__ import annotations

from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cloudcoil_sync.controller._internal.metric_cells import (
    CellCounter,
    CellFamily,
    CellGauge,
    CellHistogram,
)

__all__ = ["FAMILIES", "RECONCILE_TIME_BUCKETS", "WORKQUEUE_BUCKETS", "Family"]

# controller-runtime pkg/internal/controller/metrics: reconcile_time_seconds buckets.
RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
    0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)  # fmt: skip

# client-go workqueue and webhook latency: prometheus.ExponentialBuckets(10e-9, 10, 12).
WORKQUEUE_BUCKETS = tuple(float(f"1e{exponent}") for exponent in range(-8, 4))


class Family(NamedTuple):
    """One metric family: its type, name, help text, label names and histogram buckets."""

    type: type[Counter] | type[Gauge] | type[Histogram] | type[CellFamily]
    name: str
    help: str
    labels: tuple[str, ...] = ("controller",)
    buckets: tuple[float, ...] | None = None

    def declare(self, registry: CollectorRegistry) -> Counter | Gauge | Histogram | CellFamily:
        if self.buckets is None:
            return self.type(self.name, self.help, self.labels, registry=registry)
        histogram = CellHistogram if issubclass(self.type, CellFamily) else Histogram
        return histogram(self.name, self.help, self.labels, buckets=self.buckets, registry=registry)


_QUEUE = ("name", "controller")

#: The families of one operator, by the `OperatorMetrics` attribute that holds each:
#: controller-runtime's reconcile and webhook families, client-go's workqueue families
#: (per queue and controller), and the `cloudcoil_*` ones controller-runtime lacks.
FAMILIES = {
    "reconcile_total": Family(
        CellCounter,
        "controller_runtime_reconcile_total",
        "Total number of reconciliations per controller",
        ("controller", "result"),
    ),
    "reconcile_errors": Family(
        CellCounter,
        "controller_runtime_reconcile_errors_total",
        "Total number of reconciliation errors per controller",
    ),
    "terminal_errors": Family(
        CellCounter,
        "controller_runtime_terminal_reconcile_errors_total",
        "Total number of terminal reconciliation errors per controller",
    ),
    "reconcile_timeouts": Family(
        CellCounter,
        "controller_runtime_reconcile_timeouts_total",
        "Total number of reconciliation timeouts per controller",
    ),
    "reconcile_time": Family(
        CellHistogram,
        "controller_runtime_reconcile_time_seconds",
        "Length of time per reconciliation per controller",
        buckets=RECONCILE_TIME_BUCKETS,
    ),
    "max_concurrent": Family(
        Gauge,
        "controller_runtime_max_concurrent_reconciles",
        "Maximum number of concurrent reconciles per controller",
    ),
    "active_workers": Family(
        CellGauge,
        "controller_runtime_active_workers",
        "Number of currently used workers per controller",
    ),
    "invalid_objects": Family(
        Counter,
        "cloudcoil_invalid_objects_total",
        "Objects the model rejected, per controller and where they were read (pass, mapper)",
        ("controller", "source"),
    ),
    "fenced_passes": Family(
        Counter,
        "cloudcoil_fenced_passes_total",
        "Passes whose writes a closed write fence refused, per controller and cause "
        "(timeout, renew_deadline, leadership_lost, shutdown)",
        ("controller", "cause"),
    ),
    "pass_causes": Family(
        CellCounter,
        "cloudcoil_reconcile_causes_total",
        "Passes by why they ran (a pass with several causes counts once for each kind)",
        ("controller", "cause"),
    ),
    "mapper_errors": Family(
        Counter,
        "cloudcoil_mapper_errors_total",
        "Watch mapper calls that raised (the event was dropped), per controller",
    ),
    "object_threads": Family(
        Gauge,
        "cloudcoil_object_threads",
        "Running per-object daemon and timer threads, per controller and handler",
        ("controller", "handler"),
    ),
    "object_handler_errors": Family(
        Counter,
        "cloudcoil_object_handler_errors_total",
        "Daemon and timer calls that raised, per controller and handler",
        ("controller", "handler"),
    ),
    "filtered_events": Family(
        CellCounter,
        "cloudcoil_filtered_events_total",
        "Updates a controller's filters dropped (the passes they saved), per controller and filter",
        ("controller", "filter"),
    ),
    "queue_depth": Family(
        Gauge, "workqueue_depth", "Current depth of workqueue", ("name", "controller", "priority")
    ),
    "queue_adds": Family(
        CellCounter, "workqueue_adds_total", "Total number of adds handled by workqueue", _QUEUE
    ),
    "queue_retries": Family(
        CellCounter,
        "workqueue_retries_total",
        "Total number of retries handled by workqueue",
        _QUEUE,
    ),
    "queue_duration": Family(
        CellHistogram,
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        _QUEUE,
        WORKQUEUE_BUCKETS,
    ),
    "work_duration": Family(
        CellHistogram,
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes",
        _QUEUE,
        WORKQUEUE_BUCKETS,
    ),
    "unfinished_work": Family(
        Gauge,
        "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been "
        "observed by work_duration. Large values indicate stuck threads. One can deduce "
        "the number of stuck threads by observing the rate at which this increases.",
        _QUEUE,
    ),
    "longest_running": Family(
        Gauge,
        "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running",
        _QUEUE,
    ),
    "webhook_latency": Family(
        Histogram,
        "controller_runtime_webhook_latency_seconds",
        "Histogram of the latency of processing admission requests",
        ("webhook",),
        WORKQUEUE_BUCKETS,
    ),
    "webhook_requests": Family(
        Counter,
        "controller_runtime_webhook_requests_total",
        "Total number of admission requests by HTTP status code",
        ("webhook", "code"),
    ),
    "webhook_in_flight": Family(
        Gauge,
        "controller_runtime_webhook_requests_in_flight",
        "Current number of admission requests being served",
        ("webhook",),
    ),
    "controller_ready": Family(
        Gauge,
        "cloudcoil_controller_ready",
        "1 when the controller's informers are synced and its workers run",
    ),
    "delayed_keys": Family(
        Gauge,
        "cloudcoil_controller_delayed_keys",
        "Keys waiting for a retry or a scheduled requeue",
    ),
    "manager_healthy": Family(
        Gauge, "cloudcoil_manager_healthy", "1 while the manager runs without failure", ()
    ),
    "manager_ready": Family(
        Gauge,
        "cloudcoil_manager_ready",
        "1 when the manager leads (if electing) and every controller is ready",
        (),
    ),
    "manager_informers": Family(
        Gauge, "cloudcoil_manager_informers", "Informers the manager runs", ()
    ),
}
