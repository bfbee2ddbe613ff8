"""Informer memory per cached object vs the object's raw JSON size (SPEC §9).

For each N (default 1k, 5k, 20k) a fresh child process syncs one ConfigMap informer
(the `Informer` of `cloudcoil_sync.controller._internal.informer`) against the emulator process
and reports: RSS growth from before the informer started to after it synced (gc'd), the
store's own size (its dict, keys and JSON bytes), the objects' JSON size as served (with
managedFields) and as cached (without), and, for comparison, what the same objects would
cost as parsed dicts (tracemalloc).

    python bench/memory.py [--counts 1000,5000,20000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LABEL, EmulatorProcess, machine


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _deep_store_size(store: Any) -> int:
    """The store's dict, its key tuples and strings, and the JSON bytes it holds."""
    total = sys.getsizeof(store._objects)
    for key, data in store._objects.items():
        total += sys.getsizeof(key) + sum(sys.getsizeof(part) for part in key)
        total += sys.getsizeof(data)
    return total


def child(namespace: str) -> None:
    import requests
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.informer import ClientListWatch, Informer

    url, token, ca = os.environ["BENCH_URL"], os.environ["BENCH_TOKEN"], os.environ["BENCH_CA"]
    config = Config(url, token=token, ca_file=ca, namespace=namespace)
    source = ClientListWatch(
        config.client(ConfigMap), namespace=namespace, label_selector=f"{LABEL}=true"
    )
    informer = Informer(source, name="bench")
    config.client(ConfigMap).raw.list(namespace=namespace, limit=1)  # TLS set up before
    gc.collect()
    before = _rss()
    started = time.perf_counter()
    informer.start()
    if not informer.wait_synced(300):
        raise SystemExit("informer did not sync")
    sync_s = time.perf_counter() - started
    gc.collect()
    after = _rss()
    count = len(informer.store)
    store_bytes = _deep_store_size(informer.store)
    informer.stop()
    del informer
    gc.collect()
    # Again under tracemalloc: the Python heap the cache keeps, and the sync's transient peak.
    informer = Informer(source, name="bench-traced")
    tracemalloc.start()
    informer.start()
    if not informer.wait_synced(300):
        raise SystemExit("informer did not sync")
    gc.collect()
    heap_kept, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    informer.stop()

    # The objects as the server sends them, for the raw JSON sizes and the dict comparison.
    listed = requests.get(
        f"{url}/api/v1/namespaces/{namespace}/configmaps",
        headers={"Authorization": f"Bearer {token}"},
        params={"labelSelector": f"{LABEL}=true"},
        verify=ca,
        timeout=120,
    ).json()["items"]
    compact = [json.dumps(o, separators=(",", ":")) for o in listed]
    raw = sum(len(text.encode()) for text in compact)
    for obj in listed:
        obj["metadata"].pop("managedFields", None)
    stripped = [json.dumps(o, separators=(",", ":")) for o in listed]
    cached = sum(len(text.encode()) for text in stripped)
    del listed, compact
    gc.collect()
    tracemalloc.start()
    dicts = [json.loads(text) for text in stripped]
    dict_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del dicts
    print(
        json.dumps(
            {
                "count": count,
                "sync_s": round(sync_s, 3),
                "rss_delta_mb": round((after - before) / 2**20, 2),
                "rss_per_object_kb": round((after - before) / count / 1024, 2),
                "heap_per_object_kb": round(heap_kept / count / 1024, 2),
                "heap_peak_mb": round(heap_peak / 2**20, 2),
                "store_per_object_kb": round(store_bytes / count / 1024, 2),
                "raw_json_per_object_kb": round(raw / count / 1024, 2),
                "cached_json_per_object_kb": round(cached / count / 1024, 2),
                "dict_per_object_kb": round(dict_bytes / count / 1024, 2),
                "rss_vs_raw_json": round((after - before) / raw, 2),
                "heap_vs_raw_json": round(heap_kept / raw, 2),
                "store_vs_raw_json": round(store_bytes / raw, 2),
                "rss_total_mb": round(after / 2**20, 1),
            }
        ),
        flush=True,
    )
    config.close()


def bench(counts: list[int]) -> dict[str, Any]:
    results = []
    with EmulatorProcess() as emu:
        for count in counts:
            namespace = f"memory-{count}"
            emu.seed(namespace, count)
            env = dict(os.environ, BENCH_URL=emu.url, BENCH_TOKEN=emu.token, BENCH_CA=emu.ca_file)
            out = subprocess.run(
                [sys.executable, __file__, "--child", namespace],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if out.returncode != 0:
                raise RuntimeError(f"memory child failed:\n{out.stderr[-3000:]}")
            result = json.loads(out.stdout.strip().splitlines()[-1])
            result["loadavg_1m"] = round(os.getloadavg()[0], 2)
            print(json.dumps(result), flush=True)
            results.append(result)
    if len(results) > 1:
        first, last = results[0], results[-1]
        growth = {
            "from": first["count"],
            "to": last["count"],
            "heap_per_object_ratio": round(
                last["heap_per_object_kb"] / first["heap_per_object_kb"], 2
            ),
            "rss_per_object_ratio": round(
                last["rss_per_object_kb"] / first["rss_per_object_kb"], 2
            ),
        }
    else:
        growth = {}
    return {"machine": machine(), "results": results, "growth": growth}


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| N | sync s | RSS delta MB | RSS/obj KB | heap kept/obj KB | store/obj KB"
        " | raw JSON/obj KB | cached JSON/obj KB | as dicts/obj KB | heap / raw JSON"
        " | sync heap peak MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['count']} | {r['sync_s']} | {r['rss_delta_mb']} | {r['rss_per_object_kb']} "
            f"| {r['heap_per_object_kb']} | {r['store_per_object_kb']} "
            f"| {r['raw_json_per_object_kb']} "
            f"| {r['cached_json_per_object_kb']} | {r['dict_per_object_kb']} "
            f"| {r['heap_vs_raw_json']} | {r['heap_peak_mb']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,5000,20000")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    report = bench([int(c) for c in args.counts.split(",") if c])
    print(table(report["results"]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
