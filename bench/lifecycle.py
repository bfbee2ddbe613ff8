"""Lifecycle: how fast a running operator reacts, and how often it wakes while idle.

An Application with one ConfigMap controller runs against the in-process emulator. Per run:
the time from `run` starting to `app.wait_ready` returning, from `stop.set()` to `run`
returning, and, while the operator idles for `--idle` seconds, the context switches of the
operator's own threads per second (wakeups: a polling supervisor wakes on every tick; the
emulator's threads are not counted). `--tree` measures another checkout of the package
(e.g. the main branch) with the same script, for a before/after table.

    python bench/lifecycle.py [--runs 5] [--idle 3] [--tree /path/to/checkout]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any


def switches(tids: set[int]) -> int:
    """Voluntary + involuntary context switches so far of the threads `tids` (native ids)."""
    total = 0
    for tid in tids:
        try:
            status = Path(f"/proc/self/task/{tid}/status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        for line in status.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total


def operator_threads(before: set[int | None]) -> set[int]:
    """Native ids of the threads started since `before`, minus the emulator's."""
    return {
        t.native_id
        for t in threading.enumerate()
        if t.ident not in before
        and t.native_id is not None
        and not t.name.startswith(("emulator", "Thread-"))
    }


def one_run(idle: float) -> dict[str, float]:
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.application import Application
    from cloudcoil_sync.testing import Emulator

    emulator = Emulator().start()
    try:
        app = Application("bench", namespace="default", config=emulator.config())
        configs = app.controller(ConfigMap)

        @configs.reconcile()
        def reconcile(config: ConfigMap) -> None:
            return None

        before: set[int | None] = {t.ident for t in threading.enumerate()}
        stop = threading.Event()
        runner = threading.Thread(target=app.run, kwargs={"stop": stop}, name="bench-run")
        started = time.perf_counter()
        runner.start()
        app.wait_ready(timeout=30)
        ready = time.perf_counter() - started
        names = operator_threads(before)
        count = switches(names)
        pause = threading.Event()
        pause.wait(idle)
        wakeups = (switches(names) - count) / idle
        stopping = time.perf_counter()
        stop.set()
        runner.join(30)
        stopped = time.perf_counter() - stopping
        if runner.is_alive():
            raise RuntimeError("run() did not return within 30 s of stop")
        return {"ready_s": ready, "stop_s": stopped, "idle_wakeups_per_s": wakeups}
    finally:
        emulator.stop()


def bench(runs: int, idle: float) -> dict[str, Any]:
    samples = [one_run(idle) for _ in range(runs + 1)][1:]  # the first warms imports
    return {
        key: round(statistics.median(s[key] for s in samples), 4)
        for key in ("ready_s", "stop_s", "idle_wakeups_per_s")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--tree", type=Path, help="measure the package in this checkout")
    args = parser.parse_args()
    if args.tree is not None:
        sys.path.insert(0, str(args.tree.resolve()))
    import cloudcoil_sync

    results = bench(args.runs, args.idle)
    results["package"] = str(Path(cloudcoil_sync.__file__).parent)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
