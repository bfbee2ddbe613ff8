"""Run every benchmark; write bench/results.json, bench/results.md and bench/converge.png.

    python bench/run_all.py [--large] [--workers 4] [--skip client,admission,...]

`bench/client.py` and `bench/admission.py` print their own tables (kept verbatim in the
report); reconcile, memory and start-up return figures that go into the JSON and tables.
A default run takes a few minutes on 2 cores; ``--large`` adds N=20k to the reconcile runs.
With ``KUBECONFIG`` set, the reconcile runs use that cluster (``--emulator`` to keep the
emulator); the other steps need no API server or bring their own emulator.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory
import reconcile
import startup
from common import ROOT, machine

HERE = ROOT / "bench"
STEPS = ("client", "admission", "reconcile", "memory", "startup")


def note(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def script(name: str, *args: str) -> dict[str, Any]:
    """Run another author's benchmark script; keep its printed table."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(HERE / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        note(f"{name}.py failed ({out.returncode}): {out.stderr[-2000:]}")
    return {
        "returncode": out.returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "output": out.stdout,
    }


def plot(results: list[dict[str, Any]], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no plot"
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in reconcile.CONTENDERS:
        workers = results[0]["workers"] if results else 0  # the first worker count: every N
        points = sorted(
            (r["count"], r["converge_s"])
            for r in results
            if r["contender"] == name and r["workers"] == workers
        )
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("ConfigMaps (N)")
    ax.set_ylabel("time to converge (s)")
    ax.set_title("Reconcile N labelled ConfigMaps (same emulator, same workers)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    parts = [
        "# cloudcoil_sync benchmark results",
        "",
        f"{m['time']} · Python {m['python']} · {m['cpus']} CPUs · {m['platform']}",
        f"Load average before: {report['loadavg_before']} · after: {m['loadavg']} "
        "(the machine may be shared: read figures as relative).",
        "",
    ]
    if "reconcile" in report:
        rec = report["reconcile"]
        parts += [
            "## Reconcile N labelled ConfigMaps (cloudcoil_sync vs kopf vs raw floor)",
            "",
            f"API server: {rec.get('api_server', 'emulator')}.",
            "",
            "CPU s: the operator process's own CPU from its start-up mark (after imports) until "
            "converged and then idle. RSS: peak (VmHWM); RSS over imports: peak minus the RSS "
            "at the start-up mark (cloudcoil's imports include the cloudcoil-models-kubernetes "
            "package, ~78 MB on its own). p50/p99: event-to-reconcile latency after "
            "convergence. Ratios compare the same N and workers: row / floor and row / kopf "
            "(obj/s vs floor: floor's time / row's time). "
            f"N <= {reconcile.SHORT_N} converges in about a second: each such cell ran "
            f"{reconcile.SHORT_REPEATS} times in rotating order (converge times of every run "
            "in brackets) and its median run is shown.",
            "",
            reconcile.table(rec["results"]),
            "",
            "Growth (largest N / smallest N; per-object time and CPU, 1.0 = linear): "
            + "; ".join(
                f"{name} {g['from']}→{g['to']}: time/obj {g['time_per_object']}x, "
                f"CPU/obj {g['cpu_per_object']}x, peak RSS {g['peak_rss']}x"
                for name, g in rec.get("growth", {}).items()
            ),
            "",
        ]
        if report.get("plot"):
            parts += [f"![converge time vs N]({report['plot']})", ""]
    if "memory" in report:
        parts += [
            "## Informer memory per cached object",
            "",
            memory.table(report["memory"]["results"]),
            "",
            f"Growth: {json.dumps(report['memory']['growth'])}",
            "",
        ]
    if "startup" in report:
        parts += [
            "## Start-up: `manifests` vs importing the models",
            "",
            startup.table(report["startup"]["results"]),
            "",
        ]
    for name in ("client", "admission"):
        if name in report:
            parts += [
                f"## bench/{name}.py",
                "",
                "```",
                report[name]["output"].rstrip(),
                "```",
                "",
            ]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="reconcile also N=20000")
    parser.add_argument(
        "--workers", default="4,1,16", help="reconcile worker counts (the first also for 20k)"
    )
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--skip", default="", help=f"comma-separated, of {','.join(STEPS)}")
    parser.add_argument(
        "--emulator", action="store_true", help="reconcile on the emulator despite KUBECONFIG"
    )
    args = parser.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    report: dict[str, Any] = {"loadavg_before": machine()["loadavg"]}
    if "client" not in skip:
        note("client.py")
        report["client"] = script("client")
    if "admission" not in skip:
        note("admission.py")
        report["admission"] = script("admission")
    if "reconcile" not in skip:
        note("reconcile")
        workers = [int(w) for w in args.workers.split(",") if w]
        report["reconcile"] = reconcile.bench(
            [1000, 5000],
            workers,
            args.samples,
            list(reconcile.CONTENDERS),
            [20000] if args.large else [],
            kubeconfig=None if args.emulator else os.environ.get("KUBECONFIG") or None,
        )
        problem = plot(report["reconcile"]["results"], HERE / "converge.png")
        if problem:
            note(problem)
        else:
            report["plot"] = "converge.png"
    if "memory" not in skip:
        note("memory")
        report["memory"] = memory.bench([1000, 5000, 20000])
    if "startup" not in skip:
        note("startup")
        report["startup"] = startup.bench(7)
    report["machine"] = machine()
    (HERE / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    (HERE / "results.md").write_text(markdown(report))
    note("wrote bench/results.json and bench/results.md")
    print(markdown(report))


if __name__ == "__main__":
    main()
