"""Sharding: per-replica CPU and memory with 1, 2 and 4 replicas, rebalance after a join and a
kill, and writes by a shard to an object not assigned to it (double reconciles).

    python bench/sharding.py [--count 2000] [--replicas 1,2,4] [--rate 0] [--prelabel]
                             [--kubeconfig PATH] [--json out.json]

Replicas are child processes (`--replica NAME NAMESPACE`) of one operator with
`Sharding(identity=NAME)` at the Lease defaults (15 s lease, 10 s renew deadline, 2 s retry),
whose reconcile writes `managed-by: <replica>` into every labelled ConfigMap. Per replica
count N the driver starts N replicas on a fresh, empty namespace and waits until each holds
its shard Lease (so the ring is formed, as in steady operation), measures each replica's idle
CPU rate over 10 s (renewals, the Lease watch, timers), reads its CPU seconds and RSS, creates
`--count` objects (8 client threads; `--rate` objects per second, or a burst) and follows them
with its own list + watch until each sits on its hash target among the live shards and was
written by it ("converged"), lets them idle 5 s, and reports per replica the CPU seconds spent
since the objects were created, the same less its idle rate over that window (`cpu_over_idle`),
the peak RSS and the RSS over its idle ring-formed floor (the cache's share). The coordinator
(the ring Lease holder) is marked: it also lists every object when the live shards change and
assigns what no shard claimed.
With N > 1 it then starts one more replica (join) and times convergence onto N + 1 shards
(every object moved to its new target), then SIGKILLs one that is not the coordinator (kill:
its Lease must expire first) and times convergence onto the N remaining.

Double reconciles: every watch event in which a replica's write names it as `managed-by`
while the object's shard label names another shard (a write from a shard that no longer owns
it: the drain handshake makes a shard let go before the next one is labelled). Against a
real cluster (`--kubeconfig`) the namespace is deleted at the end. `--prelabel` creates every
object already labelled for its target among the N shards (what a placing admission webhook
would do): an experiment that takes the claims out, not a mode of the product.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cluster import ClusterTarget, LabelledConfigMaps, raw_session
from common import (
    KEY,
    LABEL,
    ROOT,
    EmulatorProcess,
    configmap,
    cpu_seconds,
    machine,
    peak_rss,
)

from cloudcoil_sync.sharding import ObjectRef, pick_shard

RING = "shardbench"
SHARD = f"shard.sharding.cloudcoil.dev/{RING}"
IDLE = 5.0
IDLE_PROBE = 10.0


def replica(name: str, namespace: str) -> None:
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.application import Application
    from cloudcoil_sync.sharding import Sharding

    app = Application(RING, namespace=namespace, sharding=Sharding(identity=name))
    configs = app.controller(ConfigMap, label_selector=f"{LABEL}=true", workers=4)

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        config.data = {**(config.data or {}), KEY: name}
        return config

    sys.argv = [sys.argv[0], "run", "--log-level", "WARNING"]
    app.main()


class Placements(LabelledConfigMaps):
    """Each labelled ConfigMap's (shard label, managed-by), followed by list + watch."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.now: dict[str, tuple[str | None, str | None]] = {}
        self.foreign = 0  # a write naming its writer while labelled for another shard
        self.namespace = namespace
        super().__init__(kubeconfig, namespace)

    def _seen(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        shard = (obj["metadata"].get("labels") or {}).get(SHARD)
        writer = (obj.get("data") or {}).get(KEY)
        with self.cond:
            _, before = self.now.get(name, (None, None))
            if writer and writer != before and shard != writer:
                self.foreign += 1
            self.now[name] = (shard, writer)
            self.cond.notify_all()

    def converged(self, shards: set[str], count: int, timeout: float) -> float | None:
        """When every object is on the shard the ring picks among `shards` (its hash
        target: the moves after a join or a kill are done) and was written by it."""
        targets: dict[str, str | None] = {}

        def target(name: str) -> str | None:
            if name not in targets:
                ref = ObjectRef("", "ConfigMap", self.namespace, name)
                targets[name] = pick_shard(shards, ref)
            return targets[name]

        def done() -> bool:
            return len(self.now) >= count and all(
                shard == writer == target(name) for name, (shard, writer) in self.now.items()
            )

        with self.cond:
            return time.monotonic() if self.cond.wait_for(done, timeout) else None

    def shares(self) -> dict[str, int]:
        with self.cond:
            counts: dict[str, int] = {}
            for shard, _ in self.now.values():
                counts[str(shard)] = counts.get(str(shard), 0) + 1
            return counts


class Replica:
    def __init__(self, name: str, namespace: str, kubeconfig: str, work: Path) -> None:
        self.name = name
        self.log = work / f"{name}.log"
        env = {**os.environ, "KUBECONFIG": kubeconfig, "PYTHONPATH": str(ROOT)}
        with self.log.open("w") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--replica", name, namespace],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def peak_rss_mb(self) -> float:
        return peak_rss(self.proc.pid) / 2**20

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(30)


def ring_formed(kubeconfig: str, namespace: str, names: set[str], timeout: float) -> bool:
    """Every replica holds its shard Lease."""
    session, server = raw_session(kubeconfig)
    url = f"{server}/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        doc = session.get(
            url, params={"labelSelector": f"sharding.cloudcoil.dev/ring={RING}"}, timeout=30
        ).json()
        holders = {(item.get("spec") or {}).get("holderIdentity") for item in doc.get("items", [])}
        if names <= holders:
            return True
        time.sleep(0.2)
    return False


def create_objects(
    kubeconfig: str, namespace: str, count: int, rate: float, placed: set[str] | None
) -> None:
    """`count` objects from 8 threads, at most `rate` per second (0: as fast as they go);
    with `placed`, each already labelled for its target among those shards."""
    session, server = raw_session(kubeconfig, pool=8)
    base = f"{server}/api/v1/namespaces/{namespace}/configmaps"
    begin = time.monotonic()

    def create(i: int) -> None:
        if rate > 0:
            time.sleep(max(0.0, begin + i / rate - time.monotonic()))
        body = configmap(namespace, i)
        if placed:
            ref = ObjectRef("", "ConfigMap", namespace, body["metadata"]["name"])
            body["metadata"]["labels"][SHARD] = pick_shard(placed, ref)
        session.post(base, json=body, timeout=60).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(count)))


def coordinator(kubeconfig: str, namespace: str) -> str | None:
    session, server = raw_session(kubeconfig)
    url = f"{server}/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{RING}"
    return ((session.get(url, timeout=30).json().get("spec")) or {}).get("holderIdentity")


def scenario(
    target: Any, count: int, replicas: int, work: Path, rate: float, prelabel: bool
) -> dict[str, Any]:
    namespace = f"shards{replicas}-{os.getpid()}"
    target.seed(namespace, 0)
    config = target.kubeconfig(namespace)
    placements = Placements(config, namespace)
    running: list[Replica] = []
    result: dict[str, Any] = {"replicas": replicas, "count": count}
    try:
        running = [Replica(f"r{i}", namespace, config, work) for i in range(replicas)]
        names = {r.name for r in running}
        if not ring_formed(config, namespace, names, 120):
            raise SystemExit(f"the ring of {replicas} did not form")
        # The idle rate first (Lease renewals, the Lease watch, timers): every replica pays
        # it for as long as it runs, whatever its share, so the share's own CPU is the
        # CPU over it.
        probe = {r.name: r.cpu() for r in running}
        time.sleep(IDLE_PROBE)
        idle = {r.name: (r.cpu(), r.rss_mb()) for r in running}
        idle_rate = {name: (idle[name][0] - probe[name]) / IDLE_PROBE for name in idle}
        started = time.monotonic()
        create_objects(config, namespace, count, rate, set(names) if prelabel else None)
        done = placements.converged(names, count, 900)
        if done is None:
            raise SystemExit(f"{replicas} replicas did not converge: {placements.shares()}")
        result["converged_s"] = round(done - started, 2)
        time.sleep(IDLE)  # the steady state: renewals only
        window = time.monotonic() - started
        result["shares"] = placements.shares()
        result["coordinator"] = coordinator(config, namespace)
        result["per_replica"] = {
            r.name: {
                "cpu_s": round(r.cpu() - idle[r.name][0], 2),
                "idle_cpu_ms_per_s": round(idle_rate[r.name] * 1000, 1),
                "cpu_over_idle_s": round(r.cpu() - idle[r.name][0] - idle_rate[r.name] * window, 2),
                "peak_rss_mb": round(r.peak_rss_mb(), 1),
                "rss_over_idle_mb": round(r.rss_mb() - idle[r.name][1], 1),
            }
            for r in running
        }
        if replicas > 1:
            joined = Replica(f"r{replicas}", namespace, config, work)
            running.append(joined)
            names.add(joined.name)
            at = time.monotonic()
            done = placements.converged(names, count, 600)
            result["join_rebalance_s"] = None if done is None else round(done - at, 2)
            victim = next(r for r in running if r.name != result["coordinator"])
            victim.proc.kill()
            victim.proc.wait(30)
            names.discard(victim.name)
            at = time.monotonic()
            done = placements.converged(names, count, 600)
            result["kill_rebalance_s"] = None if done is None else round(done - at, 2)
        result["foreign_writes"] = placements.foreign
    finally:
        placements.close()
        for item in running:
            item.close()
        target.finish(namespace)
    return result


def run(
    count: int, replicas: list[int], kubeconfig: str | None, rate: float, prelabel: bool
) -> dict[str, Any]:
    target: Any = ClusterTarget(kubeconfig) if kubeconfig else EmulatorProcess()
    work = Path(f"/tmp/cc-sharding-{os.getpid()}")
    work.mkdir(exist_ok=True)
    results = []
    try:
        for n in replicas:
            results.append(scenario(target, count, n, work, rate, prelabel))
            print(json.dumps(results[-1]), flush=True)
    finally:
        target.close()
    single = next((r for r in results if r["replicas"] == 1), None)
    if single is not None:
        base = single["per_replica"]["r0"]
        for result in results:
            for meters in result["per_replica"].values():
                meters["cpu_vs_single"] = round(meters["cpu_s"] / base["cpu_s"], 2)
                meters["cpu_over_idle_vs_single"] = round(
                    meters["cpu_over_idle_s"] / base["cpu_over_idle_s"], 2
                )
                if base["rss_over_idle_mb"] > 0:
                    meters["rss_over_idle_vs_single"] = round(
                        meters["rss_over_idle_mb"] / base["rss_over_idle_mb"], 2
                    )
    return {
        "machine": machine(),
        "target": target.version if kubeconfig else "emulator",
        "rate": rate,
        "prelabel": prelabel,
        "results": results,
    }


def main() -> None:
    if sys.argv[1:2] == ["--replica"]:
        replica(*sys.argv[2:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--kubeconfig", help="a real cluster instead of the emulator")
    parser.add_argument(
        "--prelabel",
        action="store_true",
        help="create objects labelled for their shard (an experiment: a placing webhook)",
    )
    parser.add_argument(
        "--rate", type=float, default=0, help="objects created per second (0: a burst)"
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    replicas = [int(n) for n in args.replicas.split(",")]
    report = run(args.count, replicas, args.kubeconfig, args.rate, args.prelabel)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
