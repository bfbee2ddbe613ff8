"""Python function calls per reconciled object: a measure of the operator's work that does
not move with the machine's load (CPU time on a shared 2-core VM moved ±25 % between runs of
one tree; a call count does not move at all).

Seeds N labelled ConfigMaps, runs `reconcile.py`'s cloudcoil child under a profile hook that
counts every Python call and every C call on every thread (``sys.setprofile`` and
``threading.setprofile``) from its start-up mark until it is stopped after convergence (the
idle phase included), then prints calls per object by library and the busiest functions.
A run is ~5x slower than without the hook; the counts are what compare. One-off costs after
the mark are spread over N: compare two trees at the same N. (This session's figures in
bench/results-real.md, 1,100 → 903 Python calls per object at N = 2,000, were counted from
the process start, imports included; counted from the mark as here, far fewer.)

    python bench/calls.py [--count 2000] [--kubeconfig PATH | (emulator)] [--json out.json]
                          [--top 40] [--leader-election]

Against a real cluster set ``KUBECONFIG`` (or ``--kubeconfig``). ``PYTHONPATH`` picks the tree
measured, so two trees compare with the same command.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

Key = tuple[str, int, str]


def child(namespace: str, out: str) -> None:
    """The cloudcoil child of reconcile.py, every call counted; the counts written at exit."""
    import reconcile

    counts: collections.Counter[Key] = collections.Counter()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            counts[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
        elif event == "c_call":
            counts[("C", 0, getattr(arg, "__qualname__", repr(arg)))] += 1

    mark = reconcile._started

    def started(stop: threading.Event, exit_at_eof: bool = False) -> None:
        threading.setprofile(hook)  # from the start-up mark, as reconcile.py's CPU figures
        sys.setprofile(hook)
        mark(stop, exit_at_eof)

    reconcile._started = started
    try:
        reconcile.child_cloudcoil(namespace, 0)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        Path(out).write_text(json.dumps([[*key, n] for key, n in counts.items()]))


def area(filename: str) -> str:
    """The library (or cloudcoil_sync package) a code object belongs to."""
    if filename == "C":
        return "C calls"
    if "cloudcoil_sync/" in filename:
        return "cloudcoil_sync/" + filename.split("cloudcoil_sync/")[1].split("/")[0]
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1].split("/")[0].removesuffix(".py")
    name = filename.rsplit("/", 1)[-1]
    parent = filename.rsplit("/", 2)[-2] if filename.count("/") > 1 else ""
    return f"stdlib {parent}" if parent in ("email", "http", "json", "logging", "re") else name


def report(rows: list[list[Any]], count: int, top: int) -> dict[str, Any]:
    python = sum(n for f, _, _, n in rows if f != "C")
    by_area: collections.Counter[str] = collections.Counter()
    for filename, _, _, n in rows:
        by_area[area(filename)] += n
    busiest = sorted((r for r in rows if r[0] != "C"), key=lambda r: -r[3])[:top]
    return {
        "count": count,
        "python_calls_per_object": round(python / count, 1),
        "c_calls_per_object": round((sum(r[3] for r in rows) - python) / count, 1),
        "by_area_per_object": {a: round(n / count, 1) for a, n in by_area.most_common()},
        "busiest_per_object": [
            [f"{area(f)}:{line} {name}", round(n / count, 2)] for f, line, name, n in busiest
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--leader-election", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.leader_election:
        os.environ["CC_BENCH_LEADER"] = "1"
    from reconcile import open_target

    namespace = f"calls-{int(time.time())}"
    out = Path(f"/tmp/cc-calls-{os.getpid()}.json")
    with open_target(args.kubeconfig, None) as target:
        target.seed(namespace, args.count)
        env = {**os.environ, "KUBECONFIG": target.kubeconfig(namespace)}
        command = [sys.executable, __file__, "--child", namespace, str(out)]
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdout.readline()  # the start-up mark
        deadline = time.monotonic() + 60 + args.count / 10
        while target.wait_converged(namespace, args.count, 1.0) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"the child did not converge (exit code {proc.poll()})")
        time.sleep(3.0)  # the idle phase, as reconcile.py's CPU figures include it
        proc.stdin.close()
        proc.wait(60)
        target.finish(namespace)
    result = report(json.loads(out.read_text()), args.count, args.top)
    out.unlink()
    print(f"Python calls per object: {result['python_calls_per_object']}")
    print(f"C calls per object:      {result['c_calls_per_object']}\n")
    for name, n in list(result["by_area_per_object"].items())[:25]:
        print(f"{n:8.1f}  {name}")
    print()
    for name, n in result["busiest_per_object"]:
        print(f"{n:8.2f}  {name}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
