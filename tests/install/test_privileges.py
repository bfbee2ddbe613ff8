"""The split of privileges: ``install`` runs as an admin, the operator's ServiceAccount gets
exactly the generated RBAC (emulator RBAC enforced for its token)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cloudcoil_sync.client import Config, Forbidden
from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.testing import Emulator

from .apps import NAMESPACE, gadgets
from .conftest import ROLLOUTS

pytestmark = ROLLOUTS

GADGETS = ("install.cloudcoil.dev", "v1", "gadgets")


def test_operator_identity_has_its_runtime_rights_and_no_installer_rights(
    kube: Emulator, config: Config, progress: Any
) -> None:
    # Without webhooks: the emulator would call them, and nothing serves them here.
    gadgets(None).install(image="gadgets:v1", config=config, progress=progress)
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
        leases = operator.client(("coordination.k8s.io", "v1", "leases"))
        held = leases.get("gadgets")  # created released by install
        held["spec"]["holderIdentity"] = "replica-1"
        leases.replace(held)
        leases.create(  # what a replica does when the Lease is missing
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"}}
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


def label_reconciled(gadget: Any) -> Any:
    gadget.metadata.labels = {**(gadget.metadata.labels or {}), "reconciled": "yes"}
    return gadget


def test_run_works_under_the_generated_rbac_only(
    kube: Emulator, config: Config, progress: Any
) -> None:
    gadgets(None).install(image="gadgets:v1", config=config, progress=progress)
    config.client(GADGETS).create(
        {
            "apiVersion": "install.cloudcoil.dev/v1",
            "kind": "Gadget",
            "metadata": {"name": "g2", "namespace": NAMESPACE},
        }
    )
    token = kube.service_account_token(NAMESPACE, "gadgets")
    stop = threading.Event()
    failures: list[BaseException] = []
    with kube.config(namespace=NAMESPACE, token=token) as operator_config:
        # The generated Lease rights. install created the Lease released, so leading starts at
        # once with the default timings; a short renew deadline would only make the test lose
        # leadership on a loaded machine (it did in CI: 0.4 s).
        election = LeaderElection("gadgets")
        app = gadgets(
            None, config=operator_config, reconcile=label_reconciled, leader_election=election
        )

        def run() -> None:
            try:
                app.run(stop=stop)
            except BaseException as error:  # reported by the assertions below
                failures.append(error)

        thread = threading.Thread(target=run, name="operator-under-test")
        thread.start()
        try:
            reconciled = kube.wait_for(
                lambda: (
                    (kube.get_object("install.cloudcoil.dev", "gadgets", NAMESPACE, "g2") or {})
                    .get("metadata", {})
                    .get("labels", {})
                    .get("reconciled")
                    == "yes"
                ),
                timeout=15,
            )
        finally:
            stop.set()
            thread.join(timeout=30)
    assert not thread.is_alive()
    assert failures == []
    assert reconciled, "\n".join(
        f"{e.method} {e.path} {e.query} {e.status}"
        for e in kube.request_log
        if "serviceaccount" in e.user
    )
    denied = [e for e in kube.request_log if e.status == 403]
    assert denied == [], denied
