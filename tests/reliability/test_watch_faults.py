"""Scenarios 1 and 5: watch streams cut, 410 relists and API restarts with history loss,
with objects created, updated, recreated and deleted while the operator is not watching."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config, NotFound
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
    same_view,
)


class Churn:
    """Creates, updates, recreates, relabels and deletes, keeping the expected end state."""

    def __init__(self, kube: Emulator, config: Config, expected: dict[str, str]) -> None:
        self.kube = kube
        self.api = config.client(CONFIGMAPS)
        self.expected = expected
        self.deleted: set[str] = set()
        self.serial = 0

    def create(self, name: str) -> None:
        self.serial += 1
        value = f"v{self.serial}"
        self.kube.create_object(configmap(name, value))
        self.expected[name] = value

    def update(self, name: str) -> None:
        self.serial += 1
        value = f"v{self.serial}"
        self.api.merge_patch(name, {"data": {"value": value}})
        self.expected[name] = value

    def delete(self, name: str) -> None:
        answer = self.api.delete(name)
        self.expected.pop(name)
        if FINALIZER in ((answer.get("metadata") or {}).get("finalizers") or []):
            self.deleted.add(name)  # held by the operator's finalizer: it must see this

    def unlabel(self, name: str) -> None:
        # Leaving the label selector is a DELETED event for the operator's view.
        self.api.merge_patch(name, {"metadata": {"labels": {LABEL: None}}})
        self.expected.pop(name)

    def gap(self, round_: int) -> None:
        """One round of changes while the operator's watch is down."""
        base = f"r{round_}"
        for i in range(3):
            self.create(f"{base}-new-{i}")
        self.create(f"{base}-ephemeral")
        self.api.delete(f"{base}-ephemeral")  # created and deleted inside the gap
        self.expected.pop(f"{base}-ephemeral")
        initial = [f"seed-{i:02d}" for i in range(round_ * 5, round_ * 5 + 5)]
        self.update(initial[0])
        self.update(initial[0])  # two updates in the gap: only the last one matters
        self.update(initial[1])
        self.delete(initial[2])  # has the finalizer: the operator must see the deletion
        self.unlabel(initial[3])
        # Deleted for good (its finalizer taken off by hand) and recreated under the same
        # name: a new UID the operator must reconcile afresh. Deleted first, so that a running
        # operator cannot put its finalizer back between the two requests.
        self.api.delete(initial[4])
        with contextlib.suppress(NotFound):  # the operator may have finalized it already
            self.api.merge_patch(initial[4], {"metadata": {"finalizers": None}})
        self.create(initial[4])


def seed(kube: Emulator, config: Config, count: int) -> tuple[Churn, dict[str, str]]:
    expected: dict[str, str] = {}
    churn = Churn(kube, config, expected)
    for i in range(count):
        churn.create(f"seed-{i:02d}")
    return churn, expected


def test_dropped_watches_and_410_relists_lose_no_event(
    kube_emulator: Emulator,
    kube_config: Config,
    operators: Callable[[Application], Running],
) -> None:
    kube = kube_emulator
    record = Record()
    app, configs = echo_operator(kube_config, record)
    churn, expected = seed(kube, kube_config, 30)
    operators(app)
    assert converge(kube, expected, timeout=15) == []
    runtime: Any = configs.runtime
    lists_before = runtime.primary.list_count

    for round_ in range(6):
        assert kube.wait_for(lambda: kube.open_watches >= 1, timeout=10)  # watching again
        # Hold the reconnect off: it fails twice (the client retries those) and waits.
        kube.faults.inject(503, count=2, method="GET", path=LIST_WATCH)
        kube.faults.add_latency(0.6, method="GET", path=LIST_WATCH)
        assert kube.drop_watches(abort=round_ % 2 == 0) >= 1
        churn.gap(round_)
        if round_ in (2, 4):
            kube.forget_history()  # the resume is now too old: 410 Expired, a relist
        kube.faults.clear()

    assert converge(kube, expected, timeout=25) == []
    assert same_view(kube, configs, timeout=10)
    # Deletions of finalized objects were seen: the finalizer ran and the objects are gone.
    gone = sorted(churn.deleted)
    assert len(gone) == 6
    assert all(record.finalized.get(name) == 1 for name in gone), record.finalized
    assert all(kube.get_object("", "configmaps", "default", name) is None for name in gone)
    assert runtime.primary.list_count >= lists_before + 2  # the 410s relisted
    assert kube.faults.injected >= 1  # reconnects met 503s (clear() drops the unused rest)
    assert app.healthy and runtime.fatal_error is None


def test_restart_with_history_loss_mid_run_converges(
    kube_emulator: Emulator,
    kube_config: Config,
    operators: Callable[[Application], Running],
) -> None:
    kube = kube_emulator
    record = Record()
    app, configs = echo_operator(kube_config, record)
    churn, expected = seed(kube, kube_config, 20)
    running = operators(app)
    # Mid-convergence: restart twice while the first passes are still being written.
    kube.restart(lose_history=True)
    for i in range(20, 40):
        churn.create(f"seed-{i:02d}")
    kube.faults.inject(503, count=3, method="GET", path=LIST_WATCH)
    kube.restart(lose_history=True)
    churn.gap(0)
    churn.gap(1)
    assert converge(kube, expected, timeout=25) == []
    assert same_view(kube, configs, timeout=10)
    assert all(record.finalized.get(name) == 1 for name in churn.deleted)
    assert all(kube.get_object("", "configmaps", "default", name) is None for name in churn.deleted)
    assert app.healthy
    assert running.close() is None
