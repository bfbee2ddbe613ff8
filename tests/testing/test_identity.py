"""Impersonation headers and SelfSubjectAccessReview, decided by the emulator's RBAC."""

from __future__ import annotations

from typing import Any

from cloudcoil_sync.testing import Emulator

from .conftest import Client

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _review(client: Client, spec: dict[str, Any], **headers: str) -> dict[str, Any]:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"}
    answer = client.post(SSAR, {**body, "spec": spec}, headers=headers)
    assert answer.status_code == 201, answer.text
    result: dict[str, Any] = answer.json()
    assert result["spec"] == spec
    return result


def _can(client: Client, verb: str, resource: str, namespace: str = "default", **h: str) -> bool:
    spec = {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}}
    return bool(_review(client, spec, **h)["status"]["allowed"])


def _grant(client: Client, name: str, rules: list[dict[str, Any]], subject: dict[str, Any]) -> None:
    client.post(f"{RBAC}/clusterroles", {"metadata": {"name": name}, "rules": rules})
    client.post(
        f"{RBAC}/clusterrolebindings",
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [subject],
        },
    )  # fmt: skip


def test_self_reviews_answer_for_the_caller(client: Client, kube_emulator: Emulator) -> None:
    assert _can(client, "delete", "secrets")  # the admin
    token = kube_emulator.service_account_token("default", "op")
    account = client.as_token(token)
    assert not _can(account, "list", "configmaps")  # any user may ask, and is told no
    _grant(
        client,
        "cm-reader",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        {"kind": "ServiceAccount", "name": "op", "namespace": "default"},
    )
    assert _can(account, "list", "configmaps")
    assert not _can(account, "delete", "configmaps")
    health = {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}
    metrics = {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    assert _review(account, health)["status"]["allowed"]
    assert not _review(account, metrics)["status"]["allowed"]
    _grant(
        client,
        "scrape",
        [{"nonResourceURLs": ["/metr*"], "verbs": ["get"]}],
        {"kind": "ServiceAccount", "name": "op", "namespace": "default"},
    )
    assert _review(account, metrics)["status"]["allowed"]
    both = client.post(SSAR, {"spec": {**health, **metrics, "resourceAttributes": {}}})
    assert both.status_code == 422 and "exactly one of" in both.json()["message"]


def test_impersonation_acts_as_the_named_user(client: Client, kube_emulator: Emulator) -> None:
    as_someone = {"Impersonate-User": "someone"}
    assert not _can(client, "list", "configmaps", **as_someone)
    denied = client.get("/api/v1/namespaces/default/configmaps", headers=as_someone)
    assert denied.status_code == 403 and 'User "someone" cannot list' in denied.json()["message"]
    as_admins = {"Impersonate-User": "someone", "Impersonate-Group": "system:masters"}
    assert client.get("/api/v1/namespaces/default/configmaps", headers=as_admins).ok
    sa = {"Impersonate-User": "system:serviceaccount:default:op"}
    _grant(
        client,
        "sa-reader",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        {"kind": "ServiceAccount", "name": "op", "namespace": "default"},
    )
    assert _can(client, "list", "configmaps", **sa)

    plain = client.as_token(kube_emulator.service_account_token("default", "plain"))
    refused = plain.get("/api/v1/namespaces/default/configmaps", headers=as_someone)
    assert refused.status_code == 403
    assert 'cannot impersonate resource "users"' in refused.json()["message"]
    groups_only = client.get("/api/v1/namespaces", headers={"Impersonate-Group": "g"})
    assert groups_only.status_code == 400
    extra = client.get("/api/v1/namespaces", headers={**as_someone, "Impersonate-Extra-x": "y"})
    assert extra.status_code == 400 and "impersonate-extra-x" in extra.json()["message"]
