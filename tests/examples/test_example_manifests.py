"""Every example builds its manifests offline; the RBAC each pattern needs, and no more."""

from __future__ import annotations

from typing import Any

import pytest
from example_harness import PATTERNS, PEM_CA, load

EXAMPLES = [*sorted(p.stem for p in PATTERNS.glob("*.py")), "widget_operator", "settings_operator"]

Rules = dict[tuple[str, str, tuple[str, ...]], list[str]]


def manifests(name: str, **options: Any) -> list[dict[str, Any]]:
    app = load(name).app
    if app.webhook is not None:
        options.setdefault("ca_bundle", PEM_CA)
    return app.manifests(image="example/operator:v1", **options)


def rules(docs: list[dict[str, Any]]) -> Rules:
    found: Rules = {}
    for doc in docs:
        if doc["kind"] in ("Role", "ClusterRole"):
            for rule in doc["rules"]:
                for url in rule.get("nonResourceURLs", ()):  # the metrics-reader role
                    found[("", url, ())] = rule["verbs"]
                for group in rule.get("apiGroups", ()):
                    for resource in rule["resources"]:
                        key = (group, resource, tuple(rule.get("resourceNames", ())))
                        found[key] = rule["verbs"]
    return found


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return [doc["kind"] for doc in docs]


def crds(docs: list[dict[str, Any]]) -> list[str]:
    return [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]


def test_every_pattern_is_documented_in_the_index() -> None:
    index = (PATTERNS / "README.md").read_text()
    for path in PATTERNS.glob("*.py"):
        assert f"({path.name})" in index, path.name
        assert load(path.stem).__doc__, path.name  # each says what it shows


@pytest.mark.parametrize("name", EXAMPLES)
def test_manifests_are_offline_deterministic_and_without_wildcards(name: str) -> None:
    first, second = manifests(name), manifests(name)
    assert first == second
    assert "Deployment" in kinds(first)
    for verbs in rules(first).values():
        assert "*" not in verbs
    for (group, resource, _), _verbs in rules(first).items():
        assert "*" not in (group, resource)
    # Private keys never appear.
    assert "PRIVATE KEY" not in repr(first)


def test_cached_reads_owns_and_watches_configmaps() -> None:
    docs = manifests("cached_reads")
    assert crds(docs) == ["configmirrors.patterns.cloudcoil.dev"]
    assert rules(docs)[("", "configmaps", ())] == ["create", "get", "list", "patch", "watch"]


def test_dependency_rollout_only_reads_its_dependency() -> None:
    docs = manifests("dependency_rollout")
    assert crds(docs) == []
    found = rules(docs)
    assert found[("apps", "deployments", ())] == ["get", "list", "patch", "watch"]
    assert found[("", "configmaps", ())] == ["get", "list", "watch"]


def test_workload_summary_reads_deployments_and_writes_its_status() -> None:
    docs = manifests("workload_summary")
    found = rules(docs)
    assert found[("apps", "deployments", ())] == ["get", "list", "watch"]
    assert found[("patterns.cloudcoil.dev", "workloadsummaries/status", ())] == ["patch"]


def test_child_pruning_grants_delete_on_configmaps() -> None:
    docs = manifests("child_pruning")
    assert crds(docs) == [
        "configsets.patterns.cloudcoil.dev",
        "guardedconfigsets.patterns.cloudcoil.dev",
    ]
    assert rules(docs)[("", "configmaps", ())] == [
        "create",
        "delete",
        "get",
        "list",
        "patch",
        "watch",
    ]


def test_child_pruning_infers_delete_from_prune_alone() -> None:
    module = load("child_pruning")
    from cloudcoil_sync.application import Application

    app = Application("pruner", namespace="default")
    app.include(module.configsets)
    found = rules(app.manifests())
    assert "delete" in found[("", "configmaps", ())]


def test_finalizers_need_no_extra_grant() -> None:
    found = rules(manifests("finalizers"))
    assert found[("patterns.cloudcoil.dev", "dnsrecords", ())] == ["get", "list", "patch", "watch"]
    assert not any("delete" in verbs for verbs in found.values())


def test_multiple_controllers_share_one_role_and_lease() -> None:
    docs = manifests("multiple_controllers")
    assert kinds(docs).count("Role") == 1
    found = rules(docs)
    assert found[("apps", "deployments", ())] == ["get", "list", "patch", "watch"]
    assert found[("coordination.k8s.io", "leases", ("workloads",))] == [
        "get",
        "update",
        "watch",
    ]
    assert crds(docs) == ["workloadsummaries.patterns.cloudcoil.dev"]


def test_lifespans_elect_a_leader() -> None:
    found = rules(manifests("lifespans"))
    assert found[("coordination.k8s.io", "leases", ())] == ["create"]


def webhook_rules(docs: list[dict[str, Any]]) -> list[tuple[str, str, tuple[str, ...]]]:
    found = []
    for doc in docs:
        if doc["kind"].endswith("WebhookConfiguration"):
            kind = "mutate" if doc["kind"].startswith("Mutating") else "validate"
            for hook in doc["webhooks"]:
                (rule,) = hook["rules"]
                found.append((kind, rule["resources"][0], tuple(rule["operations"])))
    return found


def test_admission_builtin_covers_deployments_and_their_scale() -> None:
    docs = manifests("admission_builtin")
    assert crds(docs) == [] and "Role" not in kinds(docs)
    assert webhook_rules(docs) == [
        ("mutate", "deployments", ("CREATE",)),
        ("validate", "deployments", ("CREATE", "UPDATE")),
        ("validate", "deployments", ("DELETE",)),
        ("validate", "deployments/scale", ("UPDATE",)),
    ]


def test_admission_external_crd_installs_no_crd() -> None:
    docs = manifests("admission_external_crd")
    assert crds(docs) == []
    (hook,) = next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration")["webhooks"]
    assert hook["rules"][0]["apiGroups"] == ["cert-manager.io"]
    assert hook["rules"][0]["resources"] == ["certificates"]
