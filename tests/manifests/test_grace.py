"""The Deployment's ``terminationGracePeriodSeconds`` is the operator's stop budgets added up
(``controller._internal.budgets``): every input of them, changed, moves it by what that input
adds to the stop, so the kubelet never kills a Pod whose process is still within a budget."""

from __future__ import annotations

from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.controller import HealthServer, LeaderElection
from cloudcoil_sync.controller._internal import budgets
from cloudcoil_sync.sharding import Sharding

from .apps import Widget


def grace(app: Application, ca: bytes) -> int:
    options: dict[str, Any] = {"ca_bundle": ca} if app.webhook is not None else {}
    (deployment,) = [d for d in app.manifests(image="img", **options) if d["kind"] == "Deployment"]
    return int(deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])


def operator(
    *,
    shutdown: float = 12,
    renew: float | None = 10,
    drain: float | None = 10,
    health: bool = True,
    sharding: Sharding | None = None,
    delay: float = 5,
) -> Application:
    """Controllers (longest shutdown_timeout `shutdown`), a Lease (`renew`: its renew_deadline;
    None: none), a webhook server (`drain`: its shutdown_timeout; `delay`: its drain_delay)
    and a health server."""
    election = None
    if renew is not None:
        election = LeaderElection("ops", lease_duration=renew + 5, renew_deadline=renew)
    app = Application(
        "ops",
        namespace="ops",
        leader_election=election,
        sharding=sharding,
        health=HealthServer(host="0.0.0.0", port=8080) if health else None,
        webhook=None if drain is None else WebhookServer(shutdown_timeout=drain, drain_delay=delay),
    )
    app.controller(ConfigMap, shutdown_timeout=min(shutdown, 5)).reconcile()(lambda cm: None)
    app.controller(Widget, shutdown_timeout=shutdown).reconcile()(lambda widget: None)
    if drain is not None:
        app.validate(Widget)(lambda request: None)
    return app


def test_the_grace_period_adds_up_every_step_of_the_stop(ca_pair: tuple[bytes, bytes]) -> None:
    # passes 12 + write fence 30 + informers 10 + leader lifespan 10, Lease release
    # 3 * max(1, 10 / 2) + 1, health server 5, webhook drain 10, exit margin 5
    assert grace(operator(), ca_pair[0]) == 12 + 30 + 10 + 10 + 16 + 5 + 10 + 5


@pytest.mark.parametrize(
    ("change", "moves"),
    [
        ({"shutdown": 20}, 8),  # the longest controller's shutdown_timeout
        ({"renew": 20}, 3 * (10 - 5)),  # the Lease's request timeout, 3 times
        ({"renew": None}, -16),  # no Lease to release
        ({"drain": 25}, 15),  # the webhook server's shutdown_timeout
        ({"drain": None}, -10),  # no webhook server
        ({"health": False}, -5),  # no health server
        ({"delay": 80}, 0),  # the drain delay runs alongside the 83 s before the webhook's stop
        ({"delay": 100}, 100 - 83),  # and counts where it outlasts them
    ],
)
def test_each_input_of_the_budgets_moves_the_grace_period(
    ca_pair: tuple[bytes, bytes], change: dict[str, Any], moves: int
) -> None:
    assert grace(operator(**change), ca_pair[0]) == grace(operator(), ca_pair[0]) + moves


@pytest.mark.parametrize(
    "budget",
    ["WRITE_GRACE", "INFORMER_STOP", "LEADER_LIFESPAN_STOP", "HEALTH_STOP", "EXIT_MARGIN"],
)
def test_each_budget_moves_the_grace_period(
    ca_pair: tuple[bytes, bytes], budget: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = grace(operator(), ca_pair[0])
    monkeypatch.setattr(budgets, budget, getattr(budgets, budget) + 7)
    assert grace(operator(), ca_pair[0]) == before + 7


def test_a_sharded_replica_adds_its_claimer_and_ring_and_its_shard_lease(
    ca_pair: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    sharding = Sharding(renew_deadline=4, lease_duration=6)
    plain = grace(operator(renew=None), ca_pair[0])
    # claimer and ring (40 each), then the shard Lease's release: 3 * max(1, 4 / 2) + 1
    assert grace(operator(renew=None, sharding=sharding), ca_pair[0]) == plain + 80 + 7
    monkeypatch.setattr(budgets, "SHARDING_STOP", 10.0)
    sharding = Sharding(renew_deadline=4, lease_duration=6)
    assert grace(operator(renew=None, sharding=sharding), ca_pair[0]) == plain + 20 + 7


def test_never_below_the_kubernetes_default(ca_pair: tuple[bytes, bytes]) -> None:
    admission_only = Application("ops", namespace="ops", webhook=WebhookServer())
    admission_only.validate(Widget)(lambda request: None)
    assert grace(admission_only, ca_pair[0]) == 30  # 10 s drain + 5 s margin


def test_the_drain_delay_of_an_admission_only_operator_counts_in_full(
    ca_pair: tuple[bytes, bytes],
) -> None:
    admission_only = Application("ops", namespace="ops", webhook=WebhookServer(drain_delay=40))
    admission_only.validate(Widget)(lambda request: None)
    assert grace(admission_only, ca_pair[0]) == 40 + 10 + 5  # delay, drain, exit margin
    assert budgets.StopPlan(webhook=10, drain_delay=0).termination_grace() == 30
