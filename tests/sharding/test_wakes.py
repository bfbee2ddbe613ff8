"""The claimer and the coordinator do not poll: each sleeps until what no event announces (a
Lease expiring unrenewed, start-up settling, the coordinator's next round) or, with nothing
due, until woken; a claimer round, a new unplaced object and the stop event wake them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from prometheus_client import CollectorRegistry
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.event_relay import StopEvent
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.store import Store
from cloudcoil_sync.sharding import Sharding
from cloudcoil_sync.sharding._internal import claim, coordinator
from cloudcoil_sync.sharding._internal.claim import Claimer
from cloudcoil_sync.sharding._internal.coordinator import Coordinator, CoordinatorMetrics
from cloudcoil_sync.sharding._internal.kinds import ShardedKind
from cloudcoil_sync.sharding._internal.liveness import Liveness

KIND = ShardedKind(ConfigMap, "default", "app=x")
GRACE = 60.0
SETTLE = 4.0


class Clock:
    now = 1000.0

    def monotonic(self) -> float:
        return self.now


class Recording(threading.Condition):
    """A condition that records the timeout of every wait."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return super().wait(timeout)


class FakeClaimer:
    kinds = (KIND,)
    identity = "a"
    settled = True

    def __init__(self, live: set[str]) -> None:
        self.live = frozenset(live)
        self.listeners: list[Callable[[int | None, Any], None]] = []

    def subscribe(self, listener: Callable[[int | None, Any], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: None


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(coordinator.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(claim.time, "monotonic", fake.monotonic)
    return fake


def running(
    monkeypatch: pytest.MonkeyPatch, live: set[str]
) -> tuple[Coordinator, Recording, StopEvent, threading.Thread]:
    sharding = Sharding("ring", identity="a", grace=GRACE, settle=SETTLE)
    metrics = CoordinatorMetrics("ring", CollectorRegistry(auto_describe=True))
    made = Coordinator(sharding, Any, FakeClaimer(live), metrics)  # type: ignore[arg-type]
    monkeypatch.setattr(made, "_full_round", lambda *_: None)  # lists nothing
    wake = made._wake = Recording()
    stop = StopEvent()
    thread = threading.Thread(target=made.run, args=(stop, WriteFence()), name="coordinator")
    thread.start()
    return made, wake, stop, thread


def stopped(stop: StopEvent, thread: threading.Thread) -> bool:
    stop.set()
    thread.join(10)
    return not thread.is_alive()


def test_the_coordinator_sleeps_until_its_next_round_and_wakes_on_each_claimer_round(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    made, wake, stop, thread = running(monkeypatch, {"a", "b"})
    try:
        # Shards joined: it waits for the ring to settle (4 s) before listing.
        assert wait_until(lambda: len(wake.timeouts) == 1, 10)
        assert wake.timeouts == [SETTLE] and made.rounds == 1
        clock.now += SETTLE
        made._seen(None, None)  # a claimer round: listed, repaired one grace later
        assert wait_until(lambda: len(wake.timeouts) == 2, 10)
        assert wake.timeouts == [SETTLE, GRACE] and made.rounds == 2
        made._seen(None, None)
        assert wait_until(lambda: len(wake.timeouts) == 3, 10)
        assert wake.timeouts == [SETTLE, GRACE, GRACE]
    finally:
        assert stopped(stop, thread)  # the stop event wakes it: no timeout ran out
    assert made.rounds == 3


def test_with_nothing_due_the_coordinator_waits_untimed_until_an_unplaced_object(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    made, wake, stop, thread = running(monkeypatch, set())
    try:
        assert wait_until(lambda: len(wake.timeouts) == 1, 10)
        assert wake.timeouts == [None]  # no live shard: the claimer's round will wake it
        unplaced = {"metadata": {"name": "cm", "namespace": "default", "labels": {"app": "x"}}}
        made._seen(0, unplaced)  # its grace ends before "never": woken to plan for it
        assert wait_until(lambda: len(wake.timeouts) == 2, 10)
        made._seen(0, {"metadata": {**unplaced["metadata"], "name": "cm-2"}})
        assert made.rounds == 2  # awake while it sleeps towards "never": not yet planned
    finally:
        assert stopped(stop, thread)


class Election:
    is_leader = True


def lease(holder: str, duration: int, renewed: str = "2026-01-01T00:00:00.000000Z") -> Any:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": f"ring-shard-{holder}", "namespace": "default"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "renewTime": renewed,
        },
    }


def test_the_claimer_sleeps_until_settled_then_until_a_live_lease_can_expire(clock: Clock) -> None:
    sharding = Sharding("ring", identity="a", settle=2)
    config = Config(server="https://127.0.0.1:9", token="t")  # never called: nothing to claim
    try:
        made = Claimer(sharding, config, [KIND], Election())  # type: ignore[arg-type]
        made._liveness = Liveness(clock=clock.monotonic)
        assert made._idle() == 2.0  # start-up settles once the live shards stay put 2 s
        made.leases.store.put(lease("a", 15))
        made.leases.store.put(lease("b", 7))
        made._round(None)  # type: ignore[arg-type]
        assert made.live == {"a", "b"} and not made.settled and made._idle() == 2.0
        clock.now += 2
        made._round(None)  # type: ignore[arg-type]
        assert made.settled
        assert made._idle() == 5.0  # until b's Lease expires, unless renewed (an event)
        clock.now += 5
        made._round(None)  # type: ignore[arg-type]
        assert made.live == {"a"} and made._idle() == 8.0
    finally:
        config.close()


def test_a_fallback_assignment_that_failed_is_due_again_one_grace_later(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    sharding = Sharding("ring", identity="a", grace=GRACE, settle=SETTLE)
    metrics = CoordinatorMetrics("ring", CollectorRegistry(auto_describe=True))
    claimer = FakeClaimer({"a", "b"})
    claimer.identity = "nobody"  # every target is another replica's: the fallback moves it
    unplaced = {"metadata": {"name": "cm", "namespace": "default", "labels": {"app": "x"}}}
    store = Store()
    store.put(unplaced)
    claimer.views = [SimpleNamespace(store=store)]  # type: ignore[attr-defined]
    made = Coordinator(sharding, Any, claimer, metrics)  # type: ignore[arg-type]
    made.live = claimer.live
    sent: list[Any] = []
    monkeypatch.setattr(made, "_send_all", lambda sender, fence, moves: sent.extend(moves) or [])
    made._seen(0, unplaced)
    assert made._fallback(None, None, clock.now) == GRACE  # type: ignore[arg-type]
    assert sent == []  # not due yet
    clock.now += GRACE
    # Due and sent, but refused (fenced, changed): pending again, due one grace from now,
    # with nothing else to wake the coordinator before then.
    assert made._fallback(None, None, clock.now) == GRACE  # type: ignore[arg-type]
    assert [move[0].reason for move in sent] == ["new"]
    assert list(made._pending.values()) == [clock.now]
