"""Reconcile benchmark: cloudcoil_sync vs kopf vs a raw `requests` floor (SPEC §9).

N labelled ConfigMaps are seeded in a fresh namespace of one emulator process; each contender
then runs in its own child process (same worker count) and patches every object to
``data["managed-by"] = "cloudcoil"``:

- cloudcoil: the ``run`` command (``app.main()``, as ``python app.py run``: its logging, its
  frozen start-up heap, stopped by SIGTERM) with one Controller whose ``def`` reconcile
  returns the patched ConfigMap (one guarded patch per object), default settings: its
  ``Reconciled`` Events are deduplicated and rate-limited (burst 20, then 5/s), so a few
  dozen POSTs per run; each object is reconciled twice (the second pass, on the watch echo
  of its own write, finds nothing to change).
- kopf: ``kopf.run(standalone=True, namespaces=[ns])`` with one sync handler on
  create/resume/update (label selector) that sets ``patch["data"]``; Events posting off,
  progress in annotations (no ``status`` writes), ``max_workers`` = workers, logging as
  ``kopf run`` sets it up (INFO, full format).
- floor: one unpaged list, then a merge patch per object on a pool of `workers` threads;
  afterwards a watch that patches whatever lacks the value (for the latency phase).
- go-anchor: the compiled peer (../shared/go-anchor: client-go informer, workqueue, N workers,
  Lease), run as its own binary; built once with its build.sh when absent (cluster mode only).

A contender may carry its own worker count (``cloudcoil:4``), so one cell can compare
cloudcoil's defaults, cloudcoil at 4 workers, the floor and go-anchor side by side.
Every row has ``first_object_s`` from the child's start-up mark and
``first_object_spawn_s`` from the process spawn (imports included).

Per contender: time to converge (from the child's start-up mark, after imports), objects/s,
the child's own CPU seconds until converged and then idle (kopf's second write pass is
included), peak RSS (VmHWM), API requests on the namespace, and event-to-reconcile latency
(p50/p99 over `--samples` single-object updates after convergence).

    python bench/reconcile.py [--counts 1000,5000] [--large] [--workers 1,4,16] [--samples 200]

The ratios compare the median runs; with repeats, the obj/s ratios against the floor and
go-anchor are also given paired by round (each round's ratio, and their median): the
contenders of one round run minutes apart, which shares more of this machine's drift.

With several worker counts, every N runs with each (ratios compare the same N and workers);
``--large`` runs N=20000 with the first worker count only. N <= 2000 converges in about a
second, where one run is mostly noise: such cells run 3 times (``--repeats``) in rotating
order and the median run stands for the cell.

With ``KUBECONFIG`` set (or ``--kubeconfig``) the contenders run against that cluster instead
of the emulator (``bench/cluster.py``; ``--emulator`` keeps the emulator).
Namespaces are named ``ccb-<contender>-<N>-w<workers>``; ``CC_BENCH_NAMESPACE_PREFIX``
replaces ``ccb`` (a shared cluster: two runs at once must not seed the same namespace).
Against a local control plane, each contender starts once it is quiet (``ClusterTarget.settle``)
and ``--etcd http://127.0.0.1:2379`` compacts and defragments its etcd before each seed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory_map
from common import (
    KEY,
    LABEL,
    VALUE,
    EmulatorProcess,
    cpu_seconds,
    machine,
    peak_rss,
)

if TYPE_CHECKING:
    from cluster import ClusterTarget

    Target = EmulatorProcess | ClusterTarget

CONTENDERS = ("cloudcoil", "kopf", "floor", "go-anchor")
DEFAULT_CONTENDERS = ("cloudcoil", "kopf", "floor")
SHORT_N, SHORT_REPEATS = 2000, 3  # N converging in about a second: one run is mostly noise
IDLE_WINDOW, IDLE_CPU = 1.0, 0.02  # idle: under 20 ms of CPU in one second
MIN_IDLE, MAX_IDLE = 3.0, 30.0  # at least MAX_IDLE, or N/100 s (kopf's second pass)


# -- children -------------------------------------------------------------------------------


def _started(stop: threading.Event, exit_at_eof: bool = False) -> None:
    """Tell the driver the imports are done; stop (or exit at once) when stdin closes."""
    rss = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    mark = {"started": time.time(), "cpu": time.process_time(), "rss": rss}
    print(json.dumps(mark), flush=True)

    def wait_eof() -> None:
        sys.stdin.read()
        stop.set()
        if exit_at_eof:  # nothing to drain; its watch read would otherwise block the stop
            os._exit(0)

    threading.Thread(target=wait_eof, daemon=True).start()


def child_cloudcoil(namespace: str, workers: int) -> None:
    import signal

    from cloudcoil_sync.application import Application
    from cloudcoil_sync.application._internal.cli import main
    from cloudcoil_sync.client import Config

    # isort: split
    # After cloudcoil_sync, as examples/settings_operator.py: the models build on first use.
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    if os.environ.get("CC_BENCH_SWITCH"):  # an A/B knob: the GIL switch interval in seconds
        sys.setswitchinterval(float(os.environ["CC_BENCH_SWITCH"]))
    config = Config.from_kubeconfig(None, None, namespace=namespace)
    # --leader-election: as the seed's example runs (a Lease per run's namespace, none yet).
    leader = os.environ.get("CC_BENCH_LEADER") == "1"
    app = Application("bench", namespace=namespace, config=config, leader_election=leader)
    options: dict[str, Any] = {"workers": workers} if workers else {}  # 0: the default
    if os.environ.get("CC_BENCH_EVENTS") == "0":  # an A/B knob: no Events posted
        options["events"] = False
    configs = app.controller(ConfigMap, label_selector=f"{LABEL}=true", **options)

    @configs.reconcile()
    def reconcile(cm: ConfigMap) -> ConfigMap:
        cm.data = {**(cm.data or {}), KEY: VALUE}
        return cm

    stop = threading.Event()
    _started(stop)

    def terminate() -> None:  # the driver's stop, as a Pod's: SIGTERM
        stop.wait()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate, daemon=True).start()
    # As `python app.py run` (app.main()): its logging, its frozen start-up heap, its
    # signal handling; the run until SIGTERM.
    main(app, ["run", "--log-level", "INFO", "--log-format", "text"])
    config.close()


def child_kopf(namespace: str, workers: int) -> None:
    import concurrent.futures

    import kopf
    from kopf._core.actions import loggers

    loggers.configure(debug=False, verbose=False, quiet=False)
    labels = {LABEL: "true"}

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # kopf would post an Event per handler run, unlimited
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
        if workers:  # 0: kopf's own defaults (a ThreadPoolExecutor of min(32, cores + 4))
            settings.execution.executor = concurrent.futures.ThreadPoolExecutor(workers)
            settings.execution.max_workers = workers

    @kopf.on.resume("configmaps", labels=labels)
    @kopf.on.create("configmaps", labels=labels)
    @kopf.on.update("configmaps", labels=labels)
    def sync(body: Any, patch: Any, **_: Any) -> None:
        if (body.get("data") or {}).get(KEY) != VALUE:
            patch["data"] = {KEY: VALUE}

    stop = threading.Event()
    _started(stop)
    kopf.run(standalone=True, namespaces=[namespace], stop_flag=stop)


def child_floor(namespace: str, workers: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from cluster import raw_session

    workers = workers or 16  # 0 ("defaults"): the floor has none; 16 threads, as in issue 16
    session, url = raw_session(os.environ["KUBECONFIG"], pool=workers + 2)
    patch_headers = {"Content-Type": "application/merge-patch+json"}
    base = f"{url}/api/v1/namespaces/{namespace}/configmaps"
    body = json.dumps({"data": {KEY: VALUE}})
    selector = {"labelSelector": f"{LABEL}=true"}

    def patch(name: str) -> None:
        session.patch(f"{base}/{name}", data=body, headers=patch_headers).raise_for_status()

    stop = threading.Event()
    _started(stop, exit_at_eof=True)
    pool = ThreadPoolExecutor(workers)
    listed = session.get(base, params=selector)
    listed.raise_for_status()
    doc = listed.json()
    names = [o["metadata"]["name"] for o in doc["items"] if (o.get("data") or {}).get(KEY) != VALUE]
    list(pool.map(patch, names))
    version = doc["metadata"]["resourceVersion"]
    watcher, _ = raw_session(os.environ["KUBECONFIG"])
    while not stop.is_set():  # the event-driven part: patch what lacks the value
        params = {**selector, "watch": "1", "resourceVersion": version, "timeoutSeconds": "300"}
        with watcher.get(base, params=params, stream=True) as resp:
            resp.raise_for_status()
            for line in resp.iter_lines(chunk_size=None):
                if not line:
                    continue
                event = json.loads(line)
                obj = event["object"]
                version = obj["metadata"].get("resourceVersion", version)
                if (
                    event["type"] in ("ADDED", "MODIFIED")
                    and (obj.get("data") or {}).get(KEY) != VALUE
                ):
                    pool.submit(patch, obj["metadata"]["name"])


CHILDREN: dict[str, Callable[[str, int], None]] = {
    "cloudcoil": child_cloudcoil,
    "kopf": child_kopf,
    "floor": child_floor,
}


# -- driver ---------------------------------------------------------------------------------


def go_anchor_binary() -> str:
    """The compiled peer's binary: $GO_ANCHOR, else the kit's $KUBE_HOME/bin/go-anchor, built
    once by ../shared/go-anchor/build.sh (outside this repository) when it is absent."""
    if os.environ.get("GO_ANCHOR"):
        return os.environ["GO_ANCHOR"]
    home = os.environ.get("KUBE_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kube-control-plane"
    )
    binary = os.path.join(home, "bin", "go-anchor")
    if not os.path.exists(binary):
        script = Path(__file__).resolve().parents[2] / "shared" / "go-anchor" / "build.sh"
        if not script.exists():
            raise SystemExit(f"go-anchor: no {binary} and no {script} to build it with")
        note(f"building go-anchor with {script} (minutes with a cold Go cache)")
        subprocess.run([str(script)], check=True, env={**os.environ, "KUBE_HOME": home})
    return binary


def spec(contender: str, workers: int) -> tuple[str, int]:
    """`name` or `name:workers` (a contender's own worker count) -> (name, workers)."""
    name, _, own = contender.partition(":")
    return name, int(own) if own else workers


class Child:
    """One contender's process, its start-up mark and its stderr (kept for failures)."""

    def __init__(self, emu: Target, name: str, namespace: str, workers: int) -> None:
        env = {**os.environ, "KUBECONFIG": emu.kubeconfig(namespace)}
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self.compiled = name == "go-anchor"
        if self.compiled:  # no imports, no mark: its start-up is its spawn
            env.update(BENCH_NAMESPACE=namespace, BENCH_LABEL_SELECTOR=f"{LABEL}=true")
            command = [go_anchor_binary(), f"-workers={workers or 4}", "-leader-elect=true"]
        else:
            command = [sys.executable, __file__, "--child", name, namespace, str(workers)]
        self.spawned = time.time()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        if self.compiled:
            self.started, self.import_cpu, self.import_rss = self.spawned, 0.0, 0
            return
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{name} child failed to start:\n{self.stderr()}")
        mark = json.loads(line)
        self.started, self.import_cpu = float(mark["started"]), float(mark["cpu"])
        self.import_rss = int(mark.get("rss") or 0)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self, tail: int = 3000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-tail:]

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        if self.compiled:  # it drains and releases its Lease on SIGTERM
            self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def wait_converged(emu: Target, child: Child, namespace: str, count: int) -> float:
    """Wall-clock time the last object converged (the target stamps it as it happens)."""
    deadline = time.time() + max(120.0, count / 20)
    while (reached := emu.wait_converged(namespace, count, 0.5)) is None:
        if child.proc.poll() is not None:
            raise RuntimeError(f"child exited ({child.proc.returncode}):\n{child.stderr()}")
        if time.time() > deadline:
            raise RuntimeError(f"not converged in time:\n{child.stderr()}")
    return reached


def wait_idle(pid: int, limit: float) -> tuple[float, bool]:
    """Wait until the child's CPU stays under IDLE_CPU per IDLE_WINDOW: (its CPU, idle?)."""
    start = time.time()
    last = cpu_seconds(pid)
    while True:
        time.sleep(IDLE_WINDOW)
        now = cpu_seconds(pid)
        waited = time.time() - start
        if now - last < IDLE_CPU and waited >= MIN_IDLE:
            return now, True
        if waited >= limit:
            return now, False
        last = now


class Observer:
    """A watch on the namespace from the driver: when did `name` show `seq` and the value."""

    def __init__(self, emu: Target, namespace: str) -> None:
        from cluster import raw_session  # not at the top: children must not pay for it

        self.session, url = raw_session(emu.kubeconfig(namespace))
        self.base = f"{url}/api/v1/namespaces/{namespace}/configmaps"
        listed = self.session.get(self.base, params={"limit": "1"})
        listed.raise_for_status()
        version = listed.json()["metadata"]["resourceVersion"]
        self.seen: dict[str, str] = {}
        self.changed = threading.Condition()
        self.resp, _ = raw_session(emu.kubeconfig(namespace))
        self.stream = self.resp.get(
            self.base,
            params={"watch": "1", "resourceVersion": version, "timeoutSeconds": "600"},
            stream=True,
        )
        self.stream.raise_for_status()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in self.stream.iter_lines(chunk_size=None):
                if not line:
                    continue
                obj = json.loads(line)["object"]
                data = obj.get("data") or {}
                if data.get(KEY) == VALUE and "seq" in data:
                    with self.changed:
                        self.seen[obj["metadata"]["name"]] = data["seq"]
                        self.changed.notify_all()
        except Exception:  # the stream is closed at the end
            return

    def sample(self, name: str, seq: str, timeout: float = 10.0) -> float | None:
        patch = json.dumps({"data": {KEY: None, "seq": seq}})
        headers = {"Content-Type": "application/merge-patch+json"}
        t0 = time.perf_counter()
        self.session.patch(f"{self.base}/{name}", data=patch, headers=headers).raise_for_status()
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.seen.get(name) != seq:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(left)
        return time.perf_counter() - t0

    def close(self) -> None:
        from cluster import shutdown_stream

        shutdown_stream(self.stream)
        self.thread.join(5)
        self.stream.close()
        self.resp.close()
        self.session.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def note(message: str) -> None:
    print(f"[reconcile {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_one(
    emu: Target, contender: str, count: int, workers: int, samples: int, run: int = 0
) -> dict[str, Any]:
    name, own = spec(contender, workers)
    prefix = os.environ.get("CC_BENCH_PREFIX") or os.environ.get("CC_BENCH_NAMESPACE_PREFIX", "ccb")
    namespace = f"{prefix}-{name}-{count}-w{own}" + (f"-r{run}" if run else "")
    note(f"{contender}: seeding {count} objects in namespace {namespace}")
    emu.seed(namespace, count)
    emu_cpu0 = emu.cpu()
    note(f"{contender}: {count} objects seeded; starting")
    try:
        result = measure(emu, name, namespace, count, own, samples, emu_cpu0)
    finally:
        emu.finish(namespace)
    result.update(contender=contender, contender_workers=own, workers=workers)
    return result


def measure(
    emu: Target,
    name: str,
    namespace: str,
    count: int,
    workers: int,
    samples: int,
    emu_cpu0: float | None,
) -> dict[str, Any]:
    child = Child(emu, name, namespace, workers)
    try:
        first = wait_converged(emu, child, namespace, 1)
        converged = wait_converged(emu, child, namespace, count)
        note(f"{name}: converged in {converged - child.started:.2f}s; waiting for idle")
        cpu_converged = cpu_seconds(child.pid)
        emu_cpu_converged = emu.cpu()
        cpu_idle, idle = wait_idle(child.pid, max(MAX_IDLE, count / 100))
        rss = peak_rss(child.pid)
        where = memory_map.breakdown(child.pid)  # RSS by kind of mapping, once idle
        requests_made = emu.requests(namespace)
        emu_cpu1 = emu.cpu()
        emu_cpu = emu_cpu1 - emu_cpu0 if emu_cpu1 is not None and emu_cpu0 is not None else None
        latencies: list[float] = []
        lost = 0
        lat_cpu = 0.0
        if samples:
            note(f"{name}: measuring latency ({samples} samples)")
            observer = Observer(emu, namespace)
            cpu0 = cpu_seconds(child.pid)
            for k in range(samples):
                got = observer.sample(f"cm-{k % count:05d}", str(k))
                if got is None:
                    lost += 1
                else:
                    latencies.append(got)
            lat_cpu = cpu_seconds(child.pid) - cpu0
            observer.close()
        rss_end = peak_rss(child.pid)
    except BaseException:
        sys.stderr.write(child.stderr())
        raise
    finally:
        child.stop()
    seconds = converged - child.started
    work_cpu = cpu_idle - child.import_cpu
    writes = (
        sum(v for k, v in requests_made.items() if k != "GET")
        if requests_made is not None
        else None
    )
    result: dict[str, Any] = {
        "contender": name,
        "count": count,
        "workers": workers,
        "startup_s": round(child.started - child.spawned, 3),
        "import_cpu_s": round(child.import_cpu, 3),
        "first_object_s": round(first - child.started, 3),
        "first_object_spawn_s": round(first - child.spawned, 3),
        "converge_s": round(seconds, 3),
        "objects_per_s": round(count / seconds, 1),
        # As a user times `python app.py run`: from the spawn, imports included.
        "objects_per_s_from_spawn": round(count / (converged - child.spawned), 1),
        "cpu_converge_s": round(cpu_converged - child.import_cpu, 3),
        "idle_reached": idle,
        "cpu_total_s": round(work_cpu, 3),
        "cpu_ms_per_object": round(work_cpu / count * 1e3, 3),
        "peak_rss_mb": round(rss / 2**20, 1),
        "import_rss_mb": round(child.import_rss / 2**20, 1),
        "rss_over_import_mb": round((rss - child.import_rss) / 2**20, 1),
        "peak_rss_after_latency_mb": round(rss_end / 2**20, 1),
        "rss_by_mapping_mb": where,
        "requests": requests_made,
        "writes_per_object": round(writes / count, 2) if writes is not None else None,
        "emulator_cpu_s": round(emu_cpu, 2) if emu_cpu is not None else None,
        # The server's CPU from the spawn to convergence: what each contender costs it.
        "server_cpu_ms_per_object": (
            round((emu_cpu_converged - emu_cpu0) / count * 1e3, 3)
            if emu_cpu_converged is not None and emu_cpu0 is not None
            else None
        ),
    }
    if samples:
        result.update(
            latency_p50_ms=round(percentile(latencies, 0.5) * 1e3, 2) if latencies else None,
            latency_p99_ms=round(percentile(latencies, 0.99) * 1e3, 2) if latencies else None,
            latency_mean_ms=round(statistics.fmean(latencies) * 1e3, 2) if latencies else None,
            latency_samples=len(latencies),
            latency_lost=lost,
            latency_cpu_ms_per_event=round(lat_cpu / samples * 1e3, 3),
        )
    return result


def ratios(results: list[dict[str, Any]]) -> None:
    """Add ratios to the floor, kopf and go-anchor of time, CPU and RSS to each count."""
    by = {(r["count"], r["workers"], r["contender"].partition(":")[0]): r for r in results}
    for r in results:
        for other in ("floor", "kopf", "go-anchor"):
            base = by.get((r["count"], r["workers"], other))
            if base is None or base is r:
                continue
            fields = ("converge_s", "cpu_total_s", "peak_rss_mb", "rss_over_import_mb")
            other = other.replace("-", "_")
            for field in (*fields, "latency_p50_ms", "latency_p99_ms"):
                if r.get(field) and base.get(field):
                    r[f"{field}_vs_{other}"] = round(r[field] / base[field], 2)


def bench(
    counts: list[int],
    workers: list[int],
    samples: int,
    contenders: list[str],
    large: list[int] | None = None,
    repeats: int | None = None,
    kubeconfig: str | None = None,
    latency: str | None = None,
) -> dict[str, Any]:
    """Every N in `counts` with every worker count; every N in `large` with `workers[0]`.

    Each cell runs `repeats` times (default: SHORT_REPEATS for N <= SHORT_N, else once),
    rotating the contenders' order so none always meets the freshly started emulator; the
    run with the median converge time stands for the cell, all converge times are kept.
    With `kubeconfig`, the contenders run against that cluster instead of an emulator."""
    results: list[dict[str, Any]] = []
    load = [machine()["loadavg"]]
    plan = [(count, workers) for count in counts] + [(n, workers[:1]) for n in large or []]
    for count, pool_sizes in plan:
        runs = repeats or (SHORT_REPEATS if count <= SHORT_N else 1)
        with open_target(kubeconfig, latency) as emu:  # one per N, shared by the contenders
            for size in pool_sizes:
                cell: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
                for run in range(runs):
                    shift = run % len(contenders)
                    for name in contenders[shift:] + contenders[:shift]:
                        result = run_one(emu, name, count, size, samples, run)
                        result["loadavg_1m"] = round(os.getloadavg()[0], 2)
                        print(json.dumps(result), flush=True)
                        cell[name].append(result)
                chosen = {name: median_run(cell[name]) for name in contenders}
                paired(cell, chosen)
                results.extend(chosen.values())
    ratios(results)
    load.append(machine()["loadavg"])
    return {
        "machine": machine(),
        "api_server": describe_target(kubeconfig, latency),
        "loadavg_before_after": load,
        "results": results,
        "growth": growth(results),
    }


def open_target(kubeconfig: str | None, latency: str | None) -> contextlib.closing[Target]:
    """A fresh emulator child (with a latency profile), or the cluster of `kubeconfig`."""
    if kubeconfig is None:
        return contextlib.closing(EmulatorProcess(latency))
    from cluster import ClusterTarget

    return contextlib.closing(ClusterTarget(kubeconfig))


def describe_target(kubeconfig: str | None, latency: str | None = None) -> str:
    if kubeconfig:
        return f"cluster of {kubeconfig}"
    return f"emulator (bench/common.py --serve, latency={latency or 'none'})"


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median converge time, with every run's converge time and CPU."""
    ordered = sorted(runs, key=lambda r: r["converge_s"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    if len(runs) > 1:
        chosen["runs"] = len(runs)
        chosen["converge_runs_s"] = [r["converge_s"] for r in runs]
        chosen["cpu_total_runs_s"] = [r["cpu_total_s"] for r in runs]
    return chosen


def paired(cell: dict[str, list[dict[str, Any]]], chosen: dict[str, dict[str, Any]]) -> None:
    """Each contender's obj/s over the floor's and go-anchor's of the same round, and the
    median of those ratios (``objects_per_s_vs_floor_paired``, the rounds' in
    ``..._rounds``). Two runs of one round are a minute or two apart; the median runs of two
    contenders may come from different rounds, and this machine's speed drifts by ±20 %
    from one minute to the next (bench/results-real.md): the paired ratio carries less of
    that drift than the ratio of the median runs."""
    for reference in ("floor", "go-anchor"):
        ref = next((runs for name, runs in cell.items() if spec(name, 0)[0] == reference), None)
        if ref is None or len(ref) < 2:
            continue
        key = f"objects_per_s_vs_{reference.replace('-', '_')}_paired"
        for name, runs in cell.items():
            if runs is ref or len(runs) != len(ref):
                continue
            rounds = [
                round(r["objects_per_s"] / f["objects_per_s"], 2)
                for r, f in zip(runs, ref, strict=True)
            ]
            chosen[name][key] = statistics.median(rounds)
            chosen[name][f"{key}_rounds"] = rounds


def growth(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per contender, largest N vs smallest N (first worker count of the largest N):
    per-object time, CPU and RSS ratios."""
    out: dict[str, dict[str, float]] = {}
    workers = max(results, key=lambda r: r["count"])["workers"] if results else 0
    for name in CONTENDERS:
        rows = sorted(
            (r for r in results if r["contender"] == name and r["workers"] == workers),
            key=lambda r: r["count"],
        )
        if len(rows) < 2:
            continue
        small, large = rows[0], rows[-1]
        scale = large["count"] / small["count"]
        out[name] = {
            "from": small["count"],
            "to": large["count"],
            "time_per_object": round(large["converge_s"] / small["converge_s"] / scale, 2),
            "cpu_per_object": round(large["cpu_ms_per_object"] / small["cpu_ms_per_object"], 2),
            "peak_rss": round(large["peak_rss_mb"] / small["peak_rss_mb"], 2),
        }
    return out


def converge_times(r: dict[str, Any]) -> str:
    """Every run's converge time when the cell ran more than once."""
    if r.get("runs", 1) == 1:
        return ""
    return " (" + "/".join(str(t) for t in r["converge_runs_s"]) + ")"


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| N | workers | contender | first object s (from spawn) | converge s | obj/s"
        " | obj/s from spawn | CPU s"
        " | CPU ms/obj | peak RSS MB | RSS over imports MB | writes/obj | p50 ms | p99 ms"
        " | obj/s vs floor [same-round median: rounds] | obj/s vs go-anchor [same-round]"
        " | CPU vs floor | CPU vs go-anchor | CPU vs kopf"
        " | RSS vs go-anchor | RSS vs kopf | load |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
        "|---:|---:|---:|---:|---:|",
    ]

    def speed(r: dict[str, Any], other: str) -> str:
        ratio = r.get(f"converge_s_vs_{other}")
        text = str(round(1 / ratio, 2)) if ratio else ""
        rounds = r.get(f"objects_per_s_vs_{other}_paired_rounds")
        if rounds:  # the median of the same-round ratios, then each round's
            text += f" [{r[f'objects_per_s_vs_{other}_paired']}: {'/'.join(map(str, rounds))}]"
        return text

    for r in sorted(results, key=lambda r: (r["count"], r["workers"])):
        lines.append(
            f"| {r['count']} | {r.get('contender_workers', r['workers'])} | {r['contender']} "
            f"| {r.get('first_object_s', '')} ({r.get('first_object_spawn_s', '')}) "
            f"| {r['converge_s']}{converge_times(r)} "
            f"| {r['objects_per_s']} | {r.get('objects_per_s_from_spawn', '')} "
            f"| {r['cpu_total_s']}{'' if r.get('idle_reached', True) else ' (not idle)'} "
            f"| {r['cpu_ms_per_object']} | {r['peak_rss_mb']} | {r.get('rss_over_import_mb', '')} "
            f"| {r.get('writes_per_object') or ''} | {r.get('latency_p50_ms', '')} "
            f"| {r.get('latency_p99_ms', '')} | {speed(r, 'floor')} | {speed(r, 'go_anchor')} "
            f"| {r.get('cpu_total_s_vs_floor', '')} | {r.get('cpu_total_s_vs_go_anchor', '')} "
            f"| {r.get('cpu_total_s_vs_kopf', '')} | {r.get('peak_rss_mb_vs_go_anchor', '')} "
            f"| {r.get('peak_rss_mb_vs_kopf', '')} | {r.get('loadavg_1m', '')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,5000")
    parser.add_argument("--large", action="store_true", help="also N=20000")
    parser.add_argument(
        "--workers",
        default="4",
        help="comma-separated worker counts; 0: each contender's default (floor: 16 threads)",
    )
    parser.add_argument("--samples", type=int, default=200, help="latency samples (0: none)")
    parser.add_argument(
        "--contenders",
        default=",".join(DEFAULT_CONTENDERS),
        help=f"any of {', '.join(CONTENDERS)}, each optionally name:workers (cloudcoil:4)",
    )
    parser.add_argument(
        "--repeats", type=int, help=f"runs per cell (default {SHORT_REPEATS} for N <= {SHORT_N})"
    )
    parser.add_argument("--json", help="write the results here")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG") or None,
        help="run against this cluster (default: $KUBECONFIG when set, else the emulator)",
    )
    where.add_argument(
        "--emulator", action="store_true", help="use the emulator even if KUBECONFIG is set"
    )
    parser.add_argument(
        "--latency", help="emulator latency profile (testing/latency.py), e.g. kube-apiserver-1.32"
    )
    parser.add_argument(
        "--leader-election", action="store_true", help="cloudcoil runs with leader_election=True"
    )
    parser.add_argument(
        "--prefix", default="ccb", help="prefix of the runs' namespaces (ccb-<contender>-...)"
    )
    parser.add_argument(
        "--etcd",
        help="a local etcd's client URL: compacted and defragmented before each seed",
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.etcd:
        os.environ["CC_BENCH_ETCD"] = args.etcd
    if args.child:
        name, namespace, workers = args.child
        CHILDREN[name](namespace, int(workers))
        return
    counts = [int(c) for c in args.counts.split(",") if c]
    large = [20000] if args.large and 20000 not in counts else []
    workers = [int(w) for w in args.workers.split(",") if w]
    kubeconfig = None if args.emulator else args.kubeconfig
    if args.latency and kubeconfig:
        raise SystemExit("--latency models a server for the emulator; use it with --emulator")
    if args.leader_election:
        os.environ["CC_BENCH_LEADER"] = "1"  # inherited by the cloudcoil children
    os.environ["CC_BENCH_PREFIX"] = args.prefix
    if "go-anchor" in {spec(c, 0)[0] for c in args.contenders.split(",")}:
        if not kubeconfig:
            raise SystemExit("go-anchor runs against a real API server: give --kubeconfig")
        go_anchor_binary()  # built before any run, not in the middle of one
    if kubeconfig:
        note(f"against the cluster of {kubeconfig}: namespaces {args.prefix}-* come and go")
    report = bench(
        counts,
        workers,
        args.samples,
        args.contenders.split(","),
        large,
        args.repeats,
        kubeconfig,
        args.latency,
    )
    print(table(report["results"]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
