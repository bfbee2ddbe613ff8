"""The emulator answers TokenReview and SubjectAccessReview as kube-apiserver does."""

from __future__ import annotations

from typing import Any

import pytest

from cloudcoil_sync.client import BadRequest, Forbidden, Invalid
from cloudcoil_sync.testing import Emulator

TOKENS = ("authentication.k8s.io", "v1", "tokenreviews")
ACCESS = ("authorization.k8s.io", "v1", "subjectaccessreviews")
RBAC = ("rbac.authorization.k8s.io", "v1", "clusterroles")
BINDINGS = ("rbac.authorization.k8s.io", "v1", "clusterrolebindings")


def token_review(emulator: Emulator, token: str) -> dict[str, Any]:
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    return emulator.config().client(TOKENS).create(body)


def access_review(emulator: Emulator, **spec: Any) -> dict[str, Any]:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    return emulator.config().client(ACCESS).create(body)


def bind(emulator: Emulator, role: str, rules: list[dict[str, Any]], account: str) -> None:
    admin = emulator.config()
    admin.client(RBAC).create({"metadata": {"name": role}, "rules": rules})
    admin.client(BINDINGS).create(
        {
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}],
        }
    )


def test_token_review_names_the_user_or_fails(kube_emulator: Emulator) -> None:
    token = kube_emulator.service_account_token("default", "scraper")
    review = token_review(kube_emulator, token)
    assert review["kind"] == "TokenReview" and review["spec"] == {"token": token}
    assert review["status"] == {
        "authenticated": True,
        "user": {
            "username": "system:serviceaccount:default:scraper",
            "groups": [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated",
            ],
        },
        "audiences": ["https://kubernetes.default.svc.cluster.local"],  # the server's, as asked
    }
    assert token_review(kube_emulator, "not-a-token")["status"] == {
        "user": {},
        "error": "invalid bearer token",
    }


def test_non_resource_access_follows_cluster_role_bindings(kube_emulator: Emulator) -> None:
    user = {"user": "system:serviceaccount:default:scraper", "groups": ["system:authenticated"]}
    metrics = {"path": "/metrics", "verb": "get"}
    assert access_review(kube_emulator, nonResourceAttributes=metrics, **user)["status"] == {
        "allowed": False
    }
    bind(kube_emulator, "reader", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], "scraper")
    status = access_review(kube_emulator, nonResourceAttributes=metrics, **user)["status"]
    assert status["allowed"] is True
    other = {"path": "/debug/pprof", "verb": "get"}
    assert access_review(kube_emulator, nonResourceAttributes=other, **user)["status"] == {
        "allowed": False
    }
    assert access_review(
        kube_emulator, nonResourceAttributes={"path": "/metrics", "verb": "post"}, **user
    )["status"] == {"allowed": False}


def test_resource_access_follows_rbac(kube_emulator: Emulator) -> None:
    user = {"user": "system:serviceaccount:default:lister", "groups": []}
    pods = {"verb": "list", "resource": "pods", "namespace": "default"}
    assert not access_review(kube_emulator, resourceAttributes=pods, **user)["status"]["allowed"]
    bind(
        kube_emulator,
        "pods",
        [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        "lister",
    )
    assert access_review(kube_emulator, resourceAttributes=pods, **user)["status"]["allowed"]
    masters = {"user": "root", "groups": ["system:masters"]}
    metrics = {"path": "/anything", "verb": "get"}
    assert access_review(kube_emulator, nonResourceAttributes=metrics, **masters)["status"][
        "allowed"
    ]


def test_malformed_reviews_are_rejected(kube_emulator: Emulator) -> None:
    with pytest.raises(Invalid, match=r'spec\.resourceAttributes: Invalid value: "null"'):
        access_review(kube_emulator, user="x")  # neither attribute kind
    with pytest.raises(BadRequest):
        token_review(kube_emulator, "")


def test_creating_reviews_needs_rbac(kube_emulator: Emulator) -> None:
    token = kube_emulator.service_account_token("default", "nobody")
    config = kube_emulator.config(token=token)
    with pytest.raises(Forbidden):
        config.client(TOKENS).create({"spec": {"token": token}})
    config.close()
