"""Memory of listing every object once, as the sharding coordinator's full round does: whole
objects cut down after decoding (before 2026-12-05) against metadata-only lists
(`ResourceClient.metadata`: PartialObjectMetadataList), at several page sizes.

    python bench/list_memory.py [--count 10000] [--pages 500,100] [--repeat 3]
                                [--kubeconfig PATH] [--json out.json]

Seeds `--count` labelled ConfigMaps (the benchmarks' ~400-byte objects; kube-apiserver adds
their managedFields) in a fresh namespace, then for each mode and page size starts a fresh
process that connects, lists one page of one object (the client's own floor), reads its RSS,
lists every object twice a page at a time keeping only each object's name (as a full round
keeps nothing of an object it does not move), and reports RSS over that floor after the lists
(what the process keeps: the coordinator's extra RSS in bench/sharding.py), its peak over the
floor (VmHWM) and the CPU seconds of the lists. Modes and page sizes alternate `--repeat`
times; medians are printed. Against a real cluster the namespace is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cluster import ClusterTarget
from common import LABEL, ROOT, EmulatorProcess, machine

MODES = ("whole", "metadata")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def probe(kubeconfig: str, namespace: str, mode: str, page: int) -> dict[str, Any]:
    """In this process: the floor, then two full lists; RSS and CPU figures in KB and s."""
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.client import Config

    config = Config.from_kubeconfig(kubeconfig, namespace=namespace)
    whole = config.client(ConfigMap, namespace=namespace).raw
    client = whole.metadata if mode == "metadata" else whole
    next(iter(client.pages(label_selector=f"{LABEL}=true", limit=1)))
    floor, floor_peak = _status_kb("VmRSS"), _status_kb("VmHWM")
    started = time.process_time()
    names = 0
    for _ in range(2):
        for listed in client.pages(label_selector=f"{LABEL}=true", limit=page):
            for obj in listed:
                kept = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
                names += bool(kept["metadata"].get("name"))
    cpu = time.process_time() - started
    config.close()
    return {
        "mode": mode,
        "page": page,
        "objects": names // 2,
        "rss_over_floor_kb": _status_kb("VmRSS") - floor,
        "peak_over_floor_kb": _status_kb("VmHWM") - max(floor, floor_peak),
        "cpu_s": round(cpu, 3),
    }


def _run_probe(kubeconfig: str, namespace: str, mode: str, page: int) -> dict[str, Any]:
    args = [sys.executable, __file__, "--probe", kubeconfig, namespace, mode, str(page)]
    out = subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _table(rows: list[dict[str, Any]], baseline: tuple[str, int]) -> list[str]:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["mode"], row["page"]), []).append(row)
    base = statistics.median(r["rss_over_floor_kb"] for r in groups[baseline])
    lines = [
        "| mode | page | objects | RSS kept over floor MB | x whole/500 | peak over floor MB | "
        "CPU s (2 lists) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (mode, page), runs in groups.items():
        kept = statistics.median(r["rss_over_floor_kb"] for r in runs)
        peak = statistics.median(r["peak_over_floor_kb"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        ratio = round(kept / base, 2) if base else "-"
        lines.append(
            f"| {mode} | {page} | {runs[0]['objects']} | {kept / 1024:.1f} | {ratio} | "
            f"{peak / 1024:.1f} | {cpu:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--pages", default="500,100")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kubeconfig", help="a real cluster instead of the emulator")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--probe", nargs=4, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.probe:
        kubeconfig, namespace, mode, page = opts.probe
        print(json.dumps(probe(kubeconfig, namespace, mode, int(page))), flush=True)
        return
    pages = [int(p) for p in opts.pages.split(",")]
    target: Any = ClusterTarget(opts.kubeconfig) if opts.kubeconfig else EmulatorProcess()
    namespace = f"list-memory-{int(time.time())}"
    rows: list[dict[str, Any]] = []
    try:
        target.seed(namespace, opts.count)
        kubeconfig = target.kubeconfig(namespace)
        for _ in range(opts.repeat):
            for mode in MODES:
                for page in pages:
                    rows.append(_run_probe(kubeconfig, namespace, mode, page))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        target.finish(namespace)
        target.close()
    where = f"kube-apiserver {target.version}" if opts.kubeconfig else "emulator"
    print(f"### {where}, {opts.count} objects, medians of {opts.repeat} ({machine()})\n")
    print("\n".join(_table(rows, ("whole", max(pages)))))
    if opts.json:
        Path(opts.json).write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
