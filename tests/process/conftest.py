"""Helpers for the process-lifecycle tests: apps run on threads against the emulator."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from waiting import wait_until  # noqa: F401 (for the tests here)

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import LeaderElection
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal import serve

LABEL = "example.com/manage"
LEASES = ("coordination.k8s.io", "v1", "leases")


class Running:
    """`app.run(stop=...)` on a thread; `close()` stops and joins it, keeping its error."""

    def __init__(self, app: Application) -> None:
        self.app = app
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"test-app-{app.name}")

    def _run(self) -> None:
        try:
            self.app.run(stop=self.stop)
        except BaseException as error:
            self.error = error
        finally:
            self.done.set()

    def start(self) -> Running:
        self.thread.start()
        return self

    def close(self, timeout: float = 30.0) -> BaseException | None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.app.name} did not stop"
        return self.error


StartApp = Callable[[Application], Running]


@pytest.fixture
def running() -> Iterator[StartApp]:
    started: list[Running] = []

    def start(app: Application) -> Running:
        item = Running(app).start()
        started.append(item)
        return item

    yield start
    for item in started:
        item.close()


class Calls:
    """Thread-safe handler-call log, waited on with a timeout."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.log: list[Any] = []

    def add(self, item: Any) -> None:
        with self.cond:
            self.log.append(item)
            self.cond.notify_all()

    def wait(self, predicate: Callable[[list[Any]], bool], timeout: float = 15.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self.log), timeout)


def configmap(name: str, *, labelled: bool = True, data: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {LABEL: "true"} if labelled else {}},
        "data": data or {},
    }


def managed(kube: Emulator, name: str, namespace: str = "default") -> bool:
    obj = kube.get_object("", "configmaps", namespace, name) or {}
    return (obj.get("data") or {}).get("managed-by") == "cloudcoil"


def fast_election(name: str = "settings", **options: Any) -> LeaderElection:
    """Fast polling; deadlines long enough for a loaded machine (tests pre-release the Lease
    or hand it over cleanly, so the lease duration is never waited out)."""
    options.setdefault("lease_duration", 6)
    options.setdefault("renew_deadline", 5)
    options.setdefault("retry_period", 0.1)
    return LeaderElection(name, **options)


def released_lease(config: Config, name: str = "settings") -> dict[str, Any]:
    """A Lease nobody holds (as after a clean shutdown): the first candidate leads at once."""
    return config.client(LEASES).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 0},
        }
    )


def lease(kube: Emulator, name: str = "settings") -> dict[str, Any]:
    return kube.get_object("coordination.k8s.io", "leases", "default", name) or {}


def write_kubeconfig(kube: Emulator, path: Path, namespace: str = "default") -> Path:
    """A kubeconfig file for the emulator: server, CA data and the admin token."""
    path.write_text(yaml.safe_dump(serve.kubeconfig(kube, namespace)))
    return path
