"""Scenarios 2 and 3: 5xx/429 storms during a 500-object convergence, and 409 conflict
storms from a concurrent writer (no concurrent change ever overwritten)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config, Conflict
from cloudcoil_sync.testing import Emulator

from .conftest import (
    CONFIGMAPS,
    FINALIZER,
    LABEL,
    LIST_WATCH,
    Record,
    Running,
    configmap,
    converge,
    echo_operator,
    managed,
    same_view,
    wait_until,
)


def echoed(kube: Emulator) -> int:
    return sum(1 for o in managed(kube).values() if (o.get("data") or {}).get("echo"))


def test_5xx_and_429_storms_during_a_500_object_convergence(
    kube_emulator: Emulator,
    kube_config: Config,
    operators: Callable[[Application], Running],
) -> None:
    kube = kube_emulator
    record = Record()
    app, configs = echo_operator(kube_config, record)
    expected = {f"cm-{i:03d}": f"v{i}" for i in range(500)}
    for name, value in expected.items():
        kube.create_object(configmap(name, value))
    faults = kube.faults
    # The start: the first list fails (retried by the client), then is throttled.
    faults.inject(500, count=2, method="GET", path=LIST_WATCH)
    faults.inject(429, count=1, method="GET", path=LIST_WATCH, retry_after=1)
    # The first wave of writes: server errors (not retried by the client: the workers back
    # off per key) and throttling with Retry-After (retried by the client after it).
    faults.inject(503, count=40, method="PATCH")
    faults.inject(429, count=12, method="PATCH", retry_after=1)
    operators(app)
    assert wait_until(lambda: echoed(kube) >= 250, timeout=20)
    # A second wave mid-convergence, with the watch cut (the resume fails twice as well).
    faults.inject(502, count=30, method="PATCH")
    faults.inject(504, count=2, method="GET", path=LIST_WATCH)
    faults.inject(429, count=8, method="PATCH", retry_after=1)
    kube.drop_watches(abort=True)
    assert converge(kube, expected, timeout=25) == []
    assert faults.injected == 40 + 12 + 30 + 8 + 2 + 2 + 1
    # Exactly the intended state: nothing but the echo added, nothing lost.
    for name, obj in managed(kube).items():
        assert obj["data"] == {"value": expected[name], "echo": expected[name]}, name
        assert obj["metadata"]["labels"] == {LABEL: "true"}
        assert obj["metadata"]["finalizers"] == [FINALIZER]
    assert same_view(kube, configs, timeout=10)
    runtime: Any = configs.runtime
    assert runtime.status.errors >= 1  # the 5xx writes failed passes, which were retried
    assert runtime.fatal_error is None and app.healthy
    assert set(record.passes) == set(expected)


def test_conflict_storm_never_overwrites_a_concurrent_change(
    kube_emulator: Emulator,
    kube_config: Config,
    operators: Callable[[Application], Running],
) -> None:
    kube = kube_emulator
    api = kube_config.client(CONFIGMAPS)
    names = [f"cm-{i:02d}" for i in range(40)]
    # The fields another writer owns, name -> {data key: value}; checked at the end.
    theirs: dict[str, dict[str, str]] = {name: {} for name in names}
    values = {name: "v0" for name in names}
    lock = threading.Lock()
    serial = [0]

    def concurrent_write(name: str, *, value: bool = False) -> None:
        """Another client's change to the same object (no precondition: it always lands)."""
        with lock:
            serial[0] += 1
            key, stamp = f"other-{serial[0]}", str(serial[0])
            theirs[name][key] = stamp
            patch: dict[str, Any] = {
                "data": {key: stamp},
                "metadata": {"annotations": {f"other.example.com/{key}": stamp}},
            }
            if value:
                values[name] = f"v{stamp}"
                patch["data"]["value"] = values[name]
            for _ in range(50):  # the injected 409s hit this writer too: it retries
                try:
                    api.merge_patch(name, patch)
                    return
                except Conflict:
                    continue
            raise AssertionError(f"the concurrent writer could not patch {name}")

    passes: dict[str, int] = {}

    def race(cm: ConfigMap) -> None:
        # While the pass holds its snapshot, the object changes under it: the guarded
        # write must conflict and be retried against the newer object.
        name = cm.name or ""
        with lock:
            passes[name] = passes.get(name, 0) + 1
            count = passes[name]
        if count <= 3:
            concurrent_write(name, value=count == 2)

    record = Record()
    app, configs = echo_operator(kube_config, record, hook=race)
    for name in names:
        kube.create_object(configmap(name, "v0"))
    kube.faults.inject(409, count=30, method="PATCH")  # plus conflicts the server invents
    operators(app)

    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set() and i < 200:
            concurrent_write(names[i % len(names)], value=i % 7 == 0)
            i += 1

    background = threading.Thread(target=writer, name="concurrent-writer")
    background.start()
    background.join(30)
    stop.set()
    assert not background.is_alive()
    assert converge(kube, values, timeout=25) == []
    # Field by field: every concurrent change is still there, with its value.
    for name, obj in managed(kube).items():
        data, meta = obj["data"], obj["metadata"]
        assert data == {"value": values[name], "echo": values[name], **theirs[name]}, name
        annotations = meta.get("annotations") or {}
        for key, stamp in theirs[name].items():
            assert annotations[f"other.example.com/{key}"] == stamp, (name, key)
        assert meta["finalizers"] == [FINALIZER]
    assert kube.faults.injected == 30
    # The conflicts were refused by the API server, never resolved by overwriting.
    refused = [e for e in kube.request_log if e.method == "PATCH" and e.status in (409, 422)]
    assert len(refused) > 30
    assert all(passes[name] >= 3 for name in names)  # each raced at least three times
    assert same_view(kube, configs, timeout=10)
    assert app.healthy
