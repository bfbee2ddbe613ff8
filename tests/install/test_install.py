"""``install`` against the emulator: order, waits, idempotence, conflicts, timeout, dry run."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application
from cloudcoil_sync.application._internal.install import changed_paths, rollout_state
from cloudcoil_sync.application._internal.progress import (
    InstallConflict,
    InstallError,
    InstallTimeout,
)
from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .apps import NAMESPACE, gadgets, keep
from .conftest import ROLLOUTS, Lines

pytestmark = ROLLOUTS

MANAGER = "cloudcoil-gadgets"
CRD = "gadgets.install.cloudcoil.dev"
HOOKS = "gadgets.operators.cloudcoil.io"
INSTALL_ORDER = [
    f"customresourcedefinitions/{CRD}",
    "serviceaccounts/gadgets",
    "clusterroles/gadgets.operators",  # the reviews secure /metrics needs
    "clusterrolebindings/gadgets.operators",
    "roles/gadgets.operators",
    "rolebindings/gadgets.operators",
    "clusterroles/gadgets.operators-metrics-reader",
    "services/gadgets",
    "operators/leases",  # POST: the Lease created released (first install only)
    "deployments/gadgets",
    f"mutatingwebhookconfigurations/{HOOKS}",
    f"validatingwebhookconfigurations/{HOOKS}",
]


def writes(kube: Emulator) -> list[str]:
    """``plural/name`` of every write request in the log, in order."""
    return [
        "/".join(e.path.split("/")[-2:])
        for e in kube.request_log
        if e.method in ("PATCH", "POST", "PUT", "DELETE")
    ]


def stored(kube: Emulator) -> dict[str, dict[str, Any] | None]:
    """The app's objects as stored (None when absent)."""
    return {
        "crd": kube.get_object("apiextensions.k8s.io", "customresourcedefinitions", "", CRD),
        "sa": kube.get_object("", "serviceaccounts", NAMESPACE, "gadgets"),
        "role": kube.get_object(
            "rbac.authorization.k8s.io", "roles", NAMESPACE, "gadgets.operators"
        ),
        "service": kube.get_object("", "services", NAMESPACE, "gadgets"),
        "deployment": kube.get_object("apps", "deployments", NAMESPACE, "gadgets"),
        "mutating": kube.get_object(
            "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", HOOKS
        ),
        "validating": kube.get_object(
            "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", HOOKS
        ),
    }


class Timeline:
    """Store events in order: (plural, name, type, Established/available at that point)."""

    def __init__(self, kube: Emulator) -> None:
        self.events: list[tuple[str, str, str, bool]] = []
        kube.store.listeners.append(self)

    def __call__(self, ev: Any) -> None:
        obj = ev.obj
        status = obj.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        ready = conditions.get("Established") == "True" or bool(status.get("availableReplicas"))
        self.events.append((ev.key[1], obj["metadata"]["name"], ev.type, ready))

    def first(self, plural: str, *, ready: bool | None = None) -> int:
        for i, (p, _, _, r) in enumerate(self.events):
            if p == plural and (ready is None or r == ready):
                return i
        raise AssertionError(f"no event for {plural} (ready={ready})")


def test_full_install_applies_in_order_and_waits(
    kube: Emulator, config: Config, app: Application, lines: Lines, progress: Any
) -> None:
    kube.rollouts.mode = 0.2  # type: ignore[union-attr]
    timeline = Timeline(kube)
    results = app.install(image="gadgets:v1", config=config, progress=progress)

    assert [r.action for r in results] == ["created"] * 11
    assert writes(kube) == INSTALL_ORDER
    patches = [e for e in kube.request_log if e.method == "PATCH"]
    assert all(e.query.get("fieldManager") == MANAGER for e in patches)
    assert all(e.status == 201 for e in patches)
    # CRD Established before anything else is applied; rollout available before webhooks.
    assert timeline.first("customresourcedefinitions", ready=True) < timeline.first(
        "serviceaccounts"
    )
    assert timeline.first("deployments", ready=True) < timeline.first(
        "mutatingwebhookconfigurations"
    )
    objects = stored(kube)
    assert all(obj is not None for obj in objects.values())
    for obj in objects.values():
        assert obj is not None
        managers = {(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]}
        assert (MANAGER, "Apply") in managers
    deployment = objects["deployment"]
    assert deployment is not None
    assert rollout_state(deployment, deployment)[0]
    # Progress: one line per step, the rollout wait with its state, discovery, summary.
    assert "applied Deployment operators/gadgets: created" in lines.lines
    assert any(
        line.startswith("waiting for Deployment operators/gadgets to be available:")
        for line in lines.lines
    )
    assert any(
        line.startswith("Deployment operators/gadgets is available: done in")
        for line in lines.lines
    )
    assert lines.lines[-2] == "discovery refreshed"
    assert lines.lines[-1].startswith("installed 11 objects in ")
    assert config.mapper.resolve(("install.cloudcoil.dev", "v1", "gadgets")).namespaced


def test_without_webhooks_installs_crds_and_rbac_only(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    results = app.install(include_webhooks=False, config=config, progress=progress)
    assert [r.object.split()[0] for r in results] == [
        "CustomResourceDefinition",
        "ServiceAccount",
        "Role",
        "RoleBinding",
    ]
    objects = stored(kube)
    assert objects["crd"] is not None and objects["role"] is not None
    assert objects["service"] is None and objects["deployment"] is None
    assert objects["mutating"] is None and objects["validating"] is None


def test_webhooks_need_an_image_and_nothing_is_sent(
    kube: Emulator, config: Config, app: Application
) -> None:
    kube.clear_log()
    with pytest.raises(ValueError, match=r"Installing webhooks requires image=\.\.\."):
        app.install(config=config)
    with pytest.raises(ValueError, match="finite and positive"):
        app.install(image="gadgets:v1", config=config, timeout=float("inf"))
    assert kube.request_log == []


def test_second_install_is_a_no_op(
    kube: Emulator, config: Config, app: Application, lines: Lines, progress: Any
) -> None:
    app.install(image="gadgets:v1", config=config, progress=progress)
    before = kube.store.resource_version
    snapshot = stored(kube)
    lines.lines.clear()
    results = app.install(image="gadgets:v1", config=config, progress=progress)
    assert [r.action for r in results] == ["unchanged"] * 11
    assert kube.store.resource_version == before
    assert stored(kube) == snapshot
    assert lines.lines[-1] == "install: nothing to change, 11 objects up to date"


def take_replicas(kube: Emulator, replicas: int) -> None:
    """Another manager (kubectl) takes ``.spec.replicas`` of the operator's Deployment."""
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gadgets", "namespace": NAMESPACE},
        "spec": {"replicas": replicas},
    }
    with kube.config(namespace=NAMESPACE) as cfg:
        cfg.client(("apps", "v1", "deployments")).apply(body, field_manager="kubectl", force=True)


def test_conflict_names_the_manager_and_field_and_force_takes_ownership(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    app.install(image="gadgets:v1", config=config, progress=progress)
    take_replicas(kube, 3)
    with pytest.raises(InstallConflict) as info:
        app.install(image="gadgets:v1", config=config, progress=progress)
    message = str(info.value)
    assert "\n" not in message
    assert info.value.manager == "kubectl" and info.value.field == ".spec.replicas"
    assert message.startswith(
        "Deployment operators/gadgets: field .spec.replicas is owned by field manager 'kubectl'"
    )
    assert "--force" in message
    assert "pending: Deployment operators/gadgets, MutatingWebhookConfiguration" in message
    deployment = kube.get_object("apps", "deployments", NAMESPACE, "gadgets")
    assert deployment is not None and deployment["spec"]["replicas"] == 3

    results = app.install(image="gadgets:v1", config=config, force=True, progress=progress)
    changed = {r.object: r.fields for r in results if r.action == "configured"}
    assert changed == {"Deployment operators/gadgets": [".spec.replicas"]}
    deployment = kube.get_object("apps", "deployments", NAMESPACE, "gadgets")
    assert deployment is not None and deployment["spec"]["replicas"] == 1
    owners = {
        m["manager"]
        for m in deployment["metadata"]["managedFields"]
        if "f:replicas" in (m.get("fieldsV1") or {}).get("f:spec", {})
    }
    assert owners == {MANAGER}


@pytest.mark.kube_emulator(deployments="never")
def test_timeout_names_what_was_pending_and_registers_no_webhooks(
    kube: Emulator, config: Config, app: Application, lines: Lines, progress: Any
) -> None:
    with pytest.raises(InstallTimeout) as info:
        # Long enough for the nine objects before the Deployment on a loaded machine.
        app.install(image="gadgets:v1", config=config, timeout=5, progress=progress)
    message = str(info.value)
    assert message.startswith(
        "timed out after 5 s waiting for Deployment operators/gadgets to be available "
        "(1/1 updated, 0/1 available)"
    ), message
    assert "applied 9 of 11" in message
    assert f"pending: MutatingWebhookConfiguration {HOOKS}, ValidatingWebhookConfiguration" in (
        message
    )
    objects = stored(kube)
    assert objects["mutating"] is None and objects["validating"] is None
    # Nothing rolled back.
    assert objects["crd"] is not None and objects["deployment"] is not None
    waits = [line for line in lines.lines if line.startswith("waiting for Deployment")]
    assert waits[-1].endswith(": 1/1 updated, 0/1 available")
    assert isinstance(info.value, TimeoutError)


def test_dry_run_changes_nothing_and_reports_changes(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    before = kube.store.resource_version
    results = app.install(image="gadgets:v1", config=config, dry_run=True, progress=progress)
    assert [r.action for r in results] == ["created"] * 12
    assert any(
        r.dry_run_line().startswith("created Lease operators/gadgets: released") for r in results
    )
    assert kube.store.resource_version == before
    assert all(obj is None for obj in stored(kube).values())
    assert all(e.query.get("dryRun") == "All" for e in kube.request_log if e.method == "PATCH")

    app.install(image="gadgets:v1", config=config, progress=progress)
    before = kube.store.resource_version
    results = app.install(
        image="gadgets:v2", replicas=2, config=config, dry_run=True, progress=progress
    )
    lines = [r.dry_run_line() for r in results]
    assert lines[8] == (
        "changed Deployment operators/gadgets: .spec.replicas, "
        ".spec.template.spec.containers[name=operator].image"
    )
    assert lines[0] == f"unchanged CustomResourceDefinition {CRD}"
    assert sum(line.startswith("unchanged") for line in lines) == 10
    assert kube.store.resource_version == before


def test_rejected_crd_names_fail_with_the_crd_name(
    kube: Emulator, config: Config, app: Application, progress: Any
) -> None:
    app.install(include_webhooks=False, config=config, progress=progress)
    crds = config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
    crd = crds.get(CRD)
    for condition in crd["status"]["conditions"]:
        if condition["type"] == "NamesAccepted":
            condition.update(status="False", reason="PluralConflict", message="taken")
    crds.replace_status(crd)
    with pytest.raises(InstallError, match=f"^CRD name rejected: {CRD} "):
        app.install(include_webhooks=False, config=config, progress=progress)


def test_forbidden_is_reported_with_what_was_pending(kube: Emulator, app: Application) -> None:
    kube.add_token("nobody-token", "nobody")
    with (
        kube.config(namespace=NAMESPACE, token="nobody-token") as cfg,
        pytest.raises(InstallError) as info,
    ):
        app.install(image="gadgets:v1", config=cfg, progress=None)
    message = str(info.value)
    assert message.startswith(f"applying CustomResourceDefinition {CRD} failed: 403 Forbidden")
    assert message.endswith("(nothing applied)") and "\n" not in message


def test_changed_paths_ignores_status_and_server_metadata() -> None:
    before: dict[str, Any] = {
        "metadata": {"name": "a", "resourceVersion": "1", "labels": {"x": "1"}},
        "spec": {"containers": [{"name": "c", "image": "i:1"}], "ports": [1]},
        "status": {"replicas": 1},
    }
    after = copy.deepcopy(before)
    after["metadata"].update(resourceVersion="2", labels={"x": "2"})
    after["spec"]["containers"][0]["image"] = "i:2"
    after["spec"]["ports"] = [1, 2]
    after["status"] = {"replicas": 2}
    assert changed_paths(before, after) == [
        ".metadata.labels.x",
        ".spec.containers[name=c].image",
        ".spec.ports",
    ]
    assert changed_paths(before, copy.deepcopy(before)) == []


def test_an_app_config_is_used_and_left_open(kube: Emulator, progress: Any) -> None:
    with kube.config(namespace=NAMESPACE) as cfg:
        app = Application("lone", namespace=NAMESPACE, config=cfg)
        app.controller(ConfigMap).reconcile()(keep)
        assert (
            app.install(config=None, progress=progress)[0].object == "ServiceAccount operators/lone"
        )
        assert cfg.client(("", "v1", "serviceaccounts")).get("lone")["metadata"]["name"] == "lone"


def test_gadgets_app_without_webhook_server(kube: Emulator, config: Config, progress: Any) -> None:
    results = gadgets(None).install(image="gadgets:v1", config=config, progress=progress)
    assert [r.object.split()[0] for r in results][-1] == "Deployment"


def test_a_missing_namespace_is_named(config: Config, progress: Any) -> None:
    app = Application("lonely", namespace="missing")
    app.controller(ConfigMap).reconcile()(keep)
    with pytest.raises(InstallError) as info:
        app.install(config=config, progress=progress)
    message = str(info.value)
    assert message.startswith("applying ServiceAccount missing/lonely failed: 404 NotFound")
    assert "(create namespace missing first)" in message


def test_rollout_state_reports_a_stalled_rollout() -> None:
    doc = {"spec": {"replicas": 2}}
    obj = {
        "metadata": {"generation": 3},
        "status": {
            "observedGeneration": 3,
            "replicas": 3,
            "updatedReplicas": 1,
            "availableReplicas": 2,
            "conditions": [
                {
                    "type": "Progressing",
                    "status": "False",
                    "reason": "ProgressDeadlineExceeded",
                    "message": "ReplicaSet has timed out progressing.",
                }
            ],
        },
    }
    assert rollout_state(doc, obj) == (
        False,
        "1/2 updated, 2/2 available, 2 old replicas, ProgressDeadlineExceeded: "
        "ReplicaSet has timed out progressing.",
    )
    assert rollout_state(doc, {"metadata": {"generation": 2}, "status": {}}) == (
        False,
        "generation 2 not yet observed",
    )
