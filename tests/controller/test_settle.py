"""`Workers.settle`: the one switch that turns a pass's `Outcome` into queue calls."""

from __future__ import annotations

from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.controller._internal.outcome import Outcome, OutcomeKind
from cloudcoil_sync.controller._internal.queue import WorkQueue
from cloudcoil_sync.controller._internal.reconciler import Reconciler
from cloudcoil_sync.controller._internal.types import ResourceKey
from cloudcoil_sync.controller._internal.workers import Workers

KEY = ResourceKey("k", "default")


def unused(*args: Any) -> Any:
    raise AssertionError("no pass runs in these tests")


@pytest.mark.parametrize(
    ("kind", "requeue_after", "retries", "due_in"),
    [
        ("success", None, 0, None),
        ("requeue_after", 5.0, 0, 5.0),
        ("terminal", None, 0, None),
        ("invalid", None, 0, None),
        ("error", None, 2, 2.0),
        ("fenced", None, 2, 2.0),
        ("timed_out", None, 2, 2.0),
        ("refused", 0.5, 1, 0.5),
        ("stale", 0.5, 1, 0.5),
    ],
)
def test_each_outcome_settles_the_key_once(
    kind: OutcomeKind, requeue_after: float | None, retries: int, due_in: float | None
) -> None:
    now = [100.0]
    queue: WorkQueue[ResourceKey] = WorkQueue(
        base_delay=1.0, max_delay=8.0, jitter=0.0, clock=lambda: now[0]
    )
    reconciler = Reconciler(ConfigMap, unused, lookup=unused, client=unused, name="settle")
    workers = Workers(reconciler, queue, workers=1)
    queue.add(KEY)
    assert queue.get(0) == KEY
    workers.settle(KEY, Outcome("error"))  # one failure first: its backoff count is 1
    now[0] += 1.0
    assert queue.get(0) == KEY
    workers.settle(KEY, Outcome(kind, requeue_after))
    assert queue.processing == 0  # released (done) exactly once
    assert queue.num_retries(KEY) == retries
    due = queue.due(KEY)
    assert (None if due is None else due - now[0]) == due_in
