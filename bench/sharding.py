"""Sharding: per-replica CPU and memory with 1, 2 and 4 replicas, rebalance after a join and a
kill, and writes by a shard to an object not assigned to it (double reconciles).

    python bench/sharding.py [--count 2000] [--replicas 1,2,4] [--rate 0] [--rounds 1]
                             [--size 0] [--webhook | --prelabel] [--kubeconfig PATH]
                             [--json out.json]

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
the peak RSS and the RSS over its idle ring-formed floor (the cache's share), that RSS by kind
of mapping (`memory_map.py`: thread malloc arenas, thread stacks, other anonymous memory, which
is mostly CPython's object arenas; file-backed pages). The coordinator
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
would do): an experiment that takes the claims out, not a mode of the product. `--webhook`
runs the product's `Sharding(placing_webhook=True)`: every replica serves the placing webhook
on a port of its own behind one round-robin TCP front (`forwarder.py`, per connection, as a
Service), registered as the webhook configuration's `clientConfig.url` (`placing.py`);
`--size B` adds B bytes of data to every object (the cache's share then outweighs what a
process keeps whatever its share); `born_placed` counts the objects first seen already
labelled, `placing_connections` the API server's connections each replica's webhook got.
`--rounds K` repeats the replica counts K times, interleaved (the join and the kill in the
first round only), relates each round to its own single replica, and summarises per N the
median, min and max over every replica of every round: one run's single replica varied by
30 % on the shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
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
    rss,
)
from memory_map import breakdown
from placing import PlacingWebhook

from cloudcoil_sync.sharding import ObjectRef, pick_shard

RING = "shardbench"
SHARD = f"shard.sharding.cloudcoil.dev/{RING}"
IDLE = 5.0
IDLE_PROBE = 10.0


def operator(name: str, namespace: str, port: int = 0, tls: str = "") -> Any:
    """The benchmark's operator as replica `name`; with a `port`, serving the placing
    webhook there with the certificate in directory `tls`."""
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.application import Application, WebhookServer
    from cloudcoil_sync.sharding import Sharding

    webhook = None
    if port:
        webhook = WebhookServer(
            ca_bundle=Path(tls, "ca.crt").read_bytes(),
            certfile=str(Path(tls, "tls.crt")),
            keyfile=str(Path(tls, "tls.key")),
            host="127.0.0.1",
            port=port,
            secure_metrics=False,
        )
    sharding = Sharding(identity=name, placing_webhook=webhook is not None)
    app = Application(RING, namespace=namespace, webhook=webhook, sharding=sharding)
    configs = app.controller(ConfigMap, label_selector=f"{LABEL}=true", workers=4)

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        config.data = {**(config.data or {}), KEY: name}
        return config

    return app


def replica(name: str, namespace: str, port: str = "0", tls: str = "") -> None:
    app = operator(name, namespace, int(port), tls)
    sys.argv = [sys.argv[0], "run", "--log-level", "WARNING"]
    app.main()


class Placements(LabelledConfigMaps):
    """Each labelled ConfigMap's (shard label, managed-by), followed by list + watch."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.now: dict[str, tuple[str | None, str | None]] = {}
        self.foreign = 0  # a write naming its writer while labelled for another shard
        self.born_placed = 0  # first seen already labelled (by a placing webhook)
        self.relabelled = 0  # label changes after the first placement (drains, moves)
        self.namespace = namespace
        super().__init__(kubeconfig, namespace)

    def _seen(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        shard = (obj["metadata"].get("labels") or {}).get(SHARD)
        writer = (obj.get("data") or {}).get(KEY)
        with self.cond:
            if name not in self.now and shard is not None:
                self.born_placed += 1
            placed, before = self.now.get(name, (None, None))
            if placed is not None and shard != placed:
                self.relabelled += 1
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
    def __init__(
        self,
        name: str,
        namespace: str,
        kubeconfig: str,
        work: Path,
        placing: PlacingWebhook | None = None,
    ) -> None:
        self.name = name
        self.log = work / f"{name}.log"
        self.placing = placing
        self.port = placing.add() if placing is not None else 0
        tls = str(placing.tls) if placing is not None else ""
        env = {**os.environ, "KUBECONFIG": kubeconfig, "PYTHONPATH": str(ROOT)}
        with self.log.open("w") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--replica", name, namespace, str(self.port), tls],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss_mb(self) -> float:
        return rss(self.proc.pid) / 2**20

    def peak_rss_mb(self) -> float:
        return peak_rss(self.proc.pid) / 2**20

    def memory_map(self) -> dict[str, float]:
        return breakdown(self.proc.pid)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        if self.placing is not None:
            self.placing.remove(self.port)

    def close(self) -> None:
        if self.placing is not None:
            self.placing.remove(self.port)
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
    kubeconfig: str,
    namespace: str,
    count: int,
    rate: float,
    placed: set[str] | None,
    size: int = 0,
) -> None:
    """`count` objects from 8 threads, at most `rate` per second (0: as fast as they go);
    with `placed`, each already labelled for its target among those shards; with `size`, each
    carries that many more bytes of data (a larger object to cache)."""
    session, server = raw_session(kubeconfig, pool=8)
    base = f"{server}/api/v1/namespaces/{namespace}/configmaps"
    begin = time.monotonic()

    def create(i: int) -> None:
        if rate > 0:
            time.sleep(max(0.0, begin + i / rate - time.monotonic()))
        body = configmap(namespace, i)
        if size:
            body["data"]["payload"] = (f"{i:08d}" * (size // 8 + 1))[:size]
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
    target: Any,
    count: int,
    replicas: int,
    work: Path,
    rate: float,
    mode: str,
    round_: int = 0,
    size: int = 0,
) -> dict[str, Any]:
    """One run of `replicas` (the join and the kill only in round 0)."""
    namespace = f"shards{replicas}-{round_}-{os.getpid()}"
    target.seed(namespace, 0)
    config = target.kubeconfig(namespace)
    placements = Placements(config, namespace)
    running: list[Replica] = []
    result: dict[str, Any] = {"replicas": replicas, "count": count, "round": round_}
    placing = None
    if mode == "webhook":
        placing = PlacingWebhook(config, namespace, work, f"{RING}.{namespace}.svc")
        placing.register(configurations(namespace, placing.tls))
    try:
        running = [Replica(f"r{i}", namespace, config, work, placing) for i in range(replicas)]
        names = {r.name for r in running}
        if not ring_formed(config, namespace, names, 120):
            raise SystemExit(f"the ring of {replicas} did not form")
        if placing is not None and not placing.places_on(probes(names, namespace), 60):
            raise SystemExit("the placing webhook did not place on every replica")
        # The idle rate first (Lease renewals, the Lease watch, timers): every replica pays
        # it for as long as it runs, whatever its share, so the share's own CPU is the
        # CPU over it.
        probe = {r.name: r.cpu() for r in running}
        time.sleep(IDLE_PROBE)
        idle = {r.name: (r.cpu(), r.rss_mb()) for r in running}
        idle_map = {r.name: r.memory_map() for r in running}
        idle_rate = {name: (idle[name][0] - probe[name]) / IDLE_PROBE for name in idle}
        started = time.monotonic()
        placed = set(names) if mode == "prelabel" else None
        create_objects(config, namespace, count, rate, placed, size)
        done = placements.converged(names, count, 900)
        if done is None:
            raise SystemExit(f"{replicas} replicas did not converge: {placements.shares()}")
        result["converged_s"] = round(done - started, 2)
        result["born_placed"] = placements.born_placed
        result["relabelled"] = placements.relabelled
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
                "rss_map_over_idle_mb": over(r.memory_map(), idle_map[r.name]),
            }
            for r in running
        }
        if replicas > 1 and round_ == 0:
            joined = Replica(f"r{replicas}", namespace, config, work, placing)
            running.append(joined)
            names.add(joined.name)
            at = time.monotonic()
            done = placements.converged(names, count, 600)
            result["join_rebalance_s"] = None if done is None else round(done - at, 2)
            victim = next(r for r in running if r.name != result["coordinator"])
            victim.kill()
            names.discard(victim.name)
            at = time.monotonic()
            done = placements.converged(names, count, 600)
            result["kill_rebalance_s"] = None if done is None else round(done - at, 2)
        result["foreign_writes"] = placements.foreign
        if placing is not None:
            result["placing_connections"] = placing.connections()
    finally:
        placements.close()
        for item in running:
            item.close()
        if placing is not None:
            placing.close()
        target.finish(namespace)
    return result


def over(now: dict[str, float], then: dict[str, float]) -> dict[str, float]:
    """Resident MB by kind of mapping gained since `then` (bench/memory_map.py)."""
    return {kind: round(now.get(kind, 0) - then.get(kind, 0), 2) for kind in sorted({*now, *then})}


def probes(shards: set[str], namespace: str) -> dict[str, str]:
    """An object name hashed to each of `shards` (name → shard)."""
    found: dict[str, str] = {}
    index = 0
    while len(found) < len(shards):
        name = f"probe-{index}"
        shard = str(pick_shard(shards, ObjectRef("", "ConfigMap", namespace, name)))
        found.setdefault(shard, name)
        index += 1
    return {name: shard for shard, name in found.items()}


def configurations(namespace: str, tls: Path) -> list[dict[str, Any]]:
    """The operator's webhook configurations (what `manifests` writes for it)."""
    app = operator("driver", namespace, 1, str(tls))
    return list(app.webhook_configurations((tls / "ca.crt").read_bytes()))


def run(
    count: int,
    replicas: list[int],
    kubeconfig: str | None,
    rate: float,
    mode: str,
    rounds: int = 1,
    size: int = 0,
) -> dict[str, Any]:
    target: Any = ClusterTarget(kubeconfig) if kubeconfig else EmulatorProcess()
    work = Path(f"/tmp/cc-sharding-{os.getpid()}")
    work.mkdir(exist_ok=True)
    results = []
    try:
        for round_ in range(rounds):  # interleaved: a slow spell of the machine hits all N
            for n in replicas:
                result = scenario(target, count, n, work, rate, mode, round_, size)
                results.append(result)
                print(json.dumps(result), flush=True)
    finally:
        target.close()
    for round_ in range(rounds):
        relate([r for r in results if r["round"] == round_])
    return {
        "machine": machine(),
        "target": target.version if kubeconfig else "emulator",
        "rate": rate,
        "extra_bytes": size,
        "placing": mode,
        "rounds": rounds,
        "results": results,
        "summary": summary(results),
    }


def relate(results: list[dict[str, Any]]) -> None:
    """Each replica's meters divided by the single replica's of the same round."""
    single = next((r for r in results if r["replicas"] == 1), None)
    if single is None:
        return
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


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per replica count, over every replica of every round: median, min and max of CPU
    over idle and RSS over idle relative to the round's single replica."""
    table: dict[str, dict[str, Any]] = {}
    for n in sorted({r["replicas"] for r in results}):
        meters = [m for r in results if r["replicas"] == n for m in r["per_replica"].values()]
        row: dict[str, Any] = {}
        for key in ("cpu_over_idle_s", "cpu_over_idle_vs_single", "rss_over_idle_vs_single"):
            values = sorted(m[key] for m in meters if key in m)
            if values:
                row[key] = {
                    "median": round(statistics.median(values), 2),
                    "min": values[0],
                    "max": values[-1],
                }
        table[str(n)] = row
    return table


X, D = "\u00d7", "\u2013"  # the tables' times sign and dash


def table(report: dict[str, Any]) -> str:
    """The report as the Markdown tables of bench/sharding-results.md."""
    lines = [
        f"| replicas | round | replica | objects | CPU s | CPU over idle s | {X} single "
        f"| idle ms/s | peak RSS MB | RSS over idle MB | {X} single |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in report["results"]:
        for name, m in sorted(result["per_replica"].items()):
            role = f"{name} (coordinator)" if name == result.get("coordinator") else name
            lines.append(
                f"| {result['replicas']} | {result['round']} | {role} "
                f"| {result['shares'].get(name, 0)} | {m['cpu_s']} | {m['cpu_over_idle_s']} "
                f"| {m.get('cpu_over_idle_vs_single', D)} | {m['idle_cpu_ms_per_s']} "
                f"| {m['peak_rss_mb']} | {m['rss_over_idle_mb']} "
                f"| {m.get('rss_over_idle_vs_single', D)} |"
            )
    lines += [
        "",
        "| replicas | round | converged s | born placed | relabelled | join → converged s "
        "| SIGKILL → converged s | foreign writes | CPU of all replicas s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        total = round(sum(m["cpu_s"] for m in r["per_replica"].values()), 2)
        lines.append(
            f"| {r['replicas']} | {r['round']} | {r['converged_s']} | {r['born_placed']} "
            f"| {r['relabelled']} | {r.get('join_rebalance_s', D)} "
            f"| {r.get('kill_rebalance_s', D)} | {r['foreign_writes']} | {total} |"
        )
    lines += [
        "",
        f"| replicas | CPU over idle {X} single: median (min{D}max) | RSS over idle {X} single |",
    ]
    lines.append("|---|---|---|")
    for n, row in report["summary"].items():
        cells = [
            f"{v['median']} ({v['min']}{D}{v['max']})" if v else D
            for v in (row.get("cpu_over_idle_vs_single"), row.get("rss_over_idle_vs_single"))
        ]
        lines.append(f"| {n} | {cells[0]} | {cells[1]} |")
    return "\n".join([*lines, "", *memory_table(report)])


def memory_table(report: dict[str, Any]) -> list[str]:
    """RSS over idle by kind of mapping, per replica (where the cache's share went)."""
    kinds = sorted(
        {
            k
            for r in report["results"]
            for m in r["per_replica"].values()
            for k in m["rss_map_over_idle_mb"]
        }
    )
    lines = [
        "| replicas | round | replica | " + " | ".join(f"{k} MB" for k in kinds) + " |",
        "|---|---|---|" + "---|" * len(kinds),
    ]
    for result in report["results"]:
        for name, m in sorted(result["per_replica"].items()):
            cells = " | ".join(str(m["rss_map_over_idle_mb"].get(k, 0.0)) for k in kinds)
            lines.append(f"| {result['replicas']} | {result['round']} | {name} | {cells} |")
    return lines


def main() -> None:
    if sys.argv[1:2] == ["--replica"]:
        replica(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--kubeconfig", help="a real cluster instead of the emulator")
    parser.add_argument(
        "--prelabel",
        action="store_true",
        help="create objects labelled for their shard (an experiment: objects born placed)",
    )
    parser.add_argument(
        "--webhook",
        action="store_true",
        help="Sharding(placing_webhook=True): replicas' webhooks behind one round-robin front",
    )
    parser.add_argument(
        "--rate", type=float, default=0, help="objects created per second (0: a burst)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat every replica count (interleaved)"
    )
    parser.add_argument(
        "--size", type=int, default=0, help="extra bytes of data in every object (0: ~400 B)"
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    replicas = [int(n) for n in args.replicas.split(",")]
    if args.size < 0:
        parser.error(f"--size must be 0 or more bytes, not {args.size}")
    if args.prelabel and args.webhook:
        parser.error("--prelabel and --webhook are two ways of placing: pick one")
    mode = "webhook" if args.webhook else "prelabel" if args.prelabel else "claims"
    report = run(args.count, replicas, args.kubeconfig, args.rate, mode, args.rounds, args.size)
    print(json.dumps(report, indent=2))
    print(table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
