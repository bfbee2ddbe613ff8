"""CPU cost of causes and the pass scope (issue 42), per reconciled object, in process.

The real-server A/B (bench/reconcile.py, main vs the branch) is dominated by noise on a loaded
2-core machine (±15 % between runs of one side). This measures the added work itself, with
`time.process_time`, on the path one object of the reconcile benchmark takes: its ConfigMap
update event (`Triggers.primary_update`: the status-only check and the changed paths), two
queue adds with a cause and their hand-over (`WorkQueue.add/get/causes/done`) against the same
without a cause, and two pass scopes (`PassScopes.enter/exit`: pass id, log fields, the
cause counter, tracing off; the reconciler's lazy `changes` hook). The sum is compared with
the benchmark's CPU per object.

    python bench/observability_overhead.py [--rounds 20000] [--cpu-ms-per-object 1.4]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cloudcoil_sync.controller._internal.causes import Cause, primary_causes
from cloudcoil_sync.controller._internal.changes import ChangeTracker
from cloudcoil_sync.controller._internal.logcontext import PassScopes, current
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.queue import WorkQueue
from cloudcoil_sync.controller._internal.triggers import status_only_change
from cloudcoil_sync.controller._internal.types import ResourceKey


def configmap(version: str, managed: bool) -> dict[str, object]:
    data = {f"key-{i}": "x" * 40 for i in range(8)}
    if managed:
        data["managed-by"] = "cloudcoil"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "cm-1",
            "namespace": "bench",
            "uid": "2f0c1f3e-0000-4000-8000-000000000001",
            "resourceVersion": version,
            "labels": {"bench": "yes"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "data": data,
    }


def cpu_us(rounds: int, work: Callable[[], None]) -> float:
    """CPU microseconds per call of `work` (best of 5 batches)."""
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(rounds):
            work()
        best = min(best, time.process_time() - start)
    return best / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument(
        "--cpu-ms-per-object", type=float, default=1.4, help="the reconcile bench's figure"
    )
    args = parser.parse_args()
    old, new = configmap("1", False), configmap("2", True)
    key = ResourceKey("cm-1", "bench")
    cause = Cause("fields", ("data.managed-by",))
    metrics = OperatorMetrics().controller("bench", workers=4)
    scopes = PassScopes("bench", "ConfigMap", metrics.caused)
    plain: WorkQueue[ResourceKey] = WorkQueue()
    caused: WorkQueue[ResourceKey] = WorkQueue()

    def without_cause() -> None:
        plain.add(key)
        plain.get()
        plain.done(key)

    def with_cause() -> None:
        caused.add(key, cause)
        caused.get()
        caused.causes(key)
        caused.done(key)

    tracker = ChangeTracker()

    def scope() -> None:  # as Workers and Reconciler.reconcile use it
        opened = scopes.enter(key, (cause,))
        info = current()
        assert info is not None
        info.changes = functools.partial(tracker.changes, key, b"{}")
        _ = tracker.wanted
        opened.exit("success")

    event_before = cpu_us(args.rounds, lambda: status_only_change(old, new))
    event_after = cpu_us(
        args.rounds, lambda: (status_only_change(old, new), primary_causes(old, new))
    )
    queue_before = cpu_us(args.rounds, without_cause)
    queue_after = cpu_us(args.rounds, with_cause)
    pass_scope = cpu_us(args.rounds, scope)
    # Per object: one update event, two passes (the write, then its echo), two adds.
    added = (event_after - event_before) + 2 * (queue_after - queue_before) + 2 * pass_scope
    share = added / (args.cpu_ms_per_object * 1000) * 100
    print(f"update event: {event_before:.1f} -> {event_after:.1f} us (causes: paths diffed)")
    print(f"queue add+get+done: {queue_before:.1f} -> {queue_after:.1f} us (with a cause)")
    print(f"pass scope (enter+exit, tracing off): {pass_scope:.1f} us")
    print(
        f"added per object: {added:.1f} us = {share:.2f} % of "
        f"{args.cpu_ms_per_object:g} ms CPU per object; load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
