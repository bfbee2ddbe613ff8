"""CPU of one converged object by phase: a cloudcoil child of `reconcile.py` under py-spy.

    python bench/phases.py [--count 5000] [--workers 4] [--kubeconfig PATH] [--rate 250]
                           [--prefix ccb] [--raw out.txt] [--json out.json]

Seeds N labelled ConfigMaps on the cluster (as `reconcile.py` does), starts the cloudcoil
child, samples it with ``py-spy record --gil`` (Python CPU: samples holding the GIL) from
its start-up mark until it converged and went idle, and sorts every sample into the phase
of the hot path it belongs to (rules below, the first that matches a stack wins). Phase
ms/object = samples / rate / N. Install py-spy first (``pip install py-spy``; it needs
ptrace on the child). The child's total CPU (from /proc) is printed beside it: the
difference is CPU outside the GIL (TLS, socket calls, the kernel's share).
"""

from __future__ import annotations

import argparse
import json
import linecache
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine
from reconcile import Child, note, wait_converged, wait_idle

# (phase, frame pattern): a frame is "function (file:line)"; the first rule whose pattern
# matches any frame of a stack names its phase. Order matters: a watch read goes through
# requests and urllib3 too, so the watch comes before the write.
RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "start-up (leader election, discovery, informer start)",
        re.compile(r"(leader|lease|elector|discovery|application\.py|manager\.py)"),
    ),
    ("list (initial pages)", re.compile(r"_relist \(|pages \(.*(listwatch|api)\.py")),
    ("watch read (socket, TLS, chunks)", re.compile(r"_chunks \(.*watch\.py")),
    ("watch decode (orjson, event checks)", re.compile(r"_event \(.*watch\.py")),
    ("cache (store put/encode, decode old)", re.compile(r"(store\.py|_prepare \(|_apply \()")),
    ("triggers (status-only check, keys)", re.compile(r"triggers\.py")),
    ("model build (pydantic validate)", re.compile(r"model_validate|build \(.*invalid\.py")),
    ("diff (model_dump, JSON patch)", re.compile(r"patches\.py|persist\.py.*_status_json")),
    (
        "write (transport, HTTP, response parse)",
        re.compile(r"(transport\.py|requests/|urllib3/|http/client|ssl\.py|socket\.py|api\.py)"),
    ),
    (
        "handler (Request, user code, finalizers)",
        re.compile(
            r"(handling\.py|context\.py|finalizers\.py|stages\.py|definition\.py|child_cloudcoil)"
        ),
    ),
    ("metrics, events, logging", re.compile(r"(metrics\.py|prometheus_client|events\.py|logging)")),
    (
        "queue hand-off (queue, workers, settle)",
        re.compile(r"(queue\.py|workers\.py|threading\.py)"),
    ),
    ("pass bookkeeping (reconciler)", re.compile(r"reconciler\.py")),
]


def _frames(stack: str) -> list[str]:
    """`process;thread;f1 (file:line);...` -> frames, innermost last, with source hints."""
    frames = []
    for frame in stack.split(";"):
        match = re.match(r"(.*) \((.*):(\d+)\)$", frame)
        if match is not None:  # the source line tells a model build from a pass's own code
            line = linecache.getline(match.group(2), int(match.group(3))).strip()
            frame = f"{frame} {line}"
        frames.append(frame)
    return frames


def phase_of(stack: str) -> str:
    frames = _frames(stack)
    leaf = frames[-1] if frames else ""
    for phase, pattern in RULES:
        if phase.startswith("model build") and pattern.search(leaf):
            return phase  # the line being run builds a model (the C code has no frame)
    for phase, pattern in RULES:
        if any(pattern.search(frame) for frame in frames):
            return phase
    return "other"


def classify(raw: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[phase_of(stack)] += int(count)
    return counts


def profile(count: int, workers: int, kubeconfig: str, rate: int, raw_path: str | None) -> Any:
    from cluster import ClusterTarget

    target = ClusterTarget(kubeconfig)
    namespace = f"{os.environ.get('CC_BENCH_PREFIX', 'ccb')}-phases-{count}-w{workers}"
    note(f"seeding {count} objects in {namespace}")
    target.seed(namespace, count)
    out = raw_path or os.path.join(tempfile.mkdtemp(prefix="cc-phases-"), "raw.txt")
    try:
        child = Child(target, "cloudcoil", namespace, workers)
        spy = subprocess.Popen(
            [
                shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy"),
                "record",
                "-p",
                str(child.pid),
                "-f",
                "raw",
                "-o",
                out,
                "--gil",
                "--nonblocking",
                "-r",
                str(rate),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            converged = wait_converged(target, child, namespace, count)
            cpu, idle = wait_idle(child.pid, 30.0)
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
            child.stop()
        seconds = converged - child.started
    finally:
        target.finish(namespace)
        target.close()
    counts = classify(Path(out).read_text())
    total = sum(counts.values())
    return {
        "count": count,
        "workers": workers,
        "rate": rate,
        "converge_s": round(seconds, 2),
        "objects_per_s": round(count / seconds, 1),
        "cpu_total_s": round(cpu - child.import_cpu, 3),
        "cpu_ms_per_object": round((cpu - child.import_cpu) / count * 1e3, 3),
        "idle_reached": idle,
        "gil_samples": total,
        "phases_ms_per_object": {
            phase: round(n / rate / count * 1e3, 4) for phase, n in counts.most_common()
        },
        "phases_share": {phase: round(n / total, 3) for phase, n in counts.most_common()},
        "loadavg": machine()["loadavg"],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def table(result: dict[str, Any]) -> str:
    lines = ["| phase | ms CPU / object | share of GIL samples |", "|---|---:|---:|"]
    for phase, ms in result["phases_ms_per_object"].items():
        lines.append(f"| {phase} | {ms:.3f} | {result['phases_share'][phase]:.1%} |")
    gil = sum(result["phases_ms_per_object"].values())
    lines.append(f"| **all, holding the GIL** | {gil:.3f} | |")
    lines.append(f"| **process CPU (/proc)** | {result['cpu_ms_per_object']:.3f} | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--prefix", default="ccb")
    parser.add_argument("--leader-election", action="store_true")
    parser.add_argument("--raw", help="keep py-spy's raw stacks here")
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--classify", help="only classify this raw py-spy file")
    args = parser.parse_args()
    if args.classify:
        counts = classify(Path(args.classify).read_text())
        for phase, n in counts.most_common():
            print(f"{n:8d}  {phase}")
        return
    if not args.kubeconfig:
        raise SystemExit("phases.py measures on a real API server: give --kubeconfig")
    os.environ["CC_BENCH_PREFIX"] = args.prefix
    if args.leader_election:
        os.environ["CC_BENCH_LEADER"] = "1"
    result = profile(args.count, args.workers, args.kubeconfig, args.rate, args.raw)
    print(json.dumps(result, indent=2))
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
