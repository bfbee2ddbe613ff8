"""Protobuf bodies as kubectl sends them (recorded in kubectl_protobuf/), decoded to JSON."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import requests

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.protobuf import decode
from cloudcoil_sync.testing._internal.status import ApiError

from .conftest import Client

RECORDED = Path(__file__).parent / "kubectl_protobuf"
RBAC = "rbac.authorization.k8s.io"
EXPECTED: dict[str, dict[str, Any]] = {
    "namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns-one"}},
    "configmap": {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm-one"},
        "data": {"ka": "va", "kb": "vb"},
    },
    "serviceaccount": {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "sa-one"},
    },
    "role": {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {"name": "role-one"},
        "rules": [
            {
                "verbs": ["get", "list"],
                "apiGroups": [""],
                "resources": ["pods", "configmaps"],
                "resourceNames": ["rn1"],
            }
        ],
    },
    "rolebinding": {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "rb-one"},
        "subjects": [
            {"kind": "User", "apiGroup": RBAC, "name": "u1"},
            {"kind": "Group", "apiGroup": RBAC, "name": "g1"},
            {"kind": "ServiceAccount", "name": "sa-one", "namespace": "default"},
        ],
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "role-one"},
    },
    "tokenrequest": {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": ["aud1"], "expirationSeconds": 7200},
    },
    "selfsubjectaccessreview-resource": {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "nsx", "verb": "list", "resource": "pods"}},
    },
    "secret": {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "sec-one"},
        "data": {"sk": base64.b64encode(b"sv").decode()},
        "type": "Opaque",
    },
    "clusterrole-nonresource": {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "cr-one"},
        "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
    },
    "clusterrolebinding": {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "crb-one"},
        "subjects": [{"kind": "User", "apiGroup": RBAC, "name": "u2"}],
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cr-one"},
    },
    "selfsubjectaccessreview-nonresource": {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}},
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_kubectl_bodies_decode(name: str) -> None:
    assert decode((RECORDED / f"{name}.bin").read_bytes()) == EXPECTED[name]


PRINTED = sorted(path.stem for path in RECORDED.glob("*.json"))


@pytest.mark.parametrize("name", PRINTED)
def test_recorded_bodies_decode_to_what_kubectl_prints(name: str) -> None:
    """``<name>.json`` is kubectl's own ``--dry-run=client -o json`` of the same command, its
    empty values and status dropped (as the decoder drops unset fields)."""
    expected = json.loads((RECORDED / f"{name}.json").read_text())
    assert decode((RECORDED / f"{name}.bin").read_bytes()) == expected


def test_every_recorded_kind_is_checked() -> None:
    assert len(PRINTED) >= 15
    assert {json.loads((RECORDED / f"{n}.json").read_text())["kind"] for n in PRINTED} >= {
        "Deployment",
        "Service",
        "Job",
        "CronJob",
        "PriorityClass",
        "ResourceQuota",
        "PodDisruptionBudget",
        "Ingress",
        "Secret",
    }


def _envelope(api_version: bytes, kind: bytes, raw: bytes) -> bytes:
    type_meta = b"\x0a" + bytes([len(api_version)]) + api_version
    type_meta += b"\x12" + bytes([len(kind)]) + kind
    return b"k8s\x00\x0a" + bytes([len(type_meta)]) + type_meta + b"\x12" + bytes([len(raw)]) + raw


def test_unknown_kinds_and_broken_bodies_are_named() -> None:
    with pytest.raises(ApiError) as unknown:
        decode(_envelope(b"apps/v1", b"StatefulSet", b""))
    assert unknown.value.code == 415
    assert "not apps/v1 StatefulSet: send application/json" in unknown.value.message
    assert "ConfigMap" in unknown.value.message
    with pytest.raises(ApiError) as truncated:
        decode(_envelope(b"v1", b"ConfigMap", b"\x0a\x05ab"))
    assert truncated.value.code == 400 and "truncated" in truncated.value.message
    with pytest.raises(ApiError) as plain:
        decode(b'{"kind": "ConfigMap"}')
    assert plain.value.code == 400 and "no protobuf prefix" in plain.value.message


def _post_protobuf(client: Client, path: str, body: Path) -> requests.Response:
    """POST a recorded body as its client sent it."""
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    return client.request("POST", path, data=body.read_bytes(), headers=headers)


def test_a_protobuf_create_is_stored_like_json(client: Client, kube_emulator: Emulator) -> None:
    answer = _post_protobuf(
        client, "/api/v1/namespaces/default/configmaps", RECORDED / "configmap.bin"
    )
    assert answer.status_code == 201, answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    stored = kube_emulator.get_object("", "configmaps", "default", "cm-one")
    assert stored is not None and stored["data"] == {"ka": "va", "kb": "vb"}


CLIENT_GO = Path(__file__).parent / "client_go_protobuf"
LEASE_BODIES = ["lease-create", "lease-renew", "lease-release"]


@pytest.mark.parametrize("name", LEASE_BODIES)
def test_client_go_lease_bodies_decode_as_kube_apiserver_reads_them(name: str) -> None:
    """The spec kube-apiserver 1.32 made of each body (recorded) is the decoder's, to the
    microsecond and with the empty pointers a release sends ("" holder, 0 transitions)."""
    server = json.loads((CLIENT_GO / f"{name}.server.json").read_text())
    decoded = decode((CLIENT_GO / f"{name}.bin").read_bytes())
    assert decoded["spec"] == server["spec"]
    assert (decoded["apiVersion"], decoded["kind"]) == (server["apiVersion"], server["kind"])
    for field in ("name", "namespace"):
        assert decoded["metadata"][field] == server["metadata"][field]
    assert "managedFields" not in decoded["metadata"]  # field 17, not decoded


def test_a_released_lease_keeps_its_empty_pointers() -> None:
    spec = decode((CLIENT_GO / "lease-release.bin").read_bytes())["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseTransitions"] == 0
    assert spec["leaseDurationSeconds"] == 1


def test_a_client_go_lease_create_is_stored(client: Client, kube_emulator: Emulator) -> None:
    kube_emulator.create_object(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rec"}}
    )  # where go-anchor ran when recorded
    answer = _post_protobuf(
        client, "/apis/coordination.k8s.io/v1/namespaces/rec/leases", CLIENT_GO / "lease-create.bin"
    )
    assert answer.status_code == 201, answer.text
    stored = kube_emulator.get_object("coordination.k8s.io", "leases", "rec", "go-anchor")
    server = json.loads((CLIENT_GO / "lease-create.server.json").read_text())
    assert stored is not None and stored["spec"] == server["spec"]
