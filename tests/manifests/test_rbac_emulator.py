"""Generated RBAC against the emulator's RBAC enforcement: exactly enough, nothing more.

The widget operator's CRD, ServiceAccount, Role and RoleBinding are created in the emulator;
the operator's ServiceAccount token then performs every call the framework makes (primary
list/watch/patch, status patch, owned-children writes, Events, the Lease) and is refused
everything else (deletes, other kinds, other namespaces, other Leases, installation rights).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret

from cloudcoil_sync.client import Config, Forbidden
from cloudcoil_sync.testing import Emulator

from .apps import APPS

NS = "operators"
EVENTS = ("events.k8s.io", "v1", "events")
LEASES = ("coordination.k8s.io", "v1", "leases")


@pytest.fixture
def operator(ca_pair: tuple[bytes, bytes]) -> Iterator[tuple[Emulator, Config, Config]]:
    app, options = APPS["widgets"](ca_pair[0])
    with Emulator() as kube:
        for namespace in (NS, "other"):
            kube.create_object(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        for document in app.manifests(**options):
            # The Deployment and webhooks need a running server; RBAC is what is tested here.
            if document["kind"] not in ("Deployment", "Service") and "webhooks" not in document:
                kube.create_object(document)
        admin = kube.config(namespace=NS)
        sa = kube.config(namespace=NS, token=kube.service_account_token(NS, "widgets"))
        try:
            yield kube, admin, sa
        finally:
            sa.close()
            admin.close()


def widget(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "examples.cloudcoil.dev/v1alpha1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "message": "hi"},
    }


def config_map(name: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
    }


def test_the_operator_can_make_every_framework_call(
    operator: tuple[Emulator, Config, Config],
) -> None:
    kube, _, sa = operator
    kube.create_object(widget("w1"))
    widgets = sa.client(("examples.cloudcoil.dev", "v1alpha1", "widgets"))
    listed = widgets.list()
    assert [w["metadata"]["name"] for w in listed.items] == ["w1"]
    stream = widgets.watch(resource_version=listed.resource_version, timeout_seconds=1)
    stream.close()
    widgets.merge_patch("w1", {"metadata": {"labels": {"seen": "yes"}}})
    widgets.merge_patch("w1", {"status": {"phase": "Ready"}}, subresource="status")
    for plural, group, version, body in (
        ("configmaps", "", "v1", config_map("child")),
        (
            "services",
            "",
            "v1",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "child", "namespace": NS},
                "spec": {"ports": [{"port": 80}]},
            },
        ),
    ):
        children = sa.client((group, version, plural))
        children.create(body)
        children.get("child")
        children.merge_patch("child", {"metadata": {"labels": {"owned": "yes"}}})
        children.list()
    sa.client(EVENTS).create(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "w1.1", "namespace": NS},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "cloudcoil/widget",
            "reportingInstance": "widgets-0",
            "action": "Reconcile",
            "reason": "Ready",
            "regarding": {"kind": "Widget", "name": "w1", "namespace": NS},
            "type": "Normal",
        }
    )
    leases = sa.client(LEASES)
    created = leases.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "widgets", "namespace": NS},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        }
    )
    created["spec"]["holderIdentity"] = "b"
    assert leases.replace(created)["spec"]["holderIdentity"] == "b"
    kube.create_object(config_map("widget-policy"))
    policy = sa.client(ConfigMap).get("widget-policy")
    assert policy.metadata is not None and policy.metadata.name == "widget-policy"


REFUSED: dict[str, Callable[[Config], Any]] = {
    "delete a child": lambda sa: sa.client(ConfigMap).delete("child"),
    "delete the primary": lambda sa: sa.client(
        ("examples.cloudcoil.dev", "v1alpha1", "widgets")
    ).delete("w1"),
    "read secrets": lambda sa: sa.client(Secret).list(),
    "another namespace": lambda sa: sa.client(ConfigMap, namespace="other").list(),
    "all namespaces": lambda sa: sa.client(ConfigMap).list(all_namespaces=True),
    "another lease": lambda sa: sa.client(LEASES).get("someone-else"),
    "install CRDs": lambda sa: sa.client(
        ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    ).list(),
    "edit RBAC": lambda sa: sa.client(("rbac.authorization.k8s.io", "v1", "roles")).list(),
    "register webhooks": lambda sa: sa.client(
        ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
    ).list(),
}


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_everything_else_is_forbidden(operator: tuple[Emulator, Config, Config], call: str) -> None:
    kube, _, sa = operator
    kube.create_object(config_map("child"))
    kube.create_object(widget("w1"))
    with pytest.raises(Forbidden):
        REFUSED[call](sa)
