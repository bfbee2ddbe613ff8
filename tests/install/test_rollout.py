"""The emulator's Deployment-status simulator (``Emulator(deployments=...)``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cloudcoil_sync.application._internal.install import rollout_state
from cloudcoil_sync.testing import Emulator

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web:1"}]},
        },
    },
}


def apply(kube: Emulator, body: dict[str, Any]) -> None:
    with kube.config() as cfg:
        cfg.client(("apps", "v1", "deployments")).apply(body, field_manager="test", force=True)


def current(kube: Emulator) -> dict[str, Any]:
    obj = kube.get_object("apps", "deployments", "default", "web")
    assert obj is not None
    return obj


def available(kube: Emulator) -> bool:
    obj = current(kube)
    return rollout_state(obj, obj)[0]


@pytest.mark.kube_emulator(deployments="available")
def test_available_mode_completes_every_generation(kube_emulator: Emulator) -> None:
    apply(kube_emulator, DEPLOYMENT)
    assert kube_emulator.wait_for(lambda: available(kube_emulator))
    status = current(kube_emulator)["status"]
    assert status["observedGeneration"] == 1 and status["availableReplicas"] == 2
    conditions = {c["type"]: c["reason"] for c in status["conditions"]}
    assert conditions == {
        "Available": "MinimumReplicasAvailable",
        "Progressing": "NewReplicaSetAvailable",
    }
    scaled = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 3}}
    apply(kube_emulator, scaled)
    assert kube_emulator.wait_for(
        lambda: current(kube_emulator)["status"].get("availableReplicas") == 3
    )
    assert current(kube_emulator)["status"]["observedGeneration"] == 2


@pytest.mark.kube_emulator(deployments=0.3)
def test_delay_reports_progress_first(kube_emulator: Emulator) -> None:
    assert kube_emulator.rollouts is not None and kube_emulator.rollouts.idle(0)
    started = time.monotonic()
    apply(kube_emulator, DEPLOYMENT)
    # Created with an empty status: wait for the rollout's first write, not for the key.
    assert kube_emulator.wait_for(
        lambda: "updatedReplicas" in (current(kube_emulator).get("status") or {})
    )
    status = current(kube_emulator)["status"]
    if time.monotonic() - started < 0.25:  # still inside the delay
        assert status["updatedReplicas"] == 2 and status["unavailableReplicas"] == 2
        assert "availableReplicas" not in status
    assert kube_emulator.rollouts.idle(5)
    assert available(kube_emulator)
    assert time.monotonic() - started >= 0.3


@pytest.mark.kube_emulator(deployments="never")
def test_never_mode_observes_but_never_completes(kube_emulator: Emulator) -> None:
    apply(kube_emulator, DEPLOYMENT)
    assert kube_emulator.wait_for(lambda: "status" in current(kube_emulator))
    assert not kube_emulator.wait_for(lambda: available(kube_emulator), timeout=0.3)
    assert rollout_state(DEPLOYMENT, current(kube_emulator))[1] == "2/2 updated, 0/2 available"
    assert kube_emulator.rollouts is not None
    kube_emulator.rollouts.mode = "available"  # applies to the next generation
    apply(kube_emulator, {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 1}})
    assert kube_emulator.wait_for(lambda: available(kube_emulator))


@pytest.mark.kube_emulator(deployments=None)  # the fixture turns it on; the class does not
def test_off_by_default_and_bad_modes_are_rejected(kube_emulator: Emulator) -> None:
    assert kube_emulator.rollouts is None
    with Emulator() as plain:
        assert plain.rollouts is None
    apply(kube_emulator, DEPLOYMENT)
    assert "status" not in current(kube_emulator) or not available(kube_emulator)
    with pytest.raises(ValueError, match="deployments must be"):
        Emulator(deployments="soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="deployments must be"):
        Emulator(deployments=-1.0)
