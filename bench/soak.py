"""Soak: an operator under mixed churn and periodic API faults for a long time (not in CI).

The emulator runs in a child process (``--serve``) that takes JSON-line commands on stdin
(faults, counts); this process runs the operator (an Application reconciling labelled
ConfigMaps: echo ``data.value`` into ``data.echo``, with a finalizer) and a churn thread
(creates, updates, deletes around a target population). Every ``--interval`` seconds it
prints one JSON line: lag (objects not yet converged), RSS, threads, operator pass
counts and errors, churn errors, faults injected. At the end churn stops, faults are
cleared, and the run must converge within ``--settle`` seconds; RSS and thread growth
after warm-up are reported. Exit status 1 if it did not converge or threads grew.

    python bench/soak.py                      # 30 minutes
    python bench/soak.py --minutes 2 --interval 10 --objects 300
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
LABEL = "soak.cloudcoil.io/managed"
FINALIZER = "soak.cloudcoil.io/cleanup"
NAMESPACE = "soak"
LIST_WATCH = rf"^/api/v1/namespaces/{NAMESPACE}/configmaps$"

# The fault cycle: one step every --fault-every seconds.
FAULTS: list[dict[str, Any]] = [
    {"op": "drop", "abort": False},
    {"op": "inject", "status": 503, "count": 30, "method": "PATCH"},
    {"op": "drop", "abort": True},
    {"op": "inject", "status": 429, "count": 10, "method": "PATCH", "retry_after": 1},
    {"op": "forget"},
    {"op": "inject", "status": 500, "count": 3, "method": "GET", "path": LIST_WATCH},
    {"op": "restart"},
    {"op": "inject", "status": 409, "count": 20, "method": "PATCH"},
    {"op": "latency", "seconds": 0.05, "for": 5.0},
]


# -- the emulator child -----------------------------------------------------------------------


def _serve() -> None:
    from cloudcoil_sync.testing import Emulator

    kube = Emulator(history_size=20000, log_size=1000).start()
    kube.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    print(json.dumps({"url": kube.url, "token": kube.admin_token, "ca": kube.ca_pem.decode()}))
    sys.stdout.flush()
    timers: list[threading.Timer] = []
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        answer: Any = None
        if op == "drop":
            answer = kube.drop_watches(abort=cmd["abort"])
        elif op == "inject":
            kube.faults.inject(
                cmd["status"],
                count=cmd["count"],
                method=cmd.get("method"),
                path=cmd.get("path"),
                retry_after=cmd.get("retry_after"),
            )
        elif op == "forget":
            kube.forget_history()
        elif op == "restart":
            kube.restart(lose_history=True)
        elif op == "latency":
            kube.faults.add_latency(cmd["seconds"])
            timer = threading.Timer(cmd["for"], kube.faults.clear)
            timer.start()
            timers.append(timer)
        elif op == "clear":
            kube.faults.clear()
        elif op == "stats":
            objects = kube.list_objects("", "configmaps", NAMESPACE)
            mine = [o for o in objects if (o["metadata"].get("labels") or {}).get(LABEL)]
            lag = sum(1 for o in mine if not _converged(o))
            answer = {"objects": len(mine), "lag": lag, "injected": kube.faults.injected}
        elif op == "quit":
            break
        print(json.dumps({"ok": True, "answer": answer}))
        sys.stdout.flush()
    for timer in timers:
        timer.cancel()
    kube.stop()


def _converged(obj: dict[str, Any]) -> bool:
    data, meta = obj.get("data") or {}, obj["metadata"]
    return (
        data.get("echo") == data.get("value")
        and FINALIZER in (meta.get("finalizers") or [])
        and not meta.get("deletionTimestamp")
    )


class EmulatorChild:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lock = threading.Lock()
        hello = json.loads(self._stdout.readline())
        self.url, self.token, self.ca = hello["url"], hello["token"], hello["ca"]

    @property
    def _stdout(self) -> IO[str]:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def call(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
            self.proc.stdin.flush()
            return json.loads(self._stdout.readline())["answer"]

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.call("quit")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- the operator and the churn ---------------------------------------------------------------


def build_operator(config: Any, workers: int) -> tuple[Any, Any]:
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.application import Application

    app = Application("soak", config=config)
    configs = app.controller(ConfigMap, label_selector=f"{LABEL}=true", workers=workers)

    @configs.reconcile()
    def reconcile(cm: ConfigMap) -> ConfigMap:
        data = dict(cm.data or {})
        data["echo"] = data.get("value", "")
        cm.data = data
        return cm

    @configs.finalize(FINALIZER)
    def cleanup(cm: ConfigMap) -> None:
        return None

    return app, configs


class Churn:
    """Creates, updates and deletes labelled ConfigMaps around `target` objects."""

    def __init__(self, config: Any, target: int, rate: float) -> None:
        self.api = config.client(("", "v1", "configmaps"))
        self.target, self.rate = target, rate
        self.live: list[str] = []
        self.serial = 0
        self.ops = 0
        self.errors: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="soak-churn")

    def _one(self) -> None:
        self.serial += 1
        value = f"v{self.serial}"
        roll = random.random()
        if len(self.live) < self.target * 0.9 or (roll < 0.3 and len(self.live) < self.target):
            name = f"cm-{self.serial}"
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {LABEL: "true"}},
                "data": {"value": value},
            }
            self.api.create(body)
            self.live.append(name)
        elif roll < 0.75:
            self.api.merge_patch(random.choice(self.live), {"data": {"value": value}})
        else:
            name = self.live.pop(random.randrange(len(self.live)))
            self.api.delete(name)

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop.is_set():
            try:
                self._one()
                self.ops += 1
            except Exception as error:  # counted and reported; churn goes on
                name = type(error).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
            next_at += interval
            self.stop.wait(max(0.0, next_at - time.monotonic()))


class LogCounter(logging.Handler):
    """Counts the framework's log records by level (printed only with --verbose)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[record.levelname] = self.counts.get(record.levelname, 0) + 1


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in [
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        ]
    ]


def heap_figures() -> dict[str, float | int | None]:
    """Where the RSS is: Python's live blocks and glibc malloc's in-use vs held bytes.

    A step in RSS with flat in-use figures is allocator high-water, not a leak.
    """
    figures: dict[str, float | int | None] = {"py_blocks": sys.getallocatedblocks()}
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):  # not glibc >= 2.33
        return figures
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    figures["malloc_inuse_mb"] = round((info.uordblks + info.hblkhd) / 2**20, 1)
    figures["malloc_free_mb"] = round(info.fordblks / 2**20, 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between reports")
    parser.add_argument("--objects", type=int, default=1000, help="target population")
    parser.add_argument("--rate", type=float, default=20.0, help="churn operations a second")
    parser.add_argument("--fault-every", type=float, default=20.0, help="seconds between faults")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--settle", type=float, default=120.0, help="convergence limit at end")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before baselines")
    parser.add_argument("--verbose", action="store_true", help="print the framework's logs")
    args = parser.parse_args(argv)
    counter = LogCounter()
    framework = logging.getLogger("cloudcoil_sync")
    framework.addHandler(counter)
    framework.setLevel(logging.INFO)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    else:
        framework.propagate = False  # counted, not printed

    from cloudcoil_sync.client import Config

    emulator = EmulatorChild()
    config = Config(
        server=emulator.url, token=emulator.token, ca_data=emulator.ca.encode(), namespace=NAMESPACE
    )
    app, configs = build_operator(config, args.workers)
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            app.run(stop=stop)
        except BaseException as error:
            failure.append(error)

    operator = threading.Thread(target=run, name="soak-operator")
    operator.start()
    app.wait_ready(timeout=60)
    churn = Churn(config, args.objects, args.rate)
    churn.thread.start()

    started = time.monotonic()
    end = started + args.minutes * 60
    next_report = started + args.interval
    next_fault = started + args.fault_every
    faults_done = 0
    baseline: dict[str, int] | None = None
    reports: list[dict[str, Any]] = []
    pause = threading.Event()

    def report(phase: str) -> dict[str, Any]:
        stats = emulator.call("stats")
        status = configs.runtime.status if configs.runtime is not None else None
        line = {
            "phase": phase,
            "elapsed_s": round(time.monotonic() - started, 1),
            "objects": stats["objects"],
            "lag": stats["lag"],
            "rss_mb": round(rss_bytes() / 2**20, 1),
            **heap_figures(),
            "threads": threading.active_count(),
            "passes_ok": status.successes if status else None,
            "pass_errors": status.errors if status else None,
            "queued": status.queued if status else None,
            "churn_ops": churn.ops,
            "churn_errors": dict(churn.errors),
            "log_records": dict(counter.counts),
            "faults_injected": stats["injected"],
            "fault_steps": faults_done,
            "operator_failed": repr(failure[0]) if failure else None,
        }
        print(json.dumps(line), flush=True)
        reports.append(line)
        return line

    try:
        while time.monotonic() < end and not failure:
            now = time.monotonic()
            if now >= next_fault:
                emulator.call(**FAULTS[faults_done % len(FAULTS)])
                faults_done += 1
                next_fault += args.fault_every
            if now >= next_report:
                line = report("churn")
                if baseline is None and now - started >= args.warmup:
                    baseline = {"rss": rss_bytes(), "threads": line["threads"]}
                next_report += args.interval
            pause.wait(max(0.0, min(next_fault, next_report, end) - time.monotonic()))
        churn.stop.set()
        churn.thread.join(30)
        emulator.call("clear")
        settle_started = time.monotonic()
        converged = False
        while time.monotonic() - settle_started < args.settle:
            if emulator.call("stats")["lag"] == 0:
                converged = True
                break
            pause.wait(0.5)
        settle = time.monotonic() - settle_started
        final = report("settled" if converged else "not-converged")
    finally:
        stop.set()
        operator.join(60)
        churn.stop.set()
        emulator.close()
        config.close()
    base = baseline or {"rss": reports[0]["rss_mb"] * 2**20 if reports else 0, "threads": 0}
    summary = {
        "converged": converged,
        "settle_s": round(settle, 1),
        "rss_growth_mb": round(final["rss_mb"] - base["rss"] / 2**20, 1),
        "threads_at_baseline": base["threads"],
        "threads_at_end": final["threads"],
        "operator_failed": final["operator_failed"],
        "operator_stopped": not operator.is_alive(),
    }
    print(json.dumps({"summary": summary}), flush=True)
    grew = bool(base["threads"]) and final["threads"] > base["threads"]
    return 0 if converged and not grew and not failure and not operator.is_alive() else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        sys.exit(main())
