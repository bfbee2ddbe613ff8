"""Failover: time from SIGTERM / SIGKILL of the leader to the new leader's first completed pass.

    python bench/failover.py [--count 5000] [--scenarios sigterm-cold,sigterm-warm,...]
                             [--kubeconfig PATH] [--json out.json]

Replicas are child processes (`--replica NAME NAMESPACE WARM`) of one operator whose reconcile
writes `managed-by: <replica>` into every labelled ConfigMap, with leader election at the
client-go defaults (15 s lease, 10 s renew deadline, 2 s retry). The driver seeds `--count`
objects, starts a first leader and waits until it converged, then per scenario: starts a
standby (cold, or `LeaderElection(warm=True)`), waits until it stands by (warm: until its
cache listed), signals the leader, and follows the objects with its own list + watch:

- `first pass`: signal → the first object written by the new leader (seen on the watch);
- `after acquiring`: the new leader's "Leading" log line → that same first write;
- `converged`: signal → every object written by the new leader.

Also per standby: its RSS while standing by, and (emulator only) the requests made in the
namespace from its start to the signal (the leader idles then: Lease renewals only; a warm
standby adds its paginated LIST and one open watch). Every timestamp is
CLOCK_MONOTONIC, shared by the processes of one machine. Against a real cluster
(`--kubeconfig`) the namespace is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cluster import ClusterTarget, LabelledConfigMaps
from common import KEY, LABEL, ROOT, EmulatorProcess, machine, rss

SCENARIOS = ("sigterm-cold", "sigterm-warm", "sigkill-cold", "sigkill-warm")


# -- the replica child ----------------------------------------------------------------------


def replica(name: str, namespace: str, warm: bool, stamps: str) -> None:
    """Run the operator; note "lead", "synced" and "running" times in the `stamps` file."""
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.application import Application
    from cloudcoil_sync.controller import LeaderElection

    def note(what: str) -> None:
        with open(stamps, "a") as out:
            out.write(f"{time.monotonic()} {what}\n")

    class Stamp(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith("Leading with Lease"):
                note("lead")
            elif message.startswith(("Operator failover is running", "Operator failover started")):
                note("running")

    logging.getLogger("cloudcoil_sync").addHandler(Stamp())
    election = LeaderElection("failover", identity=name, warm=warm)
    app = Application("failover", namespace=namespace, leader_election=election)
    configs = app.controller(ConfigMap, label_selector=f"{LABEL}=true", workers=4)

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        config.data = {**(config.data or {}), KEY: name}
        return config

    if warm:

        def synced() -> None:  # the bench's own probe: poll until the standby's cache lists
            while True:
                manager = app.manager
                try:
                    if manager is not None:
                        manager.cached(ConfigMap, namespace=namespace).list()
                        note("synced")
                        return
                except Exception:
                    pass
                time.sleep(0.05)

        threading.Thread(target=synced, daemon=True).start()
    sys.argv = [sys.argv[0], "run", "--log-level", "INFO"]
    app.main()


# -- the driver -----------------------------------------------------------------------------


class Holders(LabelledConfigMaps):
    """Who wrote each labelled ConfigMap last (its `managed-by`), followed by list + watch."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.by: dict[str, str] = {}
        self.first: dict[str, float] = {}  # holder -> when its first write was seen
        super().__init__(kubeconfig, namespace)

    def _seen(self, obj: dict[str, Any]) -> None:
        holder = (obj.get("data") or {}).get(KEY, "")
        with self.cond:
            self.by[obj["metadata"]["name"]] = holder
            self.first.setdefault(holder, time.monotonic())
            self.cond.notify_all()

    def first_write(self, holder: str, timeout: float) -> float | None:
        with self.cond:
            self.cond.wait_for(lambda: holder in self.first, timeout)
            return self.first.get(holder)

    def converged(self, holder: str, count: int, timeout: float) -> float | None:
        with self.cond:
            done = self.cond.wait_for(
                lambda: sum(1 for h in self.by.values() if h == holder) >= count, timeout
            )
            return time.monotonic() if done else None


class Replica:
    def __init__(self, name: str, namespace: str, kubeconfig: str, warm: bool, work: Path):
        self.name = name
        self.stamps = work / f"{name}.stamps"
        self.log = work / f"{name}.log"
        env = {**os.environ, "KUBECONFIG": kubeconfig, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, __file__]
        with self.log.open("w") as sink:
            self.proc = subprocess.Popen(
                [*command, "--replica", name, namespace, str(int(warm)), str(self.stamps)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )

    def stamp(self, what: str, timeout: float) -> float:
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            if self.stamps.exists():
                for line in self.stamps.read_text().splitlines():
                    at, name = line.split()
                    if name == what:
                        return float(at)
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise SystemExit(f"replica {self.name}: no {what!r} ({self.log.read_text()[-2000:]})")

    def rss_mb(self) -> float:
        return rss(self.proc.pid) / 2**20

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


def run(count: int, scenarios: list[str], kubeconfig: str | None) -> dict[str, Any]:
    namespace = f"failover-{os.getpid()}"
    target: Any = ClusterTarget(kubeconfig) if kubeconfig else EmulatorProcess()
    work = Path(f"/tmp/cc-failover-{os.getpid()}")
    work.mkdir(exist_ok=True)
    replicas: list[Replica] = []
    results: list[dict[str, Any]] = []
    try:
        target.seed(namespace, count)
        config = target.kubeconfig(namespace)
        holders = Holders(config, namespace)
        leader = Replica("r0", namespace, config, False, work)
        replicas.append(leader)
        if holders.converged("r0", count, 600) is None:
            raise SystemExit("the first leader did not converge")
        for index, scenario in enumerate(scenarios, 1):
            how, mode = scenario.split("-")
            if not kubeconfig:
                target.requests(namespace)  # clear the log
            standby = Replica(f"r{index}", namespace, config, mode == "warm", work)
            replicas.append(standby)
            standby.stamp("running", 120)
            if mode == "warm":
                standby.stamp("synced", 120)
            time.sleep(6)  # stand by for a while: Lease waits, and (warm) the open watch
            standing = {"standby_rss_mb": round(standby.rss_mb(), 1)}
            if not kubeconfig:
                standing["standby_window_requests"] = target.requests(namespace)
            signalled = time.monotonic()
            leader.proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
            first = holders.first_write(standby.name, 120)
            lead = standby.stamp("lead", 60)
            done = holders.converged(standby.name, count, 600)
            code = leader.proc.wait(60)
            if first is None or done is None:
                raise SystemExit(f"{scenario}: the new leader did not write within the timeout")
            results.append(
                {
                    "scenario": scenario,
                    "first_pass_s": round(first - signalled, 3),
                    "acquired_s": round(lead - signalled, 3),
                    "first_pass_after_acquiring_s": round(first - lead, 3),
                    "converged_s": round(done - signalled, 2),
                    "old_leader_exit": code,
                    **standing,
                }
            )
            print(json.dumps(results[-1]), flush=True)
            leader = standby
        holders.close()
    finally:
        for item in replicas:
            item.close()
        if kubeconfig:
            target.finish(namespace)
        target.close()
    return {
        "machine": machine(),
        "target": target.version if kubeconfig else "emulator",
        "count": count,
        "results": results,
    }


def main() -> None:
    if sys.argv[1:2] == ["--replica"]:
        name, namespace, warm, stamps = sys.argv[2:6]
        replica(name, namespace, warm == "1", stamps)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--kubeconfig", help="a real cluster instead of the emulator")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    report = run(args.count, args.scenarios.split(","), args.kubeconfig)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
