"""The whole /metrics text of a scripted run, byte for byte, and exact totals under threads.

`data/metrics-golden.txt` was captured from the registry when every series was a
prometheus_client collector; the hot series now live in cells of our own, and a scrape must
not tell the difference (names, HELP/TYPE lines, labels, buckets, order, float formatting).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudcoil_sync.controller._internal.metrics import OperatorMetrics

GOLDEN = Path(__file__).parent / "data" / "metrics-golden.txt"

# Durations on, between, below and above the bucket bounds of both bucket sets.
SECONDS = (0.0, 1e-9, 1e-8, 2e-8, 0.004, 0.005, 0.0051, 0.1, 0.2, 0.30000000000000004)
SECONDS += (0.7, 1.0, 2.5, 9.99, 59.9, 60.0, 61.0, 999.0, 1000.0, 1234.5)


def scripted() -> OperatorMetrics:
    """Every kind of operation, on three controllers, a webhook, a Lease and the manager."""
    metrics = OperatorMetrics()
    widgets = metrics.controller("widgets", workers=4)
    gadgets = metrics.controller("gadgets", workers=1)
    metrics.controller('we"ird\\name\n', workers=2)  # pre-initialised series only
    results = ("success", "error", "requeue", "requeue_after")
    for i, seconds in enumerate(SECONDS):
        widgets.reconciled(results[i % 4], seconds, terminal=i % 8 == 1)
        widgets.queue.added()
        widgets.queue.queued_for(seconds / 3)
        widgets.queue.worked_for(seconds)
        widgets.caused(("added", "spec", "child", "mapped")[i % 3])
        if i % 5 == 0:
            widgets.queue.retried()
            gadgets.reconciled("success", seconds * 7)
            gadgets.queue.worked_for(seconds * 0.1)
    gadgets.caused("deleted")
    widgets.timed_out()
    widgets.invalid("pass")
    gadgets.invalid("mapper")
    widgets.fenced("timeout")
    widgets.fenced("leadership_lost")
    gadgets.mapper_failed()
    widgets.filtered("generation")
    widgets.filtered("generation")
    gadgets.filtered("labels,annotations")
    widgets.object_threads("watch_it", 3)
    widgets.object_threads("watch_it", -1)
    gadgets.object_handler_failed("tick")
    for _ in range(3):
        widgets.worker_started()
    widgets.worker_finished()
    gadgets.worker_started()
    widgets.bind(
        ready=lambda: True, unfinished=lambda: 1.5, longest=lambda: 0.75, depth=lambda: 4,
        delayed=lambda: 2,
    )  # fmt: skip
    hook = metrics.webhook("/validate/widgets")
    for code, seconds in ((200, 0.003), (422, 0.0001), (200, 12.5)):
        hook.started()
        hook.finished(code, seconds)
    hook.started()
    metrics.webhook("/mutate/widgets")
    metrics.leader("widgets-lease").set(1)
    metrics.leader("other-lease")
    metrics.manager(healthy=lambda: True, ready=lambda: False, informers=lambda: 5)
    return metrics


def test_a_scripted_run_renders_exactly_the_golden_text() -> None:
    assert scripted().render().decode() == GOLDEN.read_text()


@pytest.fixture
def racy() -> Iterator[None]:
    """Switch threads as often as possible, so that an unguarded `+=` loses increments."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.usefixtures("racy")
def test_no_increment_or_observation_is_lost_under_threads() -> None:
    metrics = OperatorMetrics()
    controller = metrics.controller("c", workers=8)
    threads, rounds, kinds = 8, 2000, 50
    start = threading.Barrier(threads + 1)
    done = threading.Event()
    scrapes: list[bytes] = []

    def work(thread: int) -> None:
        start.wait(10)
        for i in range(rounds):
            controller.worker_started()
            controller.caused("spec")
            controller.caused(f"kind-{thread}-{i % kinds}")  # series made during scrapes
            controller.queue.added()
            controller.queue.queued_for(0.5)
            controller.queue.worked_for(0.25)
            controller.reconciled("success", 0.125)
            controller.worker_finished()

    def scrape() -> None:
        start.wait(10)
        while not done.is_set():
            scrapes.append(metrics.render())

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    scraper = threading.Thread(target=scrape)
    for thread in [*pool, scraper]:
        thread.start()
    for thread in pool:
        thread.join(60)
    done.set()
    scraper.join(60)
    assert not any(thread.is_alive() for thread in [*pool, scraper])
    assert scrapes and all(b"controller_runtime_reconcile_total" in text for text in scrapes)
    n = float(threads * rounds)
    get = metrics.registry.get_sample_value
    c, q = {"controller": "c"}, {"controller": "c", "name": "c"}
    assert get("controller_runtime_reconcile_total", {**c, "result": "success"}) == n
    assert get("controller_runtime_reconcile_time_seconds_count", c) == n
    assert get("controller_runtime_reconcile_time_seconds_sum", c) == n * 0.125
    assert get("controller_runtime_reconcile_time_seconds_bucket", {**c, "le": "0.1"}) == 0
    assert get("controller_runtime_reconcile_time_seconds_bucket", {**c, "le": "0.15"}) == n
    assert get("cloudcoil_reconcile_causes_total", {**c, "cause": "spec"}) == n
    for thread in range(threads):
        for kind in range(kinds):
            cause = {**c, "cause": f"kind-{thread}-{kind}"}
            assert get("cloudcoil_reconcile_causes_total", cause) == rounds / kinds
    assert get("workqueue_adds_total", q) == n
    assert get("workqueue_queue_duration_seconds_count", q) == n
    assert get("workqueue_queue_duration_seconds_sum", q) == n * 0.5
    assert get("workqueue_work_duration_seconds_bucket", {**q, "le": "1.0"}) == n
    assert get("workqueue_work_duration_seconds_sum", q) == n * 0.25
    assert get("controller_runtime_active_workers", c) == 0
