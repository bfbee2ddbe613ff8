"""TokenRequest (``serviceaccounts/<name>/token``) and saving/loading an emulator's state."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import requests

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.state import StateError

from .conftest import Client

SA_PATH = "/api/v1/namespaces/default/serviceaccounts"


def _token(client: Client, name: str, **spec: object) -> requests.Response:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    return client.post(f"{SA_PATH}/{name}/token", body)


def test_token_request_mints_a_token_authorized_as_the_service_account(
    kube_emulator: Emulator, client: Client
) -> None:
    assert client.post(SA_PATH, {"metadata": {"name": "op"}}).status_code == 201
    answer = _token(client, "op", expirationSeconds=7200)
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["kind"] == "TokenRequest" and body["spec"]["expirationSeconds"] == 7200
    assert body["spec"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    token = body["status"]["token"]
    _header, claims, _ = token.split(".")  # shaped like kube's JWTs, for tools that read them
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert decoded["sub"] == "system:serviceaccount:default:op"
    assert decoded["exp"] - decoded["iat"] == 7200
    as_sa = client.as_token(token)
    denied = as_sa.get("/api/v1/namespaces/default/secrets")
    assert denied.status_code == 403
    assert "system:serviceaccount:default:op" in denied.json()["message"]
    client.post(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        {
            "metadata": {"name": "read"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
        },
    )
    client.post(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        {
            "metadata": {"name": "read"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "default"}],
        },
    )
    assert as_sa.get("/api/v1/namespaces/default/secrets").status_code == 200


def test_token_request_errors(kube_emulator: Emulator, client: Client) -> None:
    missing = _token(client, "nobody")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'serviceaccounts "nobody" not found'
    client.post(SA_PATH, {"metadata": {"name": "op"}})
    short = _token(client, "op", expirationSeconds=60)
    assert short.status_code == 422
    assert "spec.expirationSeconds" in short.json()["message"]
    assert client.get(f"{SA_PATH}/op/token").status_code == 405
    nobody = client.as_token(kube_emulator.service_account_token("default", "other"))
    assert _token(nobody, "op").status_code == 403


def test_discovery_lists_the_token_subresource(client: Client) -> None:
    resources = {r["name"]: r for r in client.get("/api/v1").json()["resources"]}
    token = resources["serviceaccounts/token"]
    assert token["kind"] == "TokenRequest" and token["group"] == "authentication.k8s.io"
    assert token["verbs"] == ["create"]


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}},
            }
        ],
    },
}


def test_state_round_trip_keeps_objects_versions_and_tokens(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    with Emulator() as first:
        first.create_object(CRD)
        assert first.settle()
        config = first.config()
        gadget = config.client(("example.com", "v1", "gadgets")).raw.create(
            {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
        )
        token = first.service_account_token("default", "op")
        config.close()
        rv = first.store.resource_version
        first.save_state(str(path))
    assert path.stat().st_mode & 0o077 == 0  # it holds tokens
    with Emulator.from_state(str(path)) as second:
        config = second.config()
        again = config.client(("example.com", "v1", "gadgets")).raw.get("g")
        assert again["metadata"]["uid"] == gadget["metadata"]["uid"]
        assert again["metadata"]["resourceVersion"] == gadget["metadata"]["resourceVersion"]
        assert second.store.resource_version == rv
        assert second.authorizer.authenticate(f"Bearer {token}") is not None
        # The history is not saved: a watch from before the restore is too old.
        ca = tmp_path / "ca.crt"
        ca.write_bytes(second.ca_pem)
        raw = Client(second, ca)
        old = raw.get(
            "/apis/example.com/v1/namespaces/default/gadgets",
            params={"watch": "1", "resourceVersion": str(rv - 1)},
        )
        raw.close()
        assert json.loads(old.text.splitlines()[0])["object"]["code"] == 410
        created = config.client(("example.com", "v1", "gadgets")).raw.create(
            {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "h"}}
        )
        assert int(created["metadata"]["resourceVersion"]) > rv
        config.close()


def test_state_file_errors_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(StateError, match="is not JSON"):
        Emulator.from_state(str(bad))
    bad.write_text(json.dumps({"format": "other"}))
    with pytest.raises(StateError, match="not an emulator state file"):
        Emulator.from_state(str(bad))
    with pytest.raises(StateError, match="cannot read state file"):
        Emulator.from_state(str(tmp_path / "missing.json"))
