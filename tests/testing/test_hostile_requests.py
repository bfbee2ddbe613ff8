"""Issue 37, finding 6: the emulator's `serve` under hostile or careless clients.

YAML bodies decoded to JSON types only, the state never lost to one bad object, a request
body limit checked before reading (after authentication, as kube-apiserver), anonymous access
as kube-apiserver 1.32's bootstrap RBAC, CRD deletion waiting for its custom resources'
finalizers, and `token` reading `$KUBECONFIG`.
"""

from __future__ import annotations

import datetime
import json
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.serve import cli, kubeconfig, write_kubeconfig

from .conftest import Client
from .test_gc import CRDS, WIDGETS, crd

CM = "/api/v1/namespaces/default/configmaps"
LIMIT = 3 * 1024 * 1024  # kube-apiserver's request body limit


def post_yaml(client: Client, text: str) -> requests.Response:
    return client.request(
        "POST", CM, data=text.encode(), headers={"Content-Type": "application/yaml"}
    )


def test_yaml_bodies_become_json_types(client: Client) -> None:
    created = post_yaml(client, "metadata: {name: dated}\ndata: {when: 2024-01-02, n: '1'}\n")
    assert created.status_code == 201, created.text
    assert created.json()["data"]["when"] == "2024-01-02"  # a string, as kube-apiserver keeps it
    labelled = post_yaml(client, "metadata: {name: keys, labels: {2: a, true: b}}\n")
    assert labelled.json()["metadata"]["labels"] == {"2": "a", "true": "b"}


@pytest.mark.parametrize(
    "value",
    [".nan", "!!binary aGVsbG8=", "!!timestamp 2024-01-02", "!!set {a, b}", "-.inf"],
)
def test_yaml_values_with_no_json_form_are_400_and_not_stored(client: Client, value: str) -> None:
    answer = post_yaml(client, f"metadata: {{name: bad}}\ndata: {{x: {value}}}\n")
    assert answer.status_code == 400
    status = answer.json()
    assert status["kind"] == "Status" and status["reason"] == "BadRequest"
    assert "has no JSON form" in status["message"]
    assert client.get(CM + "/bad").status_code == 404
    assert client.get(CM).status_code == 200


def test_yaml_aliases_cannot_expand_without_bound(client: Client) -> None:
    laughs = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for level in "bcdefgh":
        previous = chr(ord(level) - 1)
        laughs.append(f"{level}: &{level} [{', '.join([f'*{previous}'] * 10)}]")
    text = "metadata: {name: laughs}\ndata:\n" + "\n".join(f"  {line}" for line in laughs)
    answer = post_yaml(client, text + "\n")
    assert answer.status_code == 400
    assert "aliases are expanded" in answer.json()["message"]


def test_state_is_saved_without_an_object_that_has_no_json_form(
    kube_emulator: Emulator, tmp_path: Path
) -> None:
    kube_emulator.create_object(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "good"}}
    )
    bad = kube_emulator.create_object(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}}
    )
    bad["data"] = {"when": datetime.date(2024, 1, 2)}  # as a YAML body used to store it
    path = tmp_path / "state.json"
    path.write_text("previous")
    skipped = kube_emulator.save_state(str(path))
    assert len(skipped) == 1 and "configmaps default/bad" in skipped[0]
    saved = json.loads(path.read_text())
    names = {entry["object"]["metadata"]["name"] for entry in saved["objects"]}
    assert "good" in names and "bad" not in names
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left


def _raw(emulator: Emulator, request: bytes) -> bytes:
    """Send `request` (headers and as much body as given) over TLS; the first answer."""
    context = ssl.create_default_context(cadata=emulator.ca_pem.decode())
    raw = socket.create_connection(("127.0.0.1", emulator.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer or not _complete(answer):
            chunk = tls.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return len(body) >= int(value)
    return True


def _post_head(length: int, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {CM} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def test_a_body_over_the_limit_is_413_before_it_is_read(kube_emulator: Emulator) -> None:
    # 256 MiB declared, 1 KiB sent: the answer comes without waiting for the rest.
    answer = _raw(kube_emulator, _post_head(256 << 20, kube_emulator.admin_token) + b"{" * 1024)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ")
    status = json.loads(body)
    assert status["reason"] == "RequestEntityTooLarge" and status["code"] == 413
    assert status["message"] == f"Request entity too large: limit is {LIMIT}"


@pytest.mark.parametrize(("token", "status"), [("garbage", b"401"), (None, b"403")])
def test_an_unauthenticated_or_unauthorized_body_is_never_read(
    kube_emulator: Emulator, token: str | None, status: bytes
) -> None:
    answer = _raw(kube_emulator, _post_head(256 << 20, token) + b"{" * 1024)
    assert answer.startswith(b"HTTP/1.1 " + status + b" ")
    assert b"Connection: close" in answer  # the unread body is not taken for a request


def test_a_body_at_the_limit_is_taken(client: Client) -> None:
    body = {"metadata": {"name": "big"}, "data": {"x": ""}}
    body["data"]["x"] = "y" * (LIMIT - len(json.dumps(body)))
    answer = client.request("POST", CM, data=json.dumps(body).encode())
    assert answer.status_code == 201


@pytest.mark.parametrize("path", ["/version", "/healthz", "/livez", "/readyz"])
def test_anonymous_users_get_the_public_information_paths(client: Client, path: str) -> None:
    anonymous = requests.get(client.emulator.url + path, verify=str(client.ca_file), timeout=10)
    assert anonymous.status_code == 200


@pytest.mark.parametrize("path", ["/openapi/v3", "/api", "/apis", "/", "/openapi/v3/api/v1"])
def test_anonymous_users_are_forbidden_the_rest(client: Client, path: str) -> None:
    anonymous = requests.get(client.emulator.url + path, verify=str(client.ca_file), timeout=10)
    assert anonymous.status_code == 403
    status: dict[str, Any] = anonymous.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"'
    # An authenticated user (no RBAC grants) has discovery, as system:discovery grants.
    user = client.as_token(client.emulator.service_account_token("default", "nobody"))
    assert user.get(path).status_code == 200


def test_crd_deletion_waits_for_its_custom_resources_finalizers(client: Client) -> None:
    emulator = client.emulator
    assert client.post(CRDS, crd()).status_code == 201
    assert emulator.wait_for(lambda: client.get(WIDGETS).status_code == 200)
    held = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
    }
    assert client.post(WIDGETS, held).status_code == 201
    deleted = client.delete(CRDS + "/widgets.example.com").json()
    assert "customresourcecleanup.apiextensions.k8s.io" in deleted["metadata"]["finalizers"]

    def terminating() -> dict[str, Any]:
        found = client.get(CRDS + "/widgets.example.com").json()
        conditions = found.get("status", {}).get("conditions", [])
        return {c["type"]: c for c in conditions}.get("Terminating", {})

    assert emulator.wait_for(lambda: terminating().get("reason") == "InstanceDeletionCheck")
    assert terminating()["status"] == "True"
    widget = client.get(WIDGETS + "/held").json()
    assert widget["metadata"]["deletionTimestamp"]  # deleted, held by its finalizer
    refused = client.post(WIDGETS, {**held, "metadata": {"name": "new"}})
    assert refused.status_code == 405
    assert "terminating" in refused.json()["message"]
    assert emulator.settle() and client.get(CRDS + "/widgets.example.com").status_code == 200
    released = client.patch(WIDGETS + "/held", {"metadata": {"finalizers": None}})
    assert released.status_code == 200
    assert emulator.wait_for(lambda: client.get(CRDS + "/widgets.example.com").status_code == 404)
    assert emulator.wait_for(lambda: client.get(WIDGETS).status_code == 404)


def test_token_reads_kubeconfig_from_the_environment(
    kube_emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "elsewhere.kubeconfig"
    write_kubeconfig(str(path), kubeconfig(kube_emulator))
    kube_emulator.create_object(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}}
    )
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)  # no emulator.kubeconfig here
    result = runner.invoke(cli, ["token", "op"], env={"KUBECONFIG": f"{tmp_path / 'none'}:{path}"})
    assert result.exit_code == 0, result.output
    token = result.output.strip()
    with kube_emulator.config(token=token) as as_op:
        assert as_op.transport.request_json("GET", "/version")["major"]


def test_a_crd_deleted_before_it_is_established_gets_its_terminating_condition() -> None:
    # The emulator serves a CRD before its establishing controller writes conditions (null
    # until then): deleting it in that window must not fail with a 500.
    from cloudcoil_sync.testing._internal.deletion import set_condition

    crd_object: dict[str, Any] = {"status": {"conditions": None}}
    assert set_condition(crd_object, "Terminating", "True", "InstanceDeletionPending", "soon")
    assert [c["type"] for c in crd_object["status"]["conditions"]] == ["Terminating"]
