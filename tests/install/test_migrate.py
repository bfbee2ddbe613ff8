"""Storage migration and install's stored-version check, against the emulator: an API that
moved from v1alpha1 (storage) to v1, objects stored in both, ``migrate`` (CLI), a release
that drops v1alpha1 refused until then, and install's staging of a new converting CRD."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cloudcoil_sync.application import Application, build_cli
from cloudcoil_sync.client import Config
from cloudcoil_sync.crd import CRD
from cloudcoil_sync.testing import Emulator, OperatorRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from example_harness import load

GROUP = "examples.cloudcoil.dev"
NAME = f"gizmos.{GROUP}"
CRDS = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")


def stored_versions(config: Config) -> list[str]:
    return list(config.client(CRDS).get(NAME)["status"]["storedVersions"])


def stored_as(kube: Emulator, name: str) -> str:
    obj = kube.store.get((GROUP, "gizmos"), "default", name)
    assert obj is not None
    return str(obj["apiVersion"])


def release(model: Any, config: Config) -> Application:
    """An operator release whose CRD has ``model``'s version only."""
    app = Application("gizmos", resources=(CRD(model),))
    app.config = config

    @app.controller(model).reconcile()
    def reconcile(obj: Any, ctx: Any) -> None:
        return None

    return app


def cli(app: Application, *args: str) -> Any:
    return CliRunner().invoke(build_cli(app), list(args), catch_exceptions=False)


def test_migrate_rewrites_every_object_and_trims_stored_versions(
    kube_emulator: Emulator, kube_operator: OperatorRunner
) -> None:
    module = load("versioned_operator")
    admin = kube_emulator.config()
    # The previous release: v1alpha1 only, its objects stored as v1alpha1.
    previous = release(module.GizmoV1Alpha1, admin)
    assert cli(previous, "install", "--without-webhooks", "-q").exit_code == 0
    old = admin.client(module.GizmoV1Alpha1)
    for name in ("a", "b"):
        old.create(module.GizmoV1Alpha1.model_validate({"metadata": {"name": name}}))
    assert [stored_as(kube_emulator, n) for n in ("a", "b")] == [f"{GROUP}/v1alpha1"] * 2
    # This release: installed (the CRD left as it is until the rollout) and running (its
    # status writes may already store an object as v1).
    kube_operator(module.app)
    assert stored_versions(admin) == ["v1alpha1", "v1"]
    assert admin.client(module.Gizmo).get("a").spec.message == "hello"  # via the webhook

    # The next release drops v1alpha1: refused while objects may be stored in it.
    after = release(module.Gizmo, admin)
    refused = cli(after, "install", "--without-webhooks")
    assert refused.exit_code == 1
    assert f"Error: {NAME}: objects may still be stored as v1alpha1, which this install " in (
        refused.output
    )
    assert "(python app.py migrate) first" in refused.output

    operator = Application("gizmos", resources=(module.GIZMOS,), webhook=module.app.webhook)
    operator.config = admin
    migrated = cli(operator, "migrate")
    assert migrated.exit_code == 0, migrated.output
    assert f"{NAME}: 2 objects rewritten as v1" in migrated.output
    assert f"{NAME}: status.storedVersions = [v1] (was ['v1alpha1', 'v1'])" in migrated.output
    assert stored_versions(admin) == ["v1"]
    assert [stored_as(kube_emulator, n) for n in ("a", "b")] == [f"{GROUP}/v1"] * 2
    again = cli(operator, "migrate")
    assert again.exit_code == 0
    assert f"{NAME}: every object is stored as v1; nothing to migrate" in again.output

    assert cli(after, "install", "--without-webhooks", "-q").exit_code == 0
    crd = admin.client(CRDS).get(NAME)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1"]


def test_install_applies_a_new_converting_crd_after_the_rollout(
    kube_emulator: Emulator, kube_operator: OperatorRunner
) -> None:
    module = load("versioned_operator")
    admin = kube_operator(module.app)
    crd = admin.client(CRDS).get(NAME)
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    assert [(v["name"], v["served"]) for v in crd["spec"]["versions"]] == [
        ("v1", True),
        ("v1alpha1", True),
    ]
    # What install did, in order: the CRD serving v1 only, the Deployment, the full CRD.
    writes = [
        (entry.path.rsplit("/", 1)[-1].split("?")[0], entry.method)
        for entry in kube_emulator.request_log
        if entry.method == "PATCH"
        and ("customresourcedefinitions" in entry.path or "/deployments/" in entry.path)
    ]
    assert writes == [(NAME, "PATCH"), ("gizmos", "PATCH"), (NAME, "PATCH")]
