"""``install``/``uninstall`` of the optional objects against the emulator: a
PodDisruptionBudget and a NetworkPolicy, and cert-manager's Issuer and Certificate (with
stand-in cert-manager CRDs and a stand-in issuer that marks the Certificate Ready)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cloudcoil_sync.application import Application, Extras, NetworkPolicyOptions
from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .apps import NAMESPACE
from .conftest import ROLLOUTS, Lines

pytestmark = ROLLOUTS

MARK = {"cloudcoil.io/installed-by": "operators/gadgets"}
CERTIFICATES = ("cert-manager.io", "v1", "certificates")


def optional_objects(kube: Emulator) -> dict[str, Any]:
    return {
        "budget": kube.get_object("policy", "poddisruptionbudgets", NAMESPACE, "gadgets"),
        "policy": kube.get_object("networking.k8s.io", "networkpolicies", NAMESPACE, "gadgets"),
    }


def test_budget_and_network_policy_are_installed_and_removed(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    extras = Extras(
        pod_disruption_budget=True,
        network_policy=NetworkPolicyOptions(("10.0.0.1/32",), "monitoring"),
    )
    results = app.install(
        image="gadgets:v1", replicas=2, extras=extras, config=config, progress=progress
    )
    created = [r.object for r in results]
    assert created.index("Deployment operators/gadgets") < created.index(
        "PodDisruptionBudget operators/gadgets"
    )
    for obj in optional_objects(kube).values():
        assert obj is not None and obj["metadata"]["annotations"] == MARK
    removed = [(r.object, r.action) for r in app.uninstall(config=config, progress=progress)]
    assert removed[2:5] == [
        ("NetworkPolicy operators/gadgets", "deleted"),
        ("PodDisruptionBudget operators/gadgets", "deleted"),
        ("Deployment operators/gadgets", "deleted"),
    ]
    assert not any("Certificate" in what or "Issuer" in what for what, _ in removed)
    assert all(obj is None for obj in optional_objects(kube).values())


def stand_in_crd(kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def issuer(kube: Emulator, config: Config) -> Iterator[threading.Event]:
    """cert-manager's CRDs, and a thread that marks the Certificate Ready once it exists."""
    crds = config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
    for kind, plural in (("Certificate", "certificates"), ("Issuer", "issuers")):
        crds.create(stand_in_crd(kind, plural))
    stop = threading.Event()

    def issue() -> None:
        exists = lambda: kube.get_object(*CERTIFICATES[::2], NAMESPACE, "gadgets-serving-cert")  # noqa: E731
        if kube.wait_for(lambda: stop.is_set() or exists() is not None, timeout=30) and exists():
            status = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
            with kube.config(namespace=NAMESPACE) as own:
                own.client(CERTIFICATES).merge_patch(
                    "gadgets-serving-cert", {"status": status}, subresource="status"
                )

    thread = threading.Thread(target=issue, name="stand-in issuer")
    thread.start()
    yield stop
    stop.set()
    thread.join(timeout=30)


def test_cert_manager_objects_are_waited_for_and_removed(
    kube: Emulator,
    config: Config,
    app: Application,
    issuer: threading.Event,
    lines: Lines,
    progress: Any,
) -> None:
    results = app.install(
        image="gadgets:v1", extras=Extras(cert_manager=True), config=config, progress=progress
    )
    order = [r.object for r in results]
    assert order.index("Certificate operators/gadgets-serving-cert") < order.index(
        "Deployment operators/gadgets"
    )
    assert any(
        line.startswith("Certificate operators/gadgets-serving-cert is issued: done in")
        for line in lines.lines
    )
    hooks = kube.get_object(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "",
        "gadgets.operators.cloudcoil.io",
    )
    assert hooks is not None
    assert hooks["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "operators/gadgets-serving-cert"
    )
    assert all("caBundle" not in w["clientConfig"] for w in hooks["webhooks"])
    removed = {r.object: r.action for r in app.uninstall(config=config, progress=progress)}
    assert removed["Certificate operators/gadgets-serving-cert"] == "deleted"
    assert removed["Issuer operators/gadgets-selfsigned"] == "deleted"
    assert kube.get_object(*CERTIFICATES[::2], NAMESPACE, "gadgets-serving-cert") is None
