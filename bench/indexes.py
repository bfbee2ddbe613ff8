"""Index look-up vs scan over N cached primaries, and the memory an index costs per entry.

In process (no API server): N ConfigMaps stand for the primaries, each referencing one of
N/5 "config" names through a label; the index files each under "<namespace>/<config>".
The mapper question is "which primaries use config X": through the index
(`CachedResources.keys`, the mapper's form; `list(index=...)`, models) and by a scan (what a
mapper had to do before: `list()` every cached model and filter, or filter the raw dicts).

    .venv/bin/python bench/indexes.py [N]

Prints one JSON line; record `uptime` beside it.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
import tracemalloc
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.controller._internal.cache import CachedResources
from cloudcoil_sync.controller._internal.indexes import Index, IndexValues
from cloudcoil_sync.controller._internal.store import Store


class _Informer:
    """What CachedResources reads of an informer: a synced store."""

    def __init__(self, store: Store) -> None:
        self.store, self.name, self.error, self.synced = store, "bench", None, True


def _config(cm: ConfigMap) -> str | None:
    labels = (cm.metadata and cm.metadata.labels) or {}
    return f"{cm.namespace}/{labels['config']}" if "config" in labels else None


def _objects(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"primary-{i}",
                "namespace": "bench",
                "uid": f"00000000-0000-0000-0000-{i:012d}",
                "resourceVersion": str(1000 + i),
                "labels": {"app": "bench", "config": f"config-{i % (count // 5)}"},
            },
            "data": {"key": "value" * 8},
        }
        for i in range(count)
    ]


def _timed(function: Any, repeat: int) -> float:
    """Median seconds of `repeat` calls."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main(count: int) -> dict[str, Any]:
    store = Store()
    store.replace(_objects(count))
    cached: CachedResources[ConfigMap] = CachedResources(ConfigMap, _Informer(store))  # type: ignore[arg-type]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    store.add_indexer("config", IndexValues(Index(ConfigMap, "config", _config)))
    build_seconds = time.perf_counter() - started
    gc.collect()
    index_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    wanted = "bench/config-7"

    def scan_models() -> list[str]:
        return [cm.name or "" for cm in cached.list() if _config(cm) == wanted]

    def scan_dicts() -> list[str]:
        return [
            o["metadata"]["name"]
            for o in store.list()
            if o["metadata"]["labels"].get("config") == "config-7"
        ]

    found = cached.keys(index="config", value=wanted)
    assert sorted(k.name for k in found) == sorted(scan_models()) == sorted(scan_dicts())
    return {
        "objects": count,
        "matches": len(found),
        "index_build_seconds": round(build_seconds, 3),
        "index_bytes": index_bytes,
        "bytes_per_entry": round(index_bytes / count, 1),
        "lookup_keys_ms": round(
            _timed(lambda: cached.keys(index="config", value=wanted), 200) * 1e3, 4
        ),
        "lookup_models_ms": round(
            _timed(lambda: cached.list(index="config", value=wanted), 200) * 1e3, 4
        ),
        "scan_dicts_ms": round(_timed(scan_dicts, 5) * 1e3, 2),
        "scan_models_ms": round(_timed(scan_models, 3) * 1e3, 2),
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)))
