"""``uninstall`` against the emulator: order, waits, foreign objects, CRDs, dry run, timeout."""

from __future__ import annotations

from typing import Any

import pytest

from cloudcoil_sync.application import Application
from cloudcoil_sync.application._internal.progress import InstallTimeout
from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .apps import NAMESPACE, gadgets
from .conftest import ROLLOUTS, Lines
from .test_install import CRD, HOOKS, stored
from .test_rollout import DEPLOYMENT

pytestmark = ROLLOUTS

REMOVAL_ORDER = [
    f"mutatingwebhookconfigurations/{HOOKS}",
    f"validatingwebhookconfigurations/{HOOKS}",
    "deployments/gadgets",
    "services/gadgets",
    "clusterrolebindings/gadgets.operators",  # the secure-metrics reviews
    "rolebindings/gadgets.operators",
    "clusterroles/gadgets.operators",
    "clusterroles/gadgets.operators-metrics-reader",
    "roles/gadgets.operators",
    "serviceaccounts/gadgets",
    "leases/gadgets",  # install created it; the replicas renewed it
]


def requests(kube: Emulator) -> list[tuple[str, str, int]]:
    return [(e.method, "/".join(e.path.split("/")[-2:]), e.status) for e in kube.request_log]


def test_uninstall_removes_in_order_waiting_for_each_and_keeps_crds(
    kube: Emulator, config: Config, app: Application, lines: Lines, progress: Any
) -> None:
    app.install(image="gadgets:v1", config=config, progress=progress)
    kube.clear_log()
    lines.lines.clear()
    results = app.uninstall(config=config, progress=progress)

    log = requests(kube)
    deletes = [path for method, path, _ in log if method == "DELETE"]
    assert deletes == REMOVAL_ORDER
    for path in REMOVAL_ORDER[:-1]:  # each is gone (GET 404) before the next DELETE
        after = log[log.index(("DELETE", path, 200)) + 1 :]
        next_delete = next(i for i, (m, _, _) in enumerate(after) if m == "DELETE")
        assert ("GET", path, 404) in after[:next_delete]
    deployment = next(
        e for e in kube.request_log if e.method == "DELETE" and "deployments" in e.path
    )
    assert deployment.status == 200
    objects = stored(kube)
    assert objects.pop("crd") is not None
    assert all(obj is None for obj in objects.values())
    assert [r.action for r in results] == ["deleted"] * 11 + ["kept"]
    assert f"kept CustomResourceDefinition {CRD}: CRDs are deleted only with --include-crds" in (
        lines.lines
    )
    assert lines.lines[-1].startswith("uninstalled in ")

    kube.clear_log()
    again = app.uninstall(config=config, progress=progress)
    assert [r.action for r in again] == ["absent"] * 11 + ["kept"]
    # GETs only; the optional objects (PodDisruptionBudget, NetworkPolicy, cert-manager's
    # Certificate and Issuer: unknown kinds here) are looked for but not reported
    assert {m for m, _, _ in requests(kube)} == {"GET"}
    assert lines.lines[-1].startswith("uninstall: nothing to remove")


def test_include_crds_deletes_the_crds_last(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    app.install(image="gadgets:v1", config=config, progress=progress)
    kube.clear_log()
    app.uninstall(include_crds=True, config=config, progress=progress)
    deletes = [path for method, path, _ in requests(kube) if method == "DELETE"]
    assert deletes == [*REMOVAL_ORDER, f"customresourcedefinitions/{CRD}"]
    assert all(obj is None for obj in stored(kube).values())


def test_objects_of_other_managers_are_left_alone_and_reported(
    kube: Emulator, config: Config, progress: Any
) -> None:
    app = gadgets(None)
    app.install(config=config, progress=progress)  # CRDs and RBAC only
    with kube.config(namespace=NAMESPACE) as other:  # someone else's, with the operator's name
        other.client(("apps", "v1", "deployments")).apply(
            {**DEPLOYMENT, "metadata": {"name": "gadgets", "namespace": NAMESPACE}},
            field_manager="helm",
        )
    results = {r.object: r for r in app.uninstall(config=config, progress=progress)}
    left = results["Deployment operators/gadgets"]
    assert left.action == "left"
    assert left.detail == (
        "not installed by cloudcoil-gadgets: no cloudcoil.io/installed-by annotation; "
        "managed by helm"
    )
    assert left.dry_run_line() == f"would leave Deployment operators/gadgets ({left.detail})"
    assert results["ServiceAccount operators/gadgets"].action == "deleted"
    assert kube.get_object("apps", "deployments", NAMESPACE, "gadgets") is not None
    assert kube.get_object("", "serviceaccounts", NAMESPACE, "gadgets") is None


def test_dry_run_deletes_nothing(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    app.install(image="gadgets:v1", config=config, progress=progress)
    before = kube.store.resource_version
    results = app.uninstall(include_crds=True, dry_run=True, config=config, progress=progress)
    assert [r.dry_run_line() for r in results][:3] == [
        f"would delete MutatingWebhookConfiguration {HOOKS}",
        f"would delete ValidatingWebhookConfiguration {HOOKS}",
        "would delete Deployment operators/gadgets",
    ]
    assert kube.store.resource_version == before
    assert all(obj is not None for obj in stored(kube).values())
    deletes = [e for e in kube.request_log if e.method == "DELETE"]
    assert len(deletes) == 12
    assert "would delete Lease operators/gadgets" in [r.dry_run_line() for r in results]


def test_timeout_names_the_object_still_terminating(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    app.install(image="gadgets:v1", config=config, progress=progress)
    config.client(("apps", "v1", "deployments")).merge_patch(
        "gadgets", {"metadata": {"finalizers": ["example.com/hold"]}}, field_manager="holder"
    )
    with pytest.raises(InstallTimeout) as info:
        app.uninstall(timeout=0.5, config=config, progress=progress)
    message = str(info.value)
    assert message.startswith(
        "timed out after 0.5 s waiting for Deployment operators/gadgets to be gone "
        "(terminating (finalizers: example.com/hold"
    ), message
    assert "removed 2 of 12" in message and "pending: Deployment operators/gadgets, Service" in (
        message
    )
    assert kube.get_object("", "services", NAMESPACE, "gadgets") is not None


def test_what_the_annotation_marks_is_removed_whatever_its_managers(
    kube: Emulator, config: Config, progress: Any
) -> None:
    """Issue 44: kube-apiserver records no field manager for an object applied with only its
    name (a ServiceAccount), so managers cannot decide; the annotation does, also on objects
    that other tooling applied from `manifests` output."""
    app = gadgets(None)
    documents = app.manifests()
    (sa,) = [d for d in documents if d["kind"] == "ServiceAccount"]
    assert sa["metadata"]["annotations"] == {"cloudcoil.io/installed-by": "operators/gadgets"}
    with kube.config(namespace=NAMESPACE) as other:  # `manifests | kubectl create -f -`
        other.client(("", "v1", "serviceaccounts")).create(sa)
    created = kube.get_object("", "serviceaccounts", NAMESPACE, "gadgets")
    assert created is not None
    assert "cloudcoil-gadgets" not in {m["manager"] for m in created["metadata"]["managedFields"]}
    results = {r.object: r.action for r in app.uninstall(config=config, progress=progress)}
    assert results["ServiceAccount operators/gadgets"] == "deleted"
    assert kube.get_object("", "serviceaccounts", NAMESPACE, "gadgets") is None


def test_objects_found_in_place_are_adopted_unmarked_and_left(
    kube: Emulator, config: Config, lines: Lines, progress: Any
) -> None:
    """An object that existed before install is applied (install needs it) but never marked,
    so uninstall leaves it; one marked by the same app in another namespace keeps its mark."""
    with kube.config(namespace=NAMESPACE) as other:
        other.client(("", "v1", "serviceaccounts")).create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gadgets"}}
        )
    app = gadgets(None)
    (crd,) = [d for d in app.manifests() if d["kind"] == "CustomResourceDefinition"]
    crd["metadata"]["annotations"] = {"cloudcoil.io/installed-by": "elsewhere/gadgets"}
    config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions")).apply(
        crd, field_manager="cloudcoil-gadgets"
    )
    app.install(config=config, progress=progress)
    assert (
        "found ServiceAccount operators/gadgets in place, not installed by cloudcoil-gadgets: "
        "uninstall will leave it"
    ) in lines.lines
    objects = stored(kube)
    sa, installed_crd = objects["sa"], objects["crd"]
    assert sa is not None and installed_crd is not None
    assert "annotations" not in sa["metadata"]
    assert installed_crd["metadata"]["annotations"] == {
        "cloudcoil.io/installed-by": "elsewhere/gadgets"
    }
    assert objects["role"] is not None
    assert objects["role"]["metadata"]["annotations"] == {
        "cloudcoil.io/installed-by": "operators/gadgets"
    }
    results = {
        r.object: r for r in app.uninstall(include_crds=True, config=config, progress=progress)
    }
    assert results["ServiceAccount operators/gadgets"].action == "left"
    assert results[f"CustomResourceDefinition {CRD}"].detail == (
        "installed by elsewhere/gadgets, not operators/gadgets (cloudcoil.io/installed-by)"
    )
    assert results["Role operators/gadgets.operators"].action == "deleted"
    assert stored(kube)["sa"] is not None and stored(kube)["crd"] is not None
