"""RBAC inference: one test per row of the seed's table, buckets, merging, sorting, errors."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated, Any, Literal

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace, Secret, Service
from cloudcoil.models.kubernetes.rbac.v1 import ClusterRole
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application._internal.rbac import (
    ControllerAccess,
    RuleAccess,
    infer_permissions,
)


class Gadget(Resource):
    """A custom kind with no metadata at all (needs an RBACRule)."""

    api_version: Annotated[Literal["example.com/v1"], Field(alias="apiVersion")] = "example.com/v1"
    kind: Literal["Gadget"] = "Gadget"


class Gizmo(Resource):
    """A custom kind carrying @custom_resource-style metadata, cluster scoped, with status."""

    api_version: Annotated[Literal["example.com/v1"], Field(alias="apiVersion")] = "example.com/v1"
    kind: Literal["Gizmo"] = "Gizmo"
    status: dict[str, Any] | None = None


Gizmo.__cloudcoil_crd__ = SimpleNamespace(plural="gizmos", scope="Cluster", status=None)  # type: ignore[attr-defined]


def rules_of(permissions: Any, target: str | None) -> list[dict[str, Any]]:
    return permissions.rules(target)


def rule(group: str, resource: str, verbs: list[str], **extra: Any) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": [resource], "verbs": verbs, **extra}


def test_primary_gets_read_and_patch_in_the_operator_namespace() -> None:
    perms = infer_permissions(
        namespace="ops", controllers=[ControllerAccess(ConfigMap, "ops", events=False)]
    )
    assert perms.targets() == ["ops"]
    assert rules_of(perms, "ops") == [rule("", "configmaps", ["get", "list", "patch", "watch"])]


def test_primary_with_status_subresource_gets_status_patch() -> None:
    perms = infer_permissions(
        namespace="ops", controllers=[ControllerAccess(Deployment, "ops", events=False)]
    )
    assert rules_of(perms, "ops") == [
        rule("apps", "deployments", ["get", "list", "patch", "watch"]),
        rule("apps", "deployments/status", ["patch"]),
    ]


def test_primary_without_status_subresource_gets_no_status_patch() -> None:
    perms = infer_permissions(
        namespace="ops", controllers=[ControllerAccess(Secret, "ops", events=False)]
    )
    assert [r["resources"] for r in rules_of(perms, "ops")] == [["secrets"]]


def test_events_grant_create_on_events_k8s_io_in_the_watched_namespace() -> None:
    perms = infer_permissions(namespace="ops", controllers=[ControllerAccess(ConfigMap, "apps")])
    assert perms.targets() == ["apps"]
    assert rule("events.k8s.io", "events", ["create"]) in rules_of(perms, "apps")


def test_events_of_a_cluster_scoped_primary_go_to_recorder_or_operator_namespace() -> None:
    default = infer_permissions(namespace="ops", controllers=[ControllerAccess(Namespace, "x")])
    assert rules_of(default, "ops") == [rule("events.k8s.io", "events", ["create"])]
    assert rules_of(default, None) == [
        rule("", "namespaces", ["get", "list", "patch", "watch"]),
        rule("", "namespaces/status", ["patch"]),
    ]
    recorder = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(Namespace, None, events_namespace="audit")],
    )
    assert recorder.targets() == [None, "audit"]


def test_owns_grants_create_and_patch_and_delete_only_when_pruning() -> None:
    perms = infer_permissions(
        namespace="ops",
        controllers=[
            ControllerAccess(
                ConfigMap, "ops", owns=((Secret, False), (Service, True)), events=False
            )
        ],
    )
    assert rules_of(perms, "ops") == [
        rule("", "configmaps", ["get", "list", "patch", "watch"]),
        rule("", "secrets", ["create", "get", "list", "patch", "watch"]),
        rule("", "services", ["create", "delete", "get", "list", "patch", "watch"]),
    ]


def test_owned_children_of_a_cluster_scoped_primary_are_granted_cluster_wide() -> None:
    perms = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(Namespace, None, owns=((ConfigMap, False),), events=False)],
    )
    assert perms.targets() == [None]
    assert rule("", "configmaps", ["create", "get", "list", "patch", "watch"]) in rules_of(
        perms, None
    )


def test_watch_grants_read_only() -> None:
    perms = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(ConfigMap, "ops", watches=(Secret,), events=False)],
    )
    assert rule("", "secrets", ["get", "list", "watch"]) in rules_of(perms, "ops")


def test_all_namespaces_controller_goes_to_the_cluster_role() -> None:
    perms = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(ConfigMap, None, owns=((Secret, False),))],
    )
    assert perms.targets() == [None]
    assert rules_of(perms, None) == [
        rule("", "configmaps", ["get", "list", "patch", "watch"]),
        rule("", "secrets", ["create", "get", "list", "patch", "watch"]),
        rule("events.k8s.io", "events", ["create"]),
    ]


def test_leader_election_grants_create_and_named_get_update() -> None:
    perms = infer_permissions(namespace="ops", controllers=[], lease=("settings", None))
    assert rules_of(perms, "ops") == [
        rule("coordination.k8s.io", "leases", ["create"]),
        rule(
            "coordination.k8s.io", "leases", ["get", "update", "watch"], resourceNames=["settings"]
        ),
    ]
    elsewhere = infer_permissions(namespace="ops", controllers=[], lease=("s", "leases"))
    assert elsewhere.targets() == ["leases"]


def test_rbac_rule_namespace_all_namespaces_subresources_and_names() -> None:
    perms = infer_permissions(
        namespace="ops",
        controllers=[],
        rules=[
            RuleAccess(Secret, ("get",), resource_names=("b", "a")),
            RuleAccess(ConfigMap, ("list",), namespace="other"),
            RuleAccess(Deployment, ("get", "update"), all_namespaces=True, subresources=("scale",)),
            RuleAccess(ClusterRole, ("get",)),
        ],
    )
    assert perms.targets() == [None, "ops", "other"]
    assert rules_of(perms, "ops") == [rule("", "secrets", ["get"], resourceNames=["a", "b"])]
    assert rules_of(perms, "other") == [rule("", "configmaps", ["list"])]
    assert rules_of(perms, None) == [
        rule("apps", "deployments/scale", ["get", "update"]),
        rule("rbac.authorization.k8s.io", "clusterroles", ["get"]),
    ]


def test_identical_group_endpoint_names_merge_verbs_and_distinct_names_do_not() -> None:
    perms = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(ConfigMap, "ops", events=False)],
        rules=[
            RuleAccess(ConfigMap, ("delete",)),
            RuleAccess(ConfigMap, ("get",), resource_names=("policy",)),
        ],
    )
    assert rules_of(perms, "ops") == [
        rule("", "configmaps", ["delete", "get", "list", "patch", "watch"]),
        rule("", "configmaps", ["get"], resourceNames=["policy"]),
    ]


def test_rule_declares_plural_and_scope_for_unknown_kinds() -> None:
    with pytest.raises(ValueError) as info:
        infer_permissions(namespace="ops", controllers=[ControllerAccess(Gadget, "ops")])
    assert str(info.value) == (
        "Offline RBAC needs plural and scope for Gadget; "
        "add RBACRule(Gadget, verbs=(...), plural=..., scope=...)"
    )
    perms = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(Gadget, "ops", events=False)],
        rules=[RuleAccess(Gadget, ("get",), plural="gadgets", scope="Namespaced")],
    )
    assert rules_of(perms, "ops") == [
        rule("example.com", "gadgets", ["get", "list", "patch", "watch"])
    ]
    with pytest.raises(ValueError, match=r"^Provide both plural and scope for Gadget$"):
        infer_permissions(
            namespace="ops", controllers=[], rules=[RuleAccess(Gadget, ("get",), plural="g")]
        )


def test_builtin_kinds_need_no_rule_and_conflicting_declarations_fail() -> None:
    agreeing = RuleAccess(ConfigMap, ("get",), plural="configmaps", scope="Namespaced")
    infer_permissions(namespace="ops", controllers=[], rules=[agreeing])
    wrong = RuleAccess(ConfigMap, ("get",), plural="configmapz", scope="Namespaced")
    with pytest.raises(ValueError, match=r"^Conflicting plural/scope declarations for /ConfigMap$"):
        infer_permissions(namespace="ops", controllers=[], rules=[wrong])


def test_custom_resource_metadata_and_crd_manifests_supply_identity() -> None:
    perms = infer_permissions(namespace="ops", controllers=[ControllerAccess(Gizmo, "ops")])
    # Cluster scoped: everything about the primary is in the ClusterRole; events stay namespaced.
    assert rules_of(perms, None) == [
        rule("example.com", "gizmos", ["get", "list", "patch", "watch"]),
        rule("example.com", "gizmos/status", ["patch"]),
    ]
    crd = {
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "subresources": {"status": {}}}],
        }
    }
    perms = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(Gadget, "ops", events=False)],
        crds=[(Gadget, crd)],
    )
    assert [r["resources"] for r in rules_of(perms, "ops")] == [["gadgets"], ["gadgets/status"]]


def test_cluster_kinds_reject_namespaced_rules_and_wildcards_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^Cluster resources cannot have a namespaced RBACRule$"):
        infer_permissions(
            namespace="ops", controllers=[], rules=[RuleAccess(Namespace, ("get",), namespace="x")]
        )
    with pytest.raises(ValueError, match="wildcards"):
        infer_permissions(namespace="ops", controllers=[], rules=[RuleAccess(Secret, ("*",))])


def test_bad_namespaces_are_rejected() -> None:
    with pytest.raises(
        ValueError, match=r"^Controller namespace must be a Kubernetes DNS label, got 'Bad_NS'"
    ):
        infer_permissions(namespace="ops", controllers=[ControllerAccess(ConfigMap, "Bad_NS")])
    with pytest.raises(
        ValueError, match=r"^RBAC namespace must be a Kubernetes DNS label, got 'A'"
    ):
        infer_permissions(
            namespace="ops", controllers=[], rules=[RuleAccess(Secret, ("get",), namespace="A")]
        )


def test_documents_pair_each_role_with_its_binding_cluster_first() -> None:
    perms = infer_permissions(
        namespace="ops",
        controllers=[ControllerAccess(Namespace, None, events=False)],
        lease=("settings", None),
    )
    documents = perms.documents(name="settings", namespace="ops")
    assert [(d["kind"], d["metadata"]) for d in documents] == [
        ("ClusterRole", {"name": "settings.ops"}),
        ("ClusterRoleBinding", {"name": "settings.ops"}),
        ("Role", {"name": "settings.ops", "namespace": "ops"}),
        ("RoleBinding", {"name": "settings.ops", "namespace": "ops"}),
    ]
    binding = documents[3]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "settings.ops",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "settings", "namespace": "ops"}
    ]
