import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cloudcoil_sync.controller._internal.metrics import (
    CONTENT_TYPE,
    RECONCILE_TIME_BUCKETS,
    WORKQUEUE_BUCKETS,
    OperatorMetrics,
)
from cloudcoil_sync.controller._internal.queue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scrape(metrics: OperatorMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(metrics: OperatorMetrics, metric: str, /, **labels: str) -> float:
    return scrape(metrics)[(metric, tuple(sorted(labels.items())))]


def test_controller_series_are_pre_initialised_with_controller_runtime_names() -> None:
    metrics = OperatorMetrics()
    metrics.controller("widgets", workers=4)
    text = metrics.render().decode()
    for result in ("success", "error", "requeue", "requeue_after"):
        assert (
            f'controller_runtime_reconcile_total{{controller="widgets",result="{result}"}} 0.0'
            in text
        )
    for line in (
        'controller_runtime_reconcile_errors_total{controller="widgets"} 0.0',
        'controller_runtime_terminal_reconcile_errors_total{controller="widgets"} 0.0',
        'controller_runtime_reconcile_timeouts_total{controller="widgets"} 0.0',
        'controller_runtime_max_concurrent_reconciles{controller="widgets"} 4.0',
        'controller_runtime_active_workers{controller="widgets"} 0.0',
        'workqueue_depth{controller="widgets",name="widgets",priority=""} 0.0',
        'workqueue_adds_total{controller="widgets",name="widgets"} 0.0',
        'workqueue_retries_total{controller="widgets",name="widgets"} 0.0',
        'workqueue_unfinished_work_seconds{controller="widgets",name="widgets"} 0.0',
        'workqueue_longest_running_processor_seconds{controller="widgets",name="widgets"} 0.0',
        'cloudcoil_controller_delayed_keys{controller="widgets"} 0.0',
    ):
        assert line in text
    assert "# TYPE controller_runtime_reconcile_time_seconds histogram" in text
    assert "# TYPE workqueue_queue_duration_seconds histogram" in text
    assert "_created" not in text


def test_histogram_buckets_match_controller_runtime() -> None:
    metrics = OperatorMetrics()
    controller = metrics.controller("c", workers=1)
    controller.reconciled("success", 0.2)
    controller.queue.queued_for(0.5)
    text = metrics.render().decode()
    reconcile_les = re.findall(
        r'controller_runtime_reconcile_time_seconds_bucket\{.*le="([^"]+)"', text
    )
    assert [float(le) for le in reconcile_les[:-1]] == list(RECONCILE_TIME_BUCKETS)
    assert len(RECONCILE_TIME_BUCKETS) == 40 and RECONCILE_TIME_BUCKETS[-1] == 60
    assert reconcile_les[-1] == "+Inf"
    queue_les = re.findall(r'workqueue_queue_duration_seconds_bucket\{.*le="([^"]+)"', text)
    assert queue_les[:-1] == [
        "1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001",
        "0.01", "0.1", "1.0", "10.0", "100.0", "1000.0",
    ]  # fmt: skip
    assert WORKQUEUE_BUCKETS[0] == pytest.approx(10e-9)


def test_reconcile_outcomes_count_like_controller_runtime() -> None:
    metrics = OperatorMetrics()
    controller = metrics.controller("c", workers=1)
    controller.reconciled("success", 0.01)
    controller.reconciled("requeue_after", 0.01)
    controller.reconciled("error", 0.01)
    controller.reconciled("error", 0.01, terminal=True)
    controller.timed_out()
    controller.worker_started()
    controller.worker_started()
    controller.worker_finished()
    assert value(metrics, "controller_runtime_reconcile_total", controller="c", result="error") == 2
    assert (
        value(metrics, "controller_runtime_reconcile_total", controller="c", result="success") == 1
    )
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="c") == 2
    assert value(metrics, "controller_runtime_terminal_reconcile_errors_total", controller="c") == 1
    assert value(metrics, "controller_runtime_reconcile_timeouts_total", controller="c") == 1
    assert value(metrics, "controller_runtime_reconcile_time_seconds_count", controller="c") == 4
    assert value(metrics, "controller_runtime_active_workers", controller="c") == 1
    with pytest.raises(ValueError, match="Unknown reconcile result 'weird'"):
        controller.reconciled("weird", 0)


def test_work_queue_feeds_the_workqueue_series() -> None:
    metrics = OperatorMetrics()
    controller = metrics.controller("c", workers=1)
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=controller.queue, jitter=0)
    controller.bind(
        ready=lambda: True,
        unfinished=queue.unfinished_work_seconds,
        longest=queue.longest_running_processor_seconds,
        depth=lambda: queue.pending,
        delayed=lambda: queue.delayed,
    )
    queue.add("a")
    queue.add("a")
    queue.add("b")
    queue.retry("x")
    labels = {"name": "c", "controller": "c"}
    assert value(metrics, "workqueue_adds_total", **labels) == 2
    assert value(metrics, "workqueue_retries_total", **labels) == 1
    assert value(metrics, "workqueue_depth", priority="", **labels) == 2
    assert value(metrics, "cloudcoil_controller_delayed_keys", controller="c") == 1
    clock.now = 0.25
    key = queue.get()
    clock.now = 2.25
    assert value(metrics, "workqueue_unfinished_work_seconds", **labels) == 2
    assert value(metrics, "workqueue_longest_running_processor_seconds", **labels) == 2
    assert value(metrics, "cloudcoil_controller_ready", controller="c") == 1
    queue.done(key)
    assert value(metrics, "workqueue_work_duration_seconds_count", **labels) == 1
    assert value(metrics, "workqueue_work_duration_seconds_sum", **labels) == 2
    assert value(metrics, "workqueue_queue_duration_seconds_sum", **labels) == 0.25
    # Sizes are read at the scrape: x's retry (1 s) fell due meanwhile, so it is pending.
    assert value(metrics, "workqueue_depth", priority="", **labels) == 2
    assert value(metrics, "cloudcoil_controller_delayed_keys", controller="c") == 0


def test_webhook_leader_and_manager_series() -> None:
    metrics = OperatorMetrics()
    hook = metrics.webhook("/validate/widgets")
    hook.started()
    assert (
        value(metrics, "controller_runtime_webhook_requests_in_flight", webhook="/validate/widgets")
        == 1
    )
    hook.finished(200, 0.003)
    hook.started()
    hook.finished(422, 0.001)
    assert (
        value(metrics, "controller_runtime_webhook_requests_in_flight", webhook="/validate/widgets")
        == 0
    )
    assert (
        value(
            metrics,
            "controller_runtime_webhook_requests_total",
            webhook="/validate/widgets",
            code="422",
        )
        == 1
    )
    assert (
        value(
            metrics, "controller_runtime_webhook_latency_seconds_count", webhook="/validate/widgets"
        )
        == 2
    )
    leader = metrics.leader("widgets")
    assert value(metrics, "leader_election_master_status", name="widgets") == 0
    leader.set(1)
    assert value(metrics, "leader_election_master_status", name="widgets") == 1
    state = {"ready": False}
    metrics.manager(healthy=lambda: True, ready=lambda: state["ready"], informers=lambda: 3)
    assert value(metrics, "cloudcoil_manager_ready") == 0
    state["ready"] = True
    assert value(metrics, "cloudcoil_manager_ready") == 1
    assert value(metrics, "cloudcoil_manager_healthy") == 1
    assert value(metrics, "cloudcoil_manager_informers") == 3


def test_registries_are_independent_and_names_unique() -> None:
    first, second = OperatorMetrics(), OperatorMetrics()
    first.controller("c", workers=1).reconciled("success", 0.1)
    second.controller("c", workers=1)
    assert (
        value(second, "controller_runtime_reconcile_total", controller="c", result="success") == 0
    )
    with pytest.raises(ValueError, match="'c' is already registered"):
        first.controller("c", workers=1)
    assert "process_cpu_seconds_total" not in first.render().decode()


def test_label_values_are_escaped_and_content_type_is_text_format() -> None:
    metrics = OperatorMetrics()
    metrics.controller('we"ird\\name\n', workers=1)
    text = metrics.render().decode()
    assert 'controller="we\\"ird\\\\name\\n"' in text
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
