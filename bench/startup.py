"""Start-up: ``python <seed example> manifests`` vs the model-import floor (SPEC §9).

Runs the commands alternately (so load from elsewhere hits all alike) and reports the
median wall time and CPU seconds (user + system, from the child's rusage) of each, and
their ratios. The commands: the seed example's ``manifests`` and ``--help``; the floor,
``python -c "import cloudcoil.models.kubernetes.core.v1"`` (the typed models every operator
on cloudcoil imports, validators built at import); the same import after ``import
cloudcoil_sync`` (their builds deferred to first use, as the seed example imports them).

    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, machine

EXAMPLE = ROOT / "examples" / "settings_operator.py"
COMMANDS = {
    "manifests": [sys.executable, str(EXAMPLE), "manifests"],
    "--help": [sys.executable, str(EXAMPLE), "--help"],
    "models import": [sys.executable, "-c", "import cloudcoil.models.kubernetes.core.v1"],
    # The models' own floor once cloudcoil_sync is imported first (their builds deferred).
    "models import after cloudcoil_sync": [
        sys.executable,
        "-c",
        "import cloudcoil_sync; import cloudcoil.models.kubernetes.core.v1",
    ],
}


def measure(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (bytes) of one run."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def bench(runs: int) -> dict[str, Any]:
    samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():  # warm the page cache and .pyc files
        measure(command)
    for _ in range(runs):
        for name, command in COMMANDS.items():
            samples[name].append(measure(command))
    results: dict[str, Any] = {}
    for name, values in samples.items():
        walls, cpus, rss = zip(*values, strict=True)
        results[name] = {
            "wall_s": round(statistics.median(walls), 3),
            "cpu_s": round(statistics.median(cpus), 3),
            "peak_rss_mb": round(statistics.median(rss) / 2**20, 1),
        }
    ours, floor = results["manifests"], results["models import"]
    results["ratio"] = {
        "wall": round(ours["wall_s"] / floor["wall_s"], 2),
        "cpu": round(ours["cpu_s"] / floor["cpu_s"], 2),
    }
    return {"machine": machine(), "runs": runs, "results": results}


def table(results: dict[str, Any]) -> str:
    lines = [
        "| command | median wall s | median CPU s | peak RSS MB |",
        "|---|---:|---:|---:|",
    ]
    for name in COMMANDS:
        r = results[name]
        lines.append(f"| {name} | {r['wall_s']} | {r['cpu_s']} | {r['peak_rss_mb']} |")
    ratio = results["ratio"]
    lines.append(f"| manifests / import | {ratio['wall']}x | {ratio['cpu']}x | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    report = bench(args.runs)
    print(table(report["results"]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
