"""A whole operator (an `Application` run on a thread) against the emulator under faults.

The operator reconciles labelled ConfigMaps: it copies `data.value` into `data.echo` and
holds a finalizer whose handler records the deletion. So the end state proves that the last
version of every object was seen (echo == value), that deletions were seen (finalizer ran,
object gone, cache without it) and that nothing else was touched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from waiting import wait_until as poll_until

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, LeaderElection
from cloudcoil_sync.testing import Emulator

LABEL = "reliability.example.com/managed"
FINALIZER = "reliability.example.com/cleanup"
CONFIGMAPS = ("", "v1", "configmaps")
# The primary informer's list/watch endpoint: failing it holds a reconnect gap open.
LIST_WATCH = r"^/api/v1/namespaces/default/configmaps$"
JSON = dict[str, Any]


class Record:
    """What the operator's handlers saw, thread-safe and waitable."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.passes: dict[str, int] = {}
        self.finalized: dict[str, int] = {}
        self.failures = 0

    def reconciled(self, name: str) -> None:
        with self.cond:
            self.passes[name] = self.passes.get(name, 0) + 1
            self.cond.notify_all()

    def deleted(self, name: str) -> None:
        with self.cond:
            self.finalized[name] = self.finalized.get(name, 0) + 1
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout)


Hook = Callable[[ConfigMap], None]


def echo_operator(
    config: Config,
    record: Record,
    *,
    hook: Hook | None = None,
    finalizer: bool = True,
    election: LeaderElection | None = None,
    **options: Any,
) -> tuple[Application, Controller[ConfigMap]]:
    """The operator under test; `hook(cm)` runs first in every reconcile pass."""
    app = Application("reliability", config=config, leader_election=election)
    options.setdefault("workers", 4)
    configs = app.controller(ConfigMap, label_selector=f"{LABEL}=true", **options)

    @configs.reconcile()
    def reconcile(cm: ConfigMap) -> ConfigMap:
        if hook is not None:
            hook(cm)
        data = dict(cm.data or {})
        data["echo"] = data.get("value", "")
        cm.data = data
        record.reconciled(cm.name or "")
        return cm

    if finalizer:

        @configs.finalize(FINALIZER)
        def cleanup(cm: ConfigMap) -> None:
            record.deleted(cm.name or "")

    return app, configs


class Running:
    """`app.run(stop=...)` on a thread; `close()` stops and joins it, returning its error."""

    def __init__(self, app: Application) -> None:
        self.app = app
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"reliability-{app.name}")

    def _run(self) -> None:
        try:
            self.app.run(stop=self.stop)
        except BaseException as error:  # reported by close()
            self.error = error

    def start(self, ready_timeout: float = 20) -> Running:
        self.thread.start()
        self.app.wait_ready(timeout=ready_timeout)
        return self

    def close(self, timeout: float = 30.0) -> BaseException | None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.app.name} did not stop within {timeout}s"
        return self.error


@pytest.fixture
def operators() -> Iterator[Callable[[Application], Running]]:
    started: list[Running] = []

    def start(app: Application) -> Running:
        item = Running(app)
        started.append(item)
        return item.start()

    yield start
    for item in started:
        if item.thread.is_alive() or not item.stop.is_set():
            item.close()


def configmap(name: str, value: str, *, labelled: bool = True, **data: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {LABEL: "true"} if labelled else {}},
        "data": {"value": value, **data},
    }


def managed(kube: Emulator, namespace: str = "default") -> dict[str, JSON]:
    """The labelled ConfigMaps the emulator holds, by name."""
    return {
        o["metadata"]["name"]: o
        for o in kube.list_objects("", "configmaps", namespace)
        if (o["metadata"].get("labels") or {}).get(LABEL) == "true"
    }


def unconverged(kube: Emulator, expected: dict[str, str]) -> list[str]:
    """Names whose stored state differs from `expected` (name -> value), plus extras.

    Converged means: exactly the expected objects exist, each echoes its value, carries the
    finalizer and is not being deleted.
    """
    objects = managed(kube)
    wrong = sorted(set(objects) ^ set(expected))
    for name, value in expected.items():
        obj = objects.get(name)
        if obj is None:
            continue
        data = obj.get("data") or {}
        meta = obj["metadata"]
        if (
            data.get("value") != value
            or data.get("echo") != value
            or FINALIZER not in (meta.get("finalizers") or [])
            or meta.get("deletionTimestamp")
        ):
            wrong.append(name)
    return wrong


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Re-check `predicate` every `interval` until it holds (False after `timeout`).

    For predicates that scan hundreds of objects: `Emulator.wait_for` re-checks on every
    store change, which under churn costs more than the operator being measured.
    """
    return poll_until(predicate, timeout, interval)


def converge(kube: Emulator, expected: dict[str, str], timeout: float) -> list[str]:
    """Wait until `unconverged` is empty; return what is still wrong."""
    wait_until(lambda: not unconverged(kube, expected), timeout=timeout)
    return unconverged(kube, expected)


def cached(controller: Controller[ConfigMap]) -> dict[str, str]:
    """The operator's informer view: name -> resourceVersion."""
    runtime: Any = controller.runtime
    assert runtime is not None
    return {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"]
        for o in runtime.primary.store.list()
    }


def emulator_view(kube: Emulator) -> dict[str, str]:
    return {name: o["metadata"]["resourceVersion"] for name, o in managed(kube).items()}


def same_view(kube: Emulator, controller: Controller[ConfigMap], timeout: float) -> bool:
    """Wait until the operator's cache equals the emulator's labelled objects (by rv)."""
    return wait_until(lambda: cached(controller) == emulator_view(kube), timeout=timeout)
