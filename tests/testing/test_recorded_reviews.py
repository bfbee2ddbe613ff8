"""TokenRequest, TokenReview and access reviews recorded from kube-apiserver 1.32, replayed.

The files in kube_apiserver_reviews/ were recorded in namespace ``wt19b-rec`` holding a
ServiceAccount ``x`` bound to a Role that may get and list ConfigMaps; the replay builds the
same in the emulator. ``<token>`` stands for a ServiceAccount token of ``x`` (TokenRequest with
an empty spec). Volatile values (timestamps, tokens, uids, the token's id) are not compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudcoil_sync.testing import Emulator

from .conftest import Client

RECORDED = Path(__file__).parent / "kube_apiserver_reviews"
FILES = sorted(p.name for p in RECORDED.glob("[0-9]*.json"))
NS = "wt19b-rec"
RBAC = "rbac.authorization.k8s.io/v1"
VOLATILE = {"creationTimestamp", "time", "token", "expirationTimestamp", "uid"}
TOKEN = "<token>"


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, str]]:
    ca = tmp_path_factory.mktemp("reviews") / "ca.crt"
    with Emulator() as emulator:
        ca.write_bytes(emulator.ca_pem)
        client = Client(emulator, ca)
        for path, body in [
            ("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": NS}}),
            (f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": "x"}}),
            (
                f"/apis/{RBAC}/namespaces/{NS}/roles",
                {
                    "metadata": {"name": "cm-reader"},
                    "rules": [
                        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
                    ],
                },
            ),
            (
                f"/apis/{RBAC}/namespaces/{NS}/rolebindings",
                {
                    "metadata": {"name": "cm-reader"},
                    "roleRef": {"apiGroup": RBAC[:-3], "kind": "Role", "name": "cm-reader"},
                    "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": NS}],
                },
            ),
        ]:
            response = client.post(path, body)
            assert response.status_code == 201, response.text
        answer = client.post(
            f"/api/v1/namespaces/{NS}/serviceaccounts/x/token", {"kind": "TokenRequest"}
        )
        assert answer.status_code == 201, answer.text
        yield client, answer.json()["status"]["token"]
        client.close()


def _substitute(value: Any, token: str) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, token) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, token) for v in value]
    return token if value == TOKEN else value


def compare(expected: Any, actual: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        assert set(expected) == set(actual), (
            f"{where}: missing {set(expected) - set(actual)}, extra {set(actual) - set(expected)}"
        )
        for key in sorted(expected):
            if key in VOLATILE and expected[key] is not None:
                assert actual[key], f"{where}.{key} is empty"
            elif key == "authentication.kubernetes.io/credential-id":
                assert [v.split("=")[0] for v in actual[key]] == ["JTI"], f"{where}.{key}"
            else:
                compare(expected[key], actual[key], f"{where}.{key}")
        return
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(expected) == len(actual), f"{where}: {expected!r} != {actual!r}"
        for i, (exp, act) in enumerate(zip(expected, actual, strict=True)):
            compare(exp, act, f"{where}[{i}]")
        return
    assert expected == actual, f"{where}: expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize("name", FILES)
def test_recorded_review(replay: tuple[Client, str], name: str) -> None:
    client, token = replay
    record = json.loads((RECORDED / name).read_text())
    request = record["request"]
    if "Bearer" in record.get("notes", ""):
        client = client.as_token(token)
    response = client.request(
        request["method"],
        request["path"],
        data=json.dumps(_substitute(request["body"], token)),
        headers={**request["headers"], "User-Agent": "python-httpx/0.28.1"},
    )
    expected = record["response"]
    assert response.status_code == expected["status"], response.text
    assert response.headers["Content-Type"] == expected["headers"]["Content-Type"]
    compare(expected["body"], response.json())


def test_every_review_kind_is_recorded() -> None:
    kinds = {json.loads((RECORDED / n).read_text())["request"]["body"]["kind"] for n in FILES}
    assert kinds == {
        "TokenRequest",
        "TokenReview",
        "SelfSubjectAccessReview",
        "SubjectAccessReview",
    }
