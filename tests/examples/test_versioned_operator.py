"""examples/versioned_operator.py against the emulator: installed with its conversion webhook
(served by the operator's own WebhookServer over TLS, the emulator calling it by Service),
objects written in v1alpha1 and v1, the controller reconciling v1; a controller on v1alpha1."""

from __future__ import annotations

from typing import Any

from example_harness import load

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Context
from cloudcoil_sync.crd import STASH_ANNOTATION
from cloudcoil_sync.testing import Emulator, OperatorRunner, check_round_trip

GROUP = "examples.cloudcoil.dev"


def gizmo(kube: Emulator, name: str) -> dict[str, Any] | None:
    return kube.get_object(GROUP, "gizmos", "default", name)


def test_the_example_converts_both_ways_and_reconciles_v1(
    kube_emulator: Emulator, kube_operator: OperatorRunner
) -> None:
    module = load("versioned_operator")
    config: Config = kube_operator(module.app)
    old = config.client(module.GizmoV1Alpha1)
    old.create(
        module.GizmoV1Alpha1.model_validate({"metadata": {"name": "a"}, "spec": {"greeting": "hi"}})
    )
    stored = kube_emulator.store.get((GROUP, "gizmos"), "default", "a") or {}
    assert stored["apiVersion"] == f"{GROUP}/v1"  # stored in the storage version
    assert stored["spec"] == {"message": "hi", "replicas": 1}

    def reconciled() -> bool:
        state = gizmo(kube_emulator, "a") or {}
        return (state.get("status") or {}).get("phase") == "Serving 1x 'hi'"

    assert kube_emulator.wait_for(reconciled, timeout=20)
    back = old.get("a")
    assert back.spec.greeting == "hi" and back.status is not None
    assert back.status.phase == "Serving 1x 'hi'"

    new = config.client(module.Gizmo)
    current = new.get("a")
    current.spec.replicas = 3
    new.replace(current)
    as_alpha = old.raw.get("a")
    assert as_alpha["spec"] == {"greeting": "hi"}
    assert '"replicas":3' in as_alpha["metadata"]["annotations"][STASH_ANNOTATION]
    old.raw.merge_patch("a", {"spec": {"greeting": "edited"}})
    assert new.get("a").spec.model_dump() == {"message": "edited", "replicas": 3}

    def reconciled_again() -> bool:
        state = gizmo(kube_emulator, "a") or {}
        return (state.get("status") or {}).get("phase") == "Serving 3x 'edited'"

    assert kube_emulator.wait_for(reconciled_again, timeout=20)
    check_round_trip(module.GIZMOS, new.get("a"), old.get("a"))


def test_a_controller_reconciles_the_version_it_declares(
    kube_emulator: Emulator, kube_operator: OperatorRunner
) -> None:
    module = load("versioned_operator")
    app = Application("alphas", resources=(module.GIZMOS,), webhook=module.app.webhook)
    seen: list[tuple[str, str]] = []

    @app.controller(module.GizmoV1Alpha1).reconcile()
    def reconcile(obj: Any, ctx: Context[Any]) -> None:
        hub = ctx.client(module.Gizmo).get(obj.name or "")
        cached = ctx.cached(module.GizmoV1Alpha1).get(obj.name or "")
        assert cached is not None
        seen.append((type(obj).__name__, f"{obj.spec.greeting}/{hub.spec.message}"))

    config: Config = kube_operator(app)
    config.client(module.Gizmo).create(
        module.Gizmo.model_validate({"metadata": {"name": "b"}, "spec": {"message": "m"}})
    )
    assert kube_emulator.wait_for(lambda: ("GizmoV1Alpha1", "m/m") in seen, timeout=20)
