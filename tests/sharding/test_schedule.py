"""When the coordinator lists every object (its full round): once the live shards change (a
join after the ring settled), once more `grace` later (what was placed from a view not yet
updated), and otherwise only every few minutes. Driven on a fake clock, no threads."""

from __future__ import annotations

from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from prometheus_client import CollectorRegistry

from cloudcoil_sync.sharding import Sharding
from cloudcoil_sync.sharding._internal import coordinator as module
from cloudcoil_sync.sharding._internal.coordinator import Coordinator, CoordinatorMetrics
from cloudcoil_sync.sharding._internal.kinds import ShardedKind


class Clock:
    now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeClaimer:
    kinds = (ShardedKind(ConfigMap, "default", "app=x"),)
    identity = "a"
    settled = True
    live = frozenset({"a", "b"})


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(module.time, "monotonic", fake.monotonic)
    return fake


def coordinator(monkeypatch: pytest.MonkeyPatch, rounds: list[float], clock: Clock) -> Coordinator:
    sharding = Sharding("ring", identity="a", grace=15, settle=4)
    metrics = CoordinatorMetrics("ring", CollectorRegistry(auto_describe=True))
    made = Coordinator(sharding, Any, FakeClaimer(), metrics)  # type: ignore[arg-type]
    monkeypatch.setattr(made, "_full_round", lambda *_: rounds.append(clock.now))
    monkeypatch.setattr(made, "_fallback", lambda *_: 1.0)
    return made


def at(made: Coordinator, clock: Clock, when: float, live: set[str] | None = None) -> None:
    clock.now = 1000.0 + when
    made.live = frozenset(live) if live is not None else made.live or FakeClaimer.live
    made._round(None, None)  # type: ignore[arg-type]


def test_a_change_is_listed_then_repaired_grace_later_then_rarely(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    rounds: list[float] = []
    made = coordinator(monkeypatch, rounds, clock)
    at(made, clock, 0)  # the first live set, planned once it settled (4 s)
    at(made, clock, 3.9)
    assert rounds == []
    at(made, clock, 4)
    assert rounds == [1004.0]
    at(made, clock, 18.9)
    assert len(rounds) == 1
    at(made, clock, 19)  # the repair round, one grace later
    assert rounds[-1] == 1019.0 and len(rounds) == 2
    for when in (20, 60, 120, 200, 318.9):  # no change: no list (the old 60 s period is gone)
        at(made, clock, when)
    assert len(rounds) == 2
    at(made, clock, 319)  # the safety net, 300 s after the last list
    assert rounds[-1] == 1319.0 and len(rounds) == 3
    at(made, clock, 334)  # a periodic round schedules no repair
    assert len(rounds) == 3


def test_a_join_waits_for_settle_a_loss_does_not_both_are_repaired(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    rounds: list[float] = []
    made = coordinator(monkeypatch, rounds, clock)
    for when in (0, 4, 19):
        at(made, clock, when)
    assert len(rounds) == 2
    abc = {"a", "b", "c"}
    at(made, clock, 20, abc)  # a shard joins: settle (4 s) first
    at(made, clock, 23.9, abc)
    assert len(rounds) == 2
    at(made, clock, 24, abc)
    assert rounds[-1] == 1024.0
    at(made, clock, 38.9, abc)
    assert len(rounds) == 3
    at(made, clock, 39, abc)
    assert rounds[-1] == 1039.0
    at(made, clock, 40, {"a", "c"})  # a shard left: at once, no settle
    assert rounds[-1] == 1040.0 and len(rounds) == 5
    at(made, clock, 55, {"a", "c"})
    assert rounds[-1] == 1055.0 and len(rounds) == 6
