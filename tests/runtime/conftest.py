"""Shared models and fixtures for the controller runtime tests (emulator over HTTPS)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime, InformerPool
from cloudcoil_sync.crd import CRD
from cloudcoil_sync.testing import Emulator

from .widgets import Widget


class Calls:
    """Thread-safe counts of handler calls, waited on with a timeout (no sleeps)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.counts: dict[str, int] = {}
        self.log: list[str] = []

    def hit(self, name: str) -> int:
        with self._cond:
            self.counts[name] = self.counts.get(name, 0) + 1
            self.log.append(name)
            self._cond.notify_all()
            return self.counts[name]

    def __getitem__(self, name: str) -> int:
        with self._cond:
            return self.counts.get(name, 0)

    def wait(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def reached(self, name: str, times: int = 1, timeout: float = 10.0) -> bool:
        return self.wait(lambda: self.counts.get(name, 0) >= times, timeout)


class Harness:
    """Starts runtimes on one pool and stops them (and the pool) after the test."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.pool = InformerPool(config)
        self.metrics = OperatorMetrics()
        self.runtimes: list[ControllerRuntime] = []
        self.fatal: list[BaseException] = []
        self.failed = threading.Event()  # set by the first fatal error a runtime reports

    def runtime(self, controller: Controller[Any], **options: Any) -> ControllerRuntime:
        options.setdefault("base_delay", 0.05)
        options.setdefault("max_delay", 0.4)
        runtime = ControllerRuntime(
            controller,
            self.config,
            informers=self.pool,
            metrics=self.metrics,
            on_fatal=self._on_fatal,
            **options,
        )
        self.runtimes.append(runtime)
        return runtime

    def _on_fatal(self, error: BaseException) -> None:
        self.fatal.append(error)
        self.failed.set()

    def run(self, controller: Controller[Any], **options: Any) -> ControllerRuntime:
        runtime = self.runtime(controller, **options)
        runtime.start()
        runtime.wait_synced(timeout=10)
        assert runtime.start_workers() and runtime.ready
        return runtime

    def close(self) -> None:
        for runtime in reversed(self.runtimes):
            runtime.stop(timeout=5)
        assert self.pool.stop(timeout=5)


@pytest.fixture
def harness(kube_config: Config) -> Iterator[Harness]:
    running = Harness(kube_config)
    yield running
    running.close()


@pytest.fixture
def widgets(kube_config: Config) -> Config:
    kube_config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions")).create(
        CRD(Widget).manifest()
    )
    return kube_config


def create_widget(config: Config, name: str, size: int = 1) -> dict[str, Any]:
    return config.client(Widget).raw.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": {"size": size},
        }
    )


def stored(kube: Emulator, group: str, plural: str, name: str) -> dict[str, Any]:
    return kube.get_object(group, plural, "default", name) or {}


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
