"""Metadata-only answers (PartialObjectMetadata, PartialObjectMetadataList) as recorded from
kube-apiserver 1.32 (kube_apiserver_partial/): each recorded request replayed against the
emulator holding the same objects gets the same status, kinds, list metadata keys and
object metadata keys (values such as uids and times are the emulator's own)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cloudcoil_sync.testing._internal.partial import wanted

from .conftest import Client, configmap

RECORDED = Path(__file__).parent / "kube_apiserver_partial"
FILES = sorted(p.name for p in RECORDED.glob("[0-9]*.json"))
NS = "meta-rec"
ITEM = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def _setup(client: Client) -> None:
    client.post("/api/v1/namespaces", {"metadata": {"name": NS}})
    cm = f"/api/v1/namespaces/{NS}/configmaps"
    labelled = configmap("a", k="v")
    labelled["metadata"]["labels"] = {"x": "y", "z": "y"}
    assert client.post(cm, labelled).status_code == 201
    assert client.post(cm, configmap("b", k="v")).status_code == 201
    # kube-apiserver's namespace also held its kube-root-ca.crt: a second page exists.
    assert client.post(cm, configmap("kube-root-ca.crt", k="v")).status_code == 201


def _shape(body: dict[str, Any]) -> dict[str, Any]:
    """What must match: kinds, list metadata keys, each item's name and metadata keys."""
    shape: dict[str, Any] = {k: body.get(k) for k in ("kind", "apiVersion", "code", "reason")}
    shape["message"] = body.get("message")
    if "items" in body:
        shape["list_meta"] = sorted(body["metadata"])
        shape["items"] = [
            (i["kind"], i["apiVersion"], sorted(i), sorted(i["metadata"])) for i in body["items"]
        ]
    elif body.get("kind") != "Status":
        shape["metadata"] = sorted(body["metadata"])
    return shape


def test_the_recordings_are_here() -> None:
    assert len(FILES) == 6, FILES  # a broken checkout fails, never skips


@pytest.mark.parametrize("name", FILES)
def test_recorded_partial_answer(client: Client, name: str) -> None:
    _setup(client)
    record = json.loads((RECORDED / name).read_text())
    request = record["request"]
    got = client.get(request["path"], headers={"Accept": request["headers"]["Accept"]})
    assert got.status_code == record["response"]["status"]
    assert _shape(got.json()) == _shape(record["response"]["body"])


def test_watch_events_carry_metadata_only(client: Client) -> None:
    _setup(client)
    recorded = [json.loads(line) for line in (RECORDED / "07-watch-metadata.jsonl").open()]
    cm = f"/api/v1/namespaces/{NS}/configmaps"
    version = client.get(cm).json()["metadata"]["resourceVersion"]
    query = f"?watch=1&resourceVersion={version}&timeoutSeconds=5&allowWatchBookmarks=true"
    with client.get(cm + query, headers={"Accept": ITEM + ",application/json"}, stream=True) as r:
        assert r.status_code == 200
        client.patch(f"{cm}/a", {"metadata": {"labels": {"w": "v"}}})
        lines = r.iter_lines()
        event = json.loads(next(lines))
    want = recorded[0]
    assert (event["type"], _shape(event["object"])) == (want["type"], _shape(want["object"]))
    assert "data" not in event["object"] and event["object"]["metadata"]["labels"]["w"] == "v"


def test_a_watch_asking_for_a_list_form_is_refused(client: Client) -> None:
    _setup(client)
    accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    got = client.get(f"/api/v1/namespaces/{NS}/configmaps?watch=1", headers={"Accept": accept})
    assert got.status_code == 406
    assert "is not a list (*core.ConfigMap)" in got.json()["message"]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json", None),
        (ITEM, ("PartialObjectMetadata", "meta.k8s.io/v1")),
        ("application/json," + ITEM, None),  # the first served clause decides
        (
            "application/vnd.kubernetes.protobuf," + ITEM,
            ("PartialObjectMetadata", "meta.k8s.io/v1"),
        ),
        (ITEM.replace("v=v1", "v=v1beta1"), ("PartialObjectMetadata", "meta.k8s.io/v1beta1")),
        (ITEM.replace("v=v1", "v=v2") + ",application/json", None),
        ("application/json;as=Table;g=meta.k8s.io;v=v1", None),
    ],
)
def test_the_first_served_accept_clause_decides(
    accept: str, expected: tuple[str, str] | None
) -> None:
    assert wanted(accept) == expected
