"""examples/widget_operator.py: manifests (reference §7); the operator against the emulator."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from example_harness import EXAMPLES, PEM_CA, conditions, load

from cloudcoil_sync.client import Config, Forbidden
from cloudcoil_sync.testing import Emulator, OperatorRunner

GROUP = "examples.cloudcoil.dev"


def by_kind(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in documents}


def test_manifests_match_the_golden_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDCOIL_NAMESPACE", "operators")
    module = load("widget_operator")
    docs = module.app.manifests(image="widgets:v1", ca_bundle=PEM_CA)
    assert [d["kind"] for d in docs] == [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",  # creating the reviews secure /metrics needs
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ClusterRole",  # metrics-reader, for a scraper
        "Service",
        "Deployment",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    kinds = by_kind(docs)
    crd = kinds["CustomResourceDefinition"]
    assert crd["metadata"]["name"] == f"widgets.{GROUP}"
    assert crd["spec"]["names"]["shortNames"] == ["wd"]
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    assert version["additionalPrinterColumns"][0] == {
        "name": "Phase",
        "type": "string",
        "priority": 0,
        "jsonPath": ".status.phase",
    }
    rules = {
        (r["apiGroups"][0], r["resources"][0], tuple(r.get("resourceNames", ()))): r["verbs"]
        for r in kinds["Role"]["rules"]
    }
    assert rules == {
        ("", "configmaps", ()): ["create", "get", "list", "patch", "watch"],
        ("", "configmaps", ("widget-policy",)): ["get"],
        ("", "services", ()): ["create", "get", "list", "patch", "watch"],
        ("apps", "deployments", ()): ["create", "get", "list", "patch", "watch"],
        ("coordination.k8s.io", "leases", ()): ["create"],
        ("coordination.k8s.io", "leases", ("widgets",)): ["get", "update", "watch"],
        ("events.k8s.io", "events", ()): ["create"],
        (GROUP, "widgets", ()): ["get", "list", "patch", "watch"],
        (GROUP, "widgets/status", ()): ["patch"],
    }
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    assert pod["volumes"][0]["secret"]["secretName"] == "widgets-tls"
    assert pod["containers"][0]["args"] == ["run"]
    mutate = kinds["MutatingWebhookConfiguration"]["webhooks"][0]
    validate = kinds["ValidatingWebhookConfiguration"]["webhooks"][0]
    assert mutate["name"] == "mutate-0.widgets.operators.cloudcoil.io"
    assert validate["name"] == "validate-1.widgets.operators.cloudcoil.io"
    assert mutate["clientConfig"]["service"]["path"].startswith("/mutate/default-labels-")
    assert validate["clientConfig"]["service"]["path"].startswith("/validate/validate-message-")
    assert base64.b64decode(mutate["clientConfig"]["caBundle"]) == PEM_CA
    assert mutate["namespaceSelector"]["matchExpressions"][0]["values"] == ["operators"]
    assert mutate["rules"][0]["resources"] == ["widgets"]


def widget_state(kube: Emulator, name: str) -> dict[str, Any] | None:
    return kube.get_object(GROUP, "widgets", "default", name)


def ready(kube: Emulator, name: str) -> bool:
    return conditions(widget_state(kube, name)).get("Ready", {}).get("status") == "True"


def test_widget_converges_with_admission_and_waits_for_rollouts(
    kube_emulator: Emulator, kube_operator: OperatorRunner
) -> None:
    """Run with the generated ServiceAccount (the fixture's default): the generated RBAC is
    enough, nothing is 403 (the fixture fails the test otherwise)."""
    module = load("widget_operator")
    app = module.app
    config: Config = kube_operator(app)  # installed, webhooks on loopback TLS, running
    rollouts = kube_emulator.rollouts
    assert rollouts is not None
    rollouts.mode = "never"  # the Widget's Deployment keeps rolling out
    widgets = config.client(module.Widget)
    widgets.create(
        module.Widget.model_validate(
            {"metadata": {"name": "hello"}, "spec": {"message": "hi", "replicas": 2}}
        )
    )

    def rolling_out() -> bool:
        found = conditions(widget_state(kube_emulator, "hello"))
        return found.get("WorkloadAvailable", {}).get("reason") == "RollingOut"

    assert kube_emulator.wait_for(rolling_out, timeout=20)
    state = widget_state(kube_emulator, "hello") or {}
    found = conditions(state)
    assert [found[c]["status"] for c in ("ConfigurationReady", "DeploymentApplied")] == [
        "True",
        "True",
    ]
    assert found["Ready"]["status"] == "False"
    assert state["status"]["phase"] == "RollingOut"
    # The mutating webhook labelled it on the way in.
    assert state["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "widgets"

    # Children: message in the ConfigMap, replicas on the Deployment, a Service.
    config_map = kube_emulator.get_object("", "configmaps", "default", "hello-config")
    assert config_map is not None and config_map["data"] == {"message": "hi"}
    deployment = kube_emulator.get_object("apps", "deployments", "default", "hello")
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    assert kube_emulator.get_object("", "services", "default", "hello") is not None

    # A new generation rolls out: the Widget becomes Ready and Available.
    rollouts.mode = "available"
    widgets.raw.merge_patch("hello", {"spec": {"replicas": 3}})
    assert kube_emulator.wait_for(lambda: ready(kube_emulator, "hello"), timeout=20)
    state = widget_state(kube_emulator, "hello") or {}
    assert state["status"]["phase"] == "Available"
    assert state["status"]["availableReplicas"] == 3

    # Drift: a deleted child comes back, an edited one is put back.
    old = kube_emulator.get_object("", "configmaps", "default", "hello-config") or {}
    config.client(module.ConfigMap).delete("hello-config")

    def recreated() -> bool:
        new = kube_emulator.get_object("", "configmaps", "default", "hello-config")
        return new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]

    assert kube_emulator.wait_for(recreated, timeout=20)
    config.client(module.ConfigMap).raw.merge_patch("hello-config", {"data": {"message": "x"}})

    def repaired() -> bool:
        new = kube_emulator.get_object("", "configmaps", "default", "hello-config") or {}
        return new.get("data") == {"message": "hi"}

    assert kube_emulator.wait_for(repaired, timeout=20)
    operator = "system:serviceaccount:default:widgets"
    log = [e for e in kube_emulator.request_log if e.user == operator]
    assert len(log) > 10 and [e for e in log if e.status == 403] == []
    assert kube_operator.forbidden() == []


def test_validating_webhook_reads_the_policy_live(
    kube_config: Config, kube_operator: OperatorRunner
) -> None:
    """End-to-end admission through the fixture: the emulator calls the operator's webhooks
    over TLS with the test CA's caBundle; the webhook reads the policy as the operator."""
    module = load("widget_operator")
    config = kube_operator(module.app)
    widgets = config.client(module.Widget)

    def create(name: str, message: str, replicas: int) -> Any:
        return widgets.create(
            module.Widget.model_validate(
                {
                    "metadata": {"name": name},
                    "spec": {"message": message, "replicas": replicas},
                }
            )
        )

    assert create("free", "anything goes", 7).metadata.name == "free"  # no policy yet
    with pytest.raises(Forbidden, match=r"spec\.message must not be blank"):
        create("blank", "  ", 1)
    kube_config.client(module.ConfigMap).raw.create(
        {
            "metadata": {"name": "widget-policy"},
            "data": {"maxReplicas": "3", "forbiddenWords": "legacy, beta"},
        }
    )
    with pytest.raises(Forbidden, match=r"exceeds the policy's 3"):
        create("big", "hello", 5)
    with pytest.raises(Forbidden, match=r"forbidden word 'beta'"):
        create("beta", "a Beta widget", 1)
    assert create("fine", "hello", 3).metadata.labels["tier"] == "web"


def test_seed_commands_generate_manifests_offline(tmp_path: Path) -> None:
    """The seed document's commands: namespace and CA from the environment, no cluster."""
    (tmp_path / "ca.crt").write_bytes(PEM_CA)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KUBECONFIG": str(tmp_path / "missing"),
        "CLOUDCOIL_NAMESPACE": "operators",
        "CLOUDCOIL_WEBHOOK_CA_FILE": str(tmp_path / "ca.crt"),
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "widget_operator.py"), "manifests", "--image", "w:v1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    docs = list(yaml.safe_load_all(done.stdout))
    namespaced = [d for d in docs if "namespace" in d["metadata"]]
    assert {d["metadata"]["namespace"] for d in namespaced} == {"operators"}
    hooks = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]
    assert [d["metadata"]["name"] for d in hooks] == ["widgets.operators.cloudcoil.io"] * 2
    assert base64.b64decode(hooks[0]["webhooks"][0]["clientConfig"]["caBundle"]) == PEM_CA
    # Without a CA the command says how to give one (one line, exit status 2).
    del env["CLOUDCOIL_WEBHOOK_CA_FILE"]
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "widget_operator.py"), "manifests"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("Error: ") and "--ca-file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
