"""Server-side Tables of built-in kinds, as recorded from kube-apiserver 1.32 (no kubelet).

Each file in kube_apiserver_tables/ holds a Table answer and ``objects``: the same GET as JSON.
The replay creates those objects in an emulator whose Deployments never become available (as
on a control plane without nodes), asks for the Table and compares column definitions exactly
and cells except the volatile ones (ages, allocated cluster IPs and node ports, which the
emulator does not allocate).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudcoil_sync.testing import Emulator

from .conftest import Client

RECORDED = Path(__file__).parent / "kube_apiserver_tables"
FILES = sorted(p.name for p in RECORDED.glob("[0-9]*.json"))
NS = "wt19b-tables"
KEEP_META = ("name", "namespace", "labels", "annotations")


def _collection(path: str) -> str:
    return path if path.endswith("s") else path.rsplit("/", 1)[0]


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k in KEEP_META}
    body = {**obj, "metadata": meta}
    if body.get("kind") == "Service":  # let the emulator allocate
        spec = dict(body["spec"])
        if spec.get("clusterIP") != "None":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        spec["ports"] = [
            {k: v for k, v in p.items() if k != "nodePort"} for p in spec.get("ports") or []
        ]
        body["spec"] = spec
    return body


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    ca = tmp_path_factory.mktemp("tables") / "ca.crt"
    with Emulator(deployments="never") as emulator:
        ca.write_bytes(emulator.ca_pem)
        c = Client(emulator, ca)
        assert c.post("/api/v1/namespaces", {"metadata": {"name": NS}}).status_code == 201
        yield c
        c.close()


def _volatile(column: str, value: Any) -> Any:
    if column == "Age":
        return "<age>"
    if column == "Cluster-IP" and value != "None":
        return "<ip>"  # the emulator allocates no cluster IPs ("<none>")
    if column == "Port(s)":
        return re.sub(r":\d+/", "/", str(value))  # nor node ports
    return value


def _observed(client: Client, name: str) -> bool:
    deployment = client.emulator.get_object("apps", "deployments", NS, name) or {}
    return "updatedReplicas" in (deployment.get("status") or {})


@pytest.mark.parametrize("name", FILES)
def test_recorded_table(client: Client, name: str) -> None:
    record = json.loads((RECORDED / name).read_text())
    path = record["request"]["path"]
    objects = record["objects"]
    kind = objects["kind"].removesuffix("List")
    for listed in objects.get("items", []):
        item = {"kind": kind, "apiVersion": objects["apiVersion"], **listed}
        created = client.post(_collection(path), _clean(item))
        assert created.status_code in (201, 409), created.text
        status = item.get("status")
        if item["kind"] == "Pod" and status:  # a Pod's status is written by the scheduler
            target = f"{_collection(path)}/{item['metadata']['name']}/status"
            assert client.patch(target, {"status": status}).status_code == 200
        if kind == "Deployment":  # the rollout simulator reports it progressing, in its thread
            made = item["metadata"]["name"]
            assert client.emulator.wait_for(lambda m=made: _observed(client, m)), made
    answer = client.get(path, headers=record["request"]["headers"])
    assert answer.status_code == 200, answer.text
    expected, actual = record["response"]["body"], answer.json()
    assert actual["columnDefinitions"] == expected["columnDefinitions"]
    names = [c["name"] for c in expected["columnDefinitions"]]

    def cells(table: dict[str, Any]) -> list[list[Any]]:
        return [
            [_volatile(n, v) for n, v in zip(names, r["cells"], strict=True)] for r in table["rows"]
        ]

    assert cells(actual) == cells(expected)
