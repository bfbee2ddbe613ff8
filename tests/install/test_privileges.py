"""The split of privileges: ``install`` runs as an admin, the operator's ServiceAccount gets
exactly the generated RBAC (emulator RBAC enforced for its token)."""

from __future__ import annotations

from typing import Any

import pytest

from cloudcoil_sync.application import Application
from cloudcoil_sync.application.install import install
from cloudcoil_sync.client import Config, Forbidden
from cloudcoil_sync.testing import Emulator

from .apps import NAMESPACE
from .conftest import ROLLOUTS

pytestmark = ROLLOUTS

GADGETS = ("install.cloudcoil.dev", "v1", "gadgets")


def test_operator_identity_has_its_runtime_rights_and_no_installer_rights(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    install(app, image="gadgets:v1", config=config, progress=progress)
    config.client(GADGETS).create(
        {
            "apiVersion": "install.cloudcoil.dev/v1",
            "kind": "Gadget",
            "metadata": {"name": "g1", "namespace": NAMESPACE},
            "spec": {"size": 2},
        }
    )
    token = kube.service_account_token(NAMESPACE, "gadgets")
    with kube.config(namespace=NAMESPACE, token=token) as operator:
        # What the running operator does: read and watch its primary, report status,
        # manage owned objects, hold its lease.
        assert [g["metadata"]["name"] for g in operator.client(GADGETS).list()] == ["g1"]
        operator.client(GADGETS).merge_patch(
            "g1", {"status": {"phase": "Ready"}}, subresource="status"
        )
        operator.client(("", "v1", "configmaps")).apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g1"}},
            field_manager="gadgets",
        )
        operator.client(("coordination.k8s.io", "v1", "leases")).create(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "gadgets"},
            }
        )
        # What only the installer may do.
        forbidden = [
            lambda: operator.client(
                ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            ).raw.get("gadgets.install.cloudcoil.dev"),
            lambda: operator.client(("rbac.authorization.k8s.io", "v1", "roles")).apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": "gadgets.operators"},
                    "rules": [],
                },
                field_manager="gadgets",
                force=True,
            ),
            lambda: operator.client(
                ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
            ).delete("gadgets.operators.cloudcoil.io"),
            lambda: operator.client(("apps", "v1", "deployments")).delete("gadgets"),
            lambda: operator.client(GADGETS).list(namespace="default"),
        ]
        for call in forbidden:
            with pytest.raises(Forbidden):
                call()
    gadget = kube.get_object("install.cloudcoil.dev", "gadgets", NAMESPACE, "g1")
    assert gadget is not None and gadget["status"] == {"phase": "Ready"}
