"""The RBAC table and webhook namespace selectors, through real Application definitions."""

from __future__ import annotations

from typing import Any

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace, Secret, Service

from cloudcoil_sync.application import Application, RBACRule, WebhookServer
from cloudcoil_sync.controller._internal.events import EventRecorder

from .apps import no_keys


def keep(resource: Any) -> Any:
    return resource


def allow(request: Any) -> None:
    return None


def roles(app: Application) -> dict[tuple[str, str | None], list[dict[str, Any]]]:
    """(kind, namespace) → rules of every Role/ClusterRole."""
    return {
        (doc["kind"], doc["metadata"].get("namespace")): doc["rules"]
        for doc in app.manifests(include_webhooks=False)
        if doc["kind"] in ("Role", "ClusterRole")
    }


def rule(group: str, resource: str, *verbs: str, names: tuple[str, ...] = ()) -> dict[str, Any]:
    found: dict[str, Any] = {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
    if names:
        found["resourceNames"] = list(names)
    return found


READ_PATCH = ("get", "list", "patch", "watch")
OWN = ("create", "get", "list", "patch", "watch")


def test_every_row_of_the_table() -> None:
    app = Application("ops", namespace="ops", leader_election=True)
    controller = app.controller(Deployment, owns=(Service,))
    controller.owns(ConfigMap, prune=True)
    controller.watch(Secret, mapper=no_keys)
    controller.reconcile()(keep)
    assert roles(app) == {
        ("Role", "ops"): [
            rule("", "configmaps", "create", "delete", "get", "list", "patch", "watch"),
            rule("", "secrets", "get", "list", "watch"),
            rule("", "services", *OWN),
            rule("apps", "deployments", *READ_PATCH),
            rule("apps", "deployments/status", "patch"),
            rule("coordination.k8s.io", "leases", "create"),
            rule("coordination.k8s.io", "leases", "get", "update", "watch", names=("ops",)),
            rule("events.k8s.io", "events", "create"),
        ]
    }


def test_events_disabled_or_recorded_elsewhere() -> None:
    quiet = Application("quiet", namespace="ops")
    quiet.controller(ConfigMap, events=False).reconcile()(keep)
    assert roles(quiet) == {("Role", "ops"): [rule("", "configmaps", *READ_PATCH)]}
    cluster = Application("cluster", namespace="ops")
    recorder = EventRecorder("cloudcoil/namespaces", namespace="audit")
    cluster.controller(Namespace, events=recorder).reconcile()(keep)
    assert roles(cluster)[("Role", "audit")] == [rule("events.k8s.io", "events", "create")]


def test_controller_namespaces_and_all_namespaces() -> None:
    app = Application("multi", namespace="ops")
    app.controller(ConfigMap, namespace="team-a", events=False).reconcile()(keep)
    app.controller(Secret, all_namespaces=True, events=False).reconcile()(keep)
    assert roles(app) == {
        ("ClusterRole", None): [rule("", "secrets", *READ_PATCH)],
        ("Role", "team-a"): [rule("", "configmaps", *READ_PATCH)],
    }


def test_rbac_rules_and_no_install_privileges() -> None:
    app = Application(
        "rules",
        namespace="ops",
        rules=(
            RBACRule(Secret, ("get",), resource_names=("token",)),
            RBACRule(Deployment, ("get", "patch"), subresources=("scale",), namespace="web"),
            RBACRule(ConfigMap, ("list",), all_namespaces=True),
        ),
    )
    app.controller(ConfigMap, events=False).reconcile()(keep)
    found = roles(app)
    assert found == {
        ("ClusterRole", None): [rule("", "configmaps", "list")],
        ("Role", "ops"): [
            rule("", "configmaps", *READ_PATCH),
            rule("", "secrets", "get", names=("token",)),
        ],
        ("Role", "web"): [rule("apps", "deployments/scale", "get", "patch")],
    }
    every = [r for rules in found.values() for r in rules]
    groups = {g for r in every for g in r["apiGroups"]}
    assert not groups & {"apiextensions.k8s.io", "rbac.authorization.k8s.io"}
    assert not groups & {"admissionregistration.k8s.io"}
    assert all("*" not in value for r in every for key in r for value in r[key])


def selectors(app: Application, ca: bytes) -> dict[str, Any]:
    documents = app.manifests(ca_bundle=ca)
    return {
        hook["clientConfig"]["service"]["path"].split("/")[2].rsplit("-", 1)[0]: hook.get(
            "namespaceSelector", {}
        )
        .get("matchExpressions", [{}])[0]
        .get("values")
        for doc in documents
        for hook in doc.get("webhooks", [])
    }


@pytest.fixture
def ca(ca_pair: tuple[bytes, bytes]) -> bytes:
    return ca_pair[0]


def test_admission_selectors_follow_controller_namespaces(ca: bytes) -> None:
    app = Application("adm", namespace="ops", webhook=WebhookServer())
    scoped = app.controller(ConfigMap, namespace="team-a")
    scoped.reconcile()(keep)
    app.controller(ConfigMap, namespace="team-b").reconcile()(keep)

    def configmap_policy(request: Any) -> None:
        return None

    def secret_policy(request: Any) -> None:
        return None

    def namespace_policy(request: Any) -> None:
        return None

    def explicit_policy(request: Any) -> None:
        return None

    scoped.validate()(allow)
    app.validate(ConfigMap)(configmap_policy)
    app.validate(Secret)(secret_policy)
    app.validate(Namespace)(namespace_policy)
    app.validate(Secret, namespace_selector={"matchExpressions": [{"values": ["x"]}]})(
        explicit_policy
    )
    assert selectors(app, ca) == {
        "allow": ["team-a", "team-b"],
        "configmap-policy": ["team-a", "team-b"],
        "secret-policy": ["ops"],
        "namespace-policy": None,
        "explicit-policy": ["x"],
    }


def test_all_namespaces_controller_keeps_cluster_wide_admission(ca: bytes) -> None:
    app = Application("adm", namespace="ops", webhook=WebhookServer())
    everywhere = app.controller(ConfigMap, all_namespaces=True)
    everywhere.reconcile()(keep)
    everywhere.validate()(allow)
    assert selectors(app, ca) == {"allow": None}
