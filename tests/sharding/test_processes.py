"""Sharded replicas as real processes (`python app.py run`, each with its own token): the ring's
coordinator is SIGKILLed; its objects are reassigned to the two left and converge, and no
object is reconciled by two processes at once (each pass's start and end, on the system-wide
monotonic clock, in a log per process), nor written by one while labelled for another (the
emulator's event history), nor written by any but the shards that stamped it (its request
log, told apart by token)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from waiting import wait_until

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal import serve

from .harness import (
    RING,
    Ledger,
    configmap,
    converged,
    foreign_writes,
    placement,
    reconcile_writers,
)

REPO = Path(__file__).resolve().parents[2]
OBJECTS = 150
TIMEOUT = 120.0

APP = textwrap.dedent(
    """
    import os
    import pathlib
    import time

    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.application import Application
    from cloudcoil_sync.sharding import Sharding

    LOG = pathlib.Path(os.environ["PASS_LOG"])
    NAME = os.environ["CLOUDCOIL_SHARD_IDENTITY"]  # Sharding's identity, as in a Pod
    sharding = Sharding("echo", lease_duration=3, renew_deadline=2, retry_period=0.3)
    app = Application("echo", sharding=sharding)
    configs = app.controller(ConfigMap, label_selector="sharding.example.com/managed=true")


    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        with LOG.open("a") as log:
            log.write(f"start {config.name} {time.monotonic()}\\n")
        config.data = {**(config.data or {}), "writer": NAME}
        with LOG.open("a") as log:
            log.write(f"end {config.name} {time.monotonic()}\\n")
        return config


    if __name__ == "__main__":
        app.main()
    """
)


class Process:
    """One replica: `python app.py run` with its own token, kubeconfig and pass log."""

    def __init__(self, kube: Emulator, directory: Path, name: str) -> None:
        self.name = name
        directory.mkdir()
        (directory / "app.py").write_text(APP)
        token = f"token-{name}"
        kube.add_token(token, name, ("system:masters",))
        kubeconfig = directory / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(serve.kubeconfig(kube, token=token)))
        self.passes = directory / "passes"
        self.stderr = directory / "stderr"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "CLOUDCOIL_"))}
        env.update(
            KUBECONFIG=str(kubeconfig),
            PYTHONPATH=str(REPO),
            PASS_LOG=str(self.passes),
            CLOUDCOIL_SHARD_IDENTITY=name,
        )
        with self.stderr.open("w") as sink:
            self.process = subprocess.Popen(
                [sys.executable, str(directory / "app.py"), "run", "--log-level", "INFO"],
                cwd=directory,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        self.killed_at: float | None = None

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.killed_at = time.monotonic()

    def record(self, ledger: Ledger) -> None:
        """Every pass into `ledger`; one cut short by the kill ends at the kill."""
        started: dict[str, float] = {}
        lines = self.passes.read_text().splitlines() if self.passes.exists() else []
        for line in lines:
            what, name, at = line.split()
            if what == "start":
                started[name] = float(at)
            else:
                ledger.passes[name].append((self.name, started.pop(name), float(at)))
        for name, at in started.items():
            assert self.killed_at is not None, f"{self.name}: a pass of {name} never ended"
            ledger.passes[name].append((self.name, at, self.killed_at))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait(30)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    running: list[Process] = []
    yield running
    for process in running:
        process.close()


def coordinator(kube: Emulator) -> str | None:
    for lease in kube.list_objects("coordination.k8s.io", "leases", "default"):
        if lease["metadata"]["name"] == RING:
            return (lease.get("spec") or {}).get("holderIdentity")
    return None


def test_a_sigkilled_coordinator_process_loses_its_objects_to_the_others(
    tmp_path: Path, processes: list[Process]
) -> None:
    with Emulator(log_size=200_000, history_size=200_000) as kube:
        for index in range(OBJECTS):
            kube.create_object(configmap(f"cm-{index}"))
        names = ["p0", "p1", "p2"]
        processes.extend(Process(kube, tmp_path / name, name) for name in names)
        live = set(names)
        assert wait_until(lambda: converged(kube, live), TIMEOUT, interval=0.2), _logs(processes)

        victim = next(p for p in processes if p.name == coordinator(kube))
        held = {name for name, (shard, _) in placement(kube).items() if shard == victim.name}
        assert held  # it had a share to lose
        victim.kill()
        live.discard(victim.name)
        assert wait_until(lambda: converged(kube, live), TIMEOUT, interval=0.2), _logs(processes)
        assert wait_until(lambda: coordinator(kube) in live, TIMEOUT, interval=0.2)
        placed, written = placement(kube), reconcile_writers(kube, set(names))
        for process in processes:
            if process is not victim:
                process.close()
                assert process.process.returncode == 0, process.stderr.read_text()
        writers = reconcile_writers(kube, set(names))
        foreign, stamped = foreign_writes(kube)
    ledger = Ledger()
    for process in processes:
        process.record(ledger)
    assert ledger.overlapping() == []
    assert foreign == []
    assert len(placed) == OBJECTS
    assert {name: set(users) for name, users in writers.items()} == stamped
    # Every object the victim held went to a live shard, whose write came after its own.
    for name in held:
        shard, writer = placed[name]
        assert shard in live and writer == shard
        assert written[name][-1] == shard and victim.name in written[name]


def _logs(processes: list[Process]) -> str:
    return "\n".join(f"--- {p.name}\n{p.stderr.read_text()[-3000:]}" for p in processes)
