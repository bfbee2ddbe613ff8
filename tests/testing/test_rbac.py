"""RBAC decisions from stored Roles/ClusterRoles and bindings; 401/403 bodies."""

from __future__ import annotations

from typing import Any

from .conftest import Client, configmap

RBAC = "/apis/rbac.authorization.k8s.io/v1"
CM = "/api/v1/namespaces/default/configmaps"


def role(
    client: Client, name: str, rules: list[dict[str, Any]], namespace: str | None = "default"
) -> None:
    kind = "Role" if namespace else "ClusterRole"
    path = f"{RBAC}/namespaces/{namespace}/roles" if namespace else f"{RBAC}/clusterroles"
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "rules": rules,
    }
    assert client.post(path, body).status_code == 201


def bind(
    client: Client,
    name: str,
    role_kind: str,
    role_name: str,
    subjects: list[dict[str, Any]],
    namespace: str | None = "default",
) -> None:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    path = (
        f"{RBAC}/namespaces/{namespace}/rolebindings"
        if namespace
        else f"{RBAC}/clusterrolebindings"
    )
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": subjects,
    }
    assert client.post(path, body).status_code == 201


def sa(name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": "default"}


def test_unknown_token_is_401(client: Client) -> None:
    response = client.as_token("garbage").get(CM)
    assert response.status_code == 401
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_forbidden_until_bound_then_exactly_the_granted_verbs(client: Client) -> None:
    user = client.as_token(client.emulator.service_account_token("default", "op"))
    denied = user.get(CM)
    assert denied.status_code == 403
    assert denied.json()["message"] == (
        'configmaps is forbidden: User "system:serviceaccount:default:op" cannot list '
        'resource "configmaps" in API group "" in the namespace "default"'
    )
    role(
        client,
        "reader",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}],
    )
    bind(client, "op-reader", "Role", "reader", [sa("op")])
    assert user.get(CM).status_code == 200
    created = user.post(CM, configmap("x"))
    assert created.status_code == 403
    assert "cannot create resource" in created.json()["message"]
    other_ns = user.get("/api/v1/namespaces/kube-system/configmaps")
    assert other_ns.status_code == 403


def test_resource_names_and_subresources(client: Client) -> None:
    client.post(CM, configmap("allowed"))
    client.post(CM, configmap("other"))
    role(
        client,
        "one",
        [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["allowed"],
                "verbs": ["get", "patch"],
            },
            {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["update"]},
        ],
    )
    bind(client, "one", "Role", "one", [sa("named")])
    user = client.as_token(client.emulator.service_account_token("default", "named"))
    assert user.get(CM + "/allowed").status_code == 200
    forbidden = user.get(CM + "/other")
    assert forbidden.status_code == 403
    assert forbidden.json()["details"] == {"name": "other", "kind": "configmaps"}
    assert user.get(CM).status_code == 403  # resourceNames never grant list
    status = user.put("/apis/apps/v1/namespaces/default/deployments/d/status", {})
    assert status.status_code == 404  # allowed through RBAC, the object is missing
    main = user.put("/apis/apps/v1/namespaces/default/deployments/d", {})
    assert main.status_code == 403
    assert 'cannot update resource "deployments" in API group "apps"' in main.json()["message"]


def test_cluster_role_through_cluster_binding_and_group_subject(client: Client) -> None:
    role(
        client,
        "ns-reader",
        [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}],
        namespace=None,
    )
    bind(
        client,
        "team",
        "ClusterRole",
        "ns-reader",
        [{"kind": "Group", "name": "team", "apiGroup": "rbac.authorization.k8s.io"}],
        namespace=None,
    )
    client.emulator.add_token("t-alice", "alice", ["team"])
    alice = client.as_token("t-alice")
    assert alice.get("/api/v1/namespaces").status_code == 200
    denied = alice.get("/api/v1/namespaces/default")
    assert denied.status_code == 403
    assert denied.json()["message"] == (
        'namespaces "default" is forbidden: User "alice" cannot get resource "namespaces" '
        'in API group "" at the cluster scope'
    )


def test_cluster_role_through_role_binding_is_namespaced(client: Client) -> None:
    role(
        client,
        "cm-all",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
        namespace=None,
    )
    bind(client, "cm-all", "ClusterRole", "cm-all", [{"kind": "User", "name": "bob"}])
    client.emulator.add_token("t-bob", "bob")
    bob = client.as_token("t-bob")
    assert bob.post(CM, configmap("b")).status_code == 201
    assert bob.get("/api/v1/configmaps").status_code == 403


def test_rbac_changes_take_effect_immediately(client: Client) -> None:
    role(client, "r", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
    bind(client, "r", "Role", "r", [{"kind": "User", "name": "carol"}])
    client.emulator.add_token("t-carol", "carol")
    carol = client.as_token("t-carol")
    assert carol.get(CM).status_code == 200
    client.delete(f"{RBAC}/namespaces/default/rolebindings/r")
    assert carol.get(CM).status_code == 403


def test_service_account_groups_and_watch_verb(client: Client) -> None:
    role(
        client,
        "watcher",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch"]}],
        namespace=None,
    )
    bind(
        client,
        "all-sas",
        "ClusterRole",
        "watcher",
        [{"kind": "Group", "name": "system:serviceaccounts:default"}],
    )
    token = client.emulator.service_account_token("default", "any")
    user = client.as_token(token)
    watched = user.get(CM + "?watch=true&timeoutSeconds=1")
    assert watched.status_code == 200
    listed = user.get(CM)
    assert listed.status_code == 403
    other = client.as_token(client.emulator.service_account_token("kube-system", "any"))
    assert other.get(CM + "?watch=true&timeoutSeconds=1").status_code == 403
    collection = user.delete(CM)
    assert collection.status_code == 403
    assert "cannot deletecollection resource" in collection.json()["message"]


def test_names_with_colons_round_trip_escaped(client: Client) -> None:
    role(
        client,
        "system:reader",
        [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        namespace=None,
    )
    response = client.get(f"{RBAC}/clusterroles/system%3Areader")
    assert response.status_code == 200
    assert response.json()["metadata"]["name"] == "system:reader"


def test_a_name_field_selector_lets_resource_names_grant_list_and_watch(client: Client) -> None:
    """As kube-apiserver's RequestInfo: list/watch limited by `metadata.name` carry that name."""
    client.post(CM, configmap("allowed"))
    rule = {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["allowed"],
        "verbs": ["list", "watch"],
    }
    role(client, "named-list", [rule])
    bind(client, "named-list", "Role", "named-list", [sa("lister")])
    user = client.as_token(client.emulator.service_account_token("default", "lister"))
    assert user.get(CM + "?fieldSelector=metadata.name%3Dallowed").status_code == 200
    assert user.get(CM + "?fieldSelector=metadata.name%3D%3Dallowed").status_code == 200
    assert user.get(CM + "?fieldSelector=metadata.name%3Dother").status_code == 403
    assert user.get(CM + "?fieldSelector=metadata.name%21%3Dother").status_code == 403
    assert user.get(CM).status_code == 403
    watch = CM + "?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dallowed"
    assert user.get(watch).status_code == 200
