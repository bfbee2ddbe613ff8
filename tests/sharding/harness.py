"""Sharded replicas of one ConfigMap operator against the emulator, each with its own token
and its own FaultProxy (so a test can cut one replica off: a kill, as the API sees it).

The reconciler stamps `data.writer` with its shard and records every pass's interval in a
shared `Ledger`, which reports any object reconciled by two shards at once."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from contextlib import ExitStack
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from leader.proxy import FaultProxy

from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.sharding import Sharding, shard_key
from cloudcoil_sync.testing import Emulator

RING = "echo"
LABEL = "sharding.example.com/managed"
KEY = shard_key(RING)
# A renew deadline of seconds, not one: replicas share one GIL with the emulator, and a
# loaded machine (a full suite beside them) delays a renewal past 1.2 s.
LEASES = {"lease_duration": 4, "renew_deadline": 3, "retry_period": 0.3}
JSON = dict[str, Any]


class Ledger:
    """Every pass: (object, shard, start, end); overlaps between shards are violations."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, set[str]] = defaultdict(set)
        self.passes: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
        self.overlaps: list[tuple[str, str, str]] = []

    def enter(self, name: str, shard: str) -> float:
        with self._lock:
            others = self._running[name] - {shard}
            self.overlaps.extend((name, shard, other) for other in others)
            self._running[name].add(shard)
        return time.monotonic()

    def leave(self, name: str, shard: str, started: float) -> None:
        with self._lock:
            self._running[name].discard(shard)
            self.passes[name].append((shard, started, time.monotonic()))

    def overlapping(self) -> list[tuple[str, str, str]]:
        """Also from the recorded intervals (catches a pass abandoned past its timeout)."""
        found = list(self.overlaps)
        with self._lock:
            items = {name: sorted(p, key=lambda p: p[1]) for name, p in self.passes.items()}
        for name, passes in items.items():
            latest: dict[str, float] = {}  # each shard's latest pass end so far
            for shard, start, end in passes:
                found.extend(
                    (name, other, shard)
                    for other, other_end in latest.items()
                    if other != shard and start < other_end
                )
                latest[shard] = max(end, latest.get(shard, end))
        return found


class Replica:
    """One sharded Application on a thread, talking to the emulator through its own proxy."""

    def __init__(
        self,
        kube: Emulator,
        identity: str,
        ledger: Ledger,
        stack: ExitStack,
        webhook: WebhookServer | None = None,
        **sharding: Any,
    ) -> None:
        self.identity = identity
        token = f"shard-token-{identity}"
        kube.add_token(token, identity, ("system:masters",))
        self.proxy = stack.enter_context(FaultProxy("127.0.0.1", kube.port))
        self.config = Config(
            server=f"https://127.0.0.1:{self.proxy.port}",
            token=token,
            ca_data=kube.ca_pem,
            namespace="default",
        )
        stack.callback(self.config.close)
        controller: Controller[ConfigMap] = Controller(
            ConfigMap, label_selector=f"{LABEL}=true", workers=4
        )

        @controller.reconcile()
        def reconcile(cm: ConfigMap) -> ConfigMap:
            name = cm.metadata.name if cm.metadata and cm.metadata.name else ""
            started = ledger.enter(name, identity)
            try:
                cm.data = {**(cm.data or {}), "writer": identity}
                return cm
            finally:
                ledger.leave(name, identity, started)

        self.app = Application(
            "echo",
            controller,
            config=self.config,
            webhook=webhook,
            sharding=Sharding(RING, identity=identity, **{**LEASES, **sharding}),
        )
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"shard-{identity}")
        stack.callback(self._stop_quietly)  # before its Config closes, if a test failed

    def _run(self) -> None:
        try:
            self.app.run(stop=self.stop)
        except BaseException as error:
            self.error = error

    def start(self) -> Replica:
        self.thread.start()
        self.app.wait_ready(timeout=30)
        return self

    def kill(self) -> None:
        """Cut it off the API server: its Lease expires, its fence closes, nothing is released."""
        self.proxy.set_mode("reset")

    def _stop_quietly(self) -> None:
        if self.thread.is_alive():
            self.stop.set()
            self.thread.join(60)

    def close(self, timeout: float = 60) -> BaseException | None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"replica {self.identity} did not stop"
        return self.error


def configmap(name: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {LABEL: "true"}},
        "data": {"value": name},
    }


def placement(kube: Emulator) -> dict[str, tuple[str | None, str | None]]:
    """Each managed ConfigMap's (assigned shard, last writer)."""
    return {
        obj["metadata"]["name"]: (
            (obj["metadata"].get("labels") or {}).get(KEY),
            (obj.get("data") or {}).get("writer"),
        )
        for obj in kube.list_objects("", "configmaps", "default")
        if (obj["metadata"].get("labels") or {}).get(LABEL) == "true"
    }


def converged(kube: Emulator, live: set[str]) -> bool:
    """Every object assigned to a live shard and last written by it; every live shard used."""
    placed = placement(kube).values()
    return {shard for shard, _ in placed} == live and all(
        writer == shard for shard, writer in placed
    )


OBJECT_PATH = "/api/v1/namespaces/default/configmaps/"


def reconcile_writers(kube: Emulator, users: set[str]) -> dict[str, list[str]]:
    """Per object, the users whose reconcile writes (not the label patches) succeeded,
    in the order the emulator answered them."""
    writers: dict[str, list[str]] = defaultdict(list)
    for entry in sorted(kube.request_log, key=lambda entry: entry.at):
        if entry.method != "PATCH" or not entry.path.startswith(OBJECT_PATH):
            continue
        if entry.user not in users or entry.status >= 300:
            continue
        if entry.query.get("fieldManager", "").startswith("cloudcoil-sharding-"):
            continue
        writers[entry.path.removeprefix(OBJECT_PATH)].append(entry.user)
    return writers


def foreign_writes(kube: Emulator) -> tuple[list[str], dict[str, set[str]]]:
    """From the emulator's event history: objects whose `writer` changed to a shard while
    labelled for another (a write by a shard that no longer owned it), and each object's
    writers."""
    foreign: list[str] = []
    stamped: dict[str, set[str]] = defaultdict(set)
    for event in kube.store.events_after(0):
        metadata = event.obj.get("metadata") or {}
        if event.type != "MODIFIED" or (metadata.get("labels") or {}).get(LABEL) != "true":
            continue
        writer = (event.obj.get("data") or {}).get("writer")
        before = ((event.old or {}).get("data") or {}).get("writer")
        if writer is None or writer == before:
            continue
        stamped[metadata["name"]].add(writer)
        if (metadata.get("labels") or {}).get(KEY) != writer:
            foreign.append(metadata["name"])
    return foreign, stamped
