"""Issue 41's must-shows on a real API server (KUBECONFIG): an index behind a mapper over N
primaries, and a daemon per object stopping after the objects' deletion.

    KUBECONFIG=... .venv/bin/python bench/scale_real.py index 10000
    KUBECONFIG=... .venv/bin/python bench/scale_real.py daemons 1000

`index`: N ConfigMaps labelled role=primary reference one of N/5 configs (label config=...);
a controller of the primaries indexes them by that label and watches the role=config
ConfigMaps; each config change runs the mapper, which answers through the index and, to
compare, by a scan of the cached primaries (the same answer). `daemons`: a daemon per
ConfigMap; every object is deleted (8 threads) and each daemon's stop is timed from the
moment its delete request was answered. Each run uses its own namespace (i41-...), deleted
at the end. One JSON line per run; record `uptime` beside it.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, ResourceKey
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime


def _namespace(config: Config, name: str) -> None:
    config.client(Namespace).raw.create({"metadata": {"name": name}})


def _parallel(function: Callable[[int], Any], count: int) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(function, range(count)))


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline, pause = time.monotonic() + timeout, threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        pause.wait(0.05)
    return True


def _ms(values: Iterable[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1e3, 3),
        "max_ms": round(ordered[-1] * 1e3, 3),
    }


def index(config: Config, namespace: str, count: int) -> dict[str, Any]:
    api = config.client(ConfigMap).raw
    configs = max(1, count // 5)
    _parallel(
        lambda i: api.create(
            {
                "metadata": {
                    "name": f"p-{i:05d}",
                    "labels": {"role": "primary", "config": f"c-{i % configs}"},
                }
            }
        ),
        count,
    )
    controller: Controller[ConfigMap] = Controller(
        ConfigMap, label_selector="role=primary", events=False, sync_timeout=300
    )
    controller.index(ConfigMap, "config", lambda cm: (cm.metadata.labels or {}).get("config"))
    looked, scanned = [], []

    @controller.watch(ConfigMap, label_selector="role=config")
    def users(cm: ConfigMap) -> Iterable[ResourceKey]:
        cached = controller.cached(ConfigMap)
        started = time.perf_counter()
        keys = cached.keys(index="config", value=cm.name or "")
        looked.append(time.perf_counter() - started)
        started = time.perf_counter()
        scan = [c for c in cached.list() if (c.metadata.labels or {}).get("config") == cm.name]
        scanned.append(time.perf_counter() - started)
        assert len(scan) == len(keys)
        return keys

    controller.reconcile()(lambda cm: None)
    runtime = ControllerRuntime(controller, config)
    runtime.start(wait=True)
    try:
        changes = 20
        for i in range(changes):
            api.create({"metadata": {"name": f"c-{i}", "labels": {"role": "config"}}})
        _wait(lambda: len(looked) >= changes, 600)
        return {
            "bench": "index",
            "primaries": count,
            "changes": len(looked),
            "lookup": _ms(looked),
            "scan": _ms(scanned),
        }
    finally:
        runtime.stop(timeout=10)


def daemons(config: Config, namespace: str, count: int) -> dict[str, Any]:
    api = config.client(ConfigMap).raw
    _parallel(lambda i: api.create({"metadata": {"name": f"d-{i:05d}"}}), count)
    controller: Controller[ConfigMap] = Controller(ConfigMap, events=False, sync_timeout=300)
    controller.max_object_threads = count + 10  # every object has its thread
    started: dict[str, float] = {}
    stopped: dict[str, float] = {}
    deleted: dict[str, float] = {}

    @controller.daemon()
    def follow(cm: ConfigMap, stop: threading.Event) -> None:
        started[cm.name or ""] = time.monotonic()
        stop.wait()
        stopped[cm.name or ""] = time.monotonic()

    controller.reconcile()(lambda cm: None)
    runtime = ControllerRuntime(controller, config)
    runtime.start(wait=True)
    try:
        names = [n for n in (f"d-{i:05d}" for i in range(count))]
        _wait(lambda: all(n in started for n in names), 300)
        running = runtime.daemons.running if runtime.daemons else 0

        def delete(i: int) -> None:
            api.delete(names[i])
            deleted[names[i]] = time.monotonic()

        began = time.monotonic()
        _parallel(delete, count)
        answered = time.monotonic() - began
        _wait(lambda: all(n in stopped for n in names), 120)
        late = [stopped[n] - deleted[n] for n in names if n in stopped]
        return {
            "bench": "daemons",
            "objects": count,
            "running_before": running,
            "deletes_seconds": round(answered, 2),
            "stopped": len(late),
            "stop_after_delete": _ms(max(0.0, x) for x in late),
        }
    finally:
        runtime.stop(timeout=10)


def main() -> None:
    mode, count = sys.argv[1], int(sys.argv[2])
    namespace = f"i41-{mode}-{int(time.time())}"
    config = Config.from_kubeconfig(None, None, namespace=namespace)
    _namespace(config, namespace)
    try:
        run = index if mode == "index" else daemons
        print(json.dumps(run(config, namespace, count)), flush=True)
    finally:
        config.client(Namespace).raw.delete(namespace)


if __name__ == "__main__":
    main()
