"""Server-side tables and OpenAPI v3 documents (what kubectl get/apply/explain ask for)."""

from __future__ import annotations

import pytest

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.tables import human_duration, wants_table

from .conftest import Client, configmap

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
CM = "/api/v1/namespaces/default/configmaps"
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
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "Wanted.",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                },
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {
                        "name": "Ready",
                        "type": "string",
                        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                    },
                    {"name": "First", "type": "string", "jsonPath": ".spec.items[0]"},
                ],
            }
        ],
    },
}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "<invalid>"), (-1, "0s"), (59, "59s"), (119, "119s"), (150, "2m30s"), (600, "10m"),
     (3 * 3600, "3h"), (5 * 3600 + 60, "5h1m"), (30 * 3600, "30h"), (3 * 86400, "3d"),
     (3 * 86400 + 7200, "3d2h"), (40 * 86400, "40d"), (3 * 365 * 86400, "3y")],
)  # fmt: skip
def test_ages_print_as_kubernetes_prints_them(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_table_is_chosen_only_when_asked() -> None:
    assert wants_table(TABLE) == "meta.k8s.io/v1"
    assert wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io") == (
        "meta.k8s.io/v1beta1"
    )
    assert wants_table("application/json") is None


def test_lists_and_gets_as_tables(client: Client) -> None:
    client.post(CM, configmap("a"))
    listed = client.get(CM, headers={"Accept": TABLE}).json()
    assert listed["kind"] == "Table" and listed["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in listed["columnDefinitions"]] == ["Name", "Data", "Age"]
    (row,) = listed["rows"]
    assert row["cells"][0] == "a" and row["cells"][1] == 0 and row["cells"][2].endswith("s")
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "a"
    whole = client.get(f"{CM}/a?includeObject=Object", headers={"Accept": TABLE}).json()
    assert whole["rows"][0]["object"]["kind"] == "ConfigMap"
    bare = client.get(f"{CM}?includeObject=None", headers={"Accept": TABLE}).json()
    assert "object" not in bare["rows"][0]
    assert client.get(CM).json()["kind"] == "ConfigMapList"  # plain JSON otherwise


def test_custom_resources_use_their_printer_columns(
    client: Client, kube_emulator: Emulator
) -> None:
    kube_emulator.create_object(CRD)
    assert kube_emulator.settle()
    path = "/apis/example.com/v1/namespaces/default/gadgets"
    gadget = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {"size": 3, "items": ["x", "y"]},
        "status": {"conditions": [{"type": "Other", "status": "False"},
                                  {"type": "Ready", "status": "True"}]},
    }  # fmt: skip
    assert client.post(path, gadget).status_code == 201
    table = client.get(path, headers={"Accept": TABLE}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Ready", "First"]
    assert table["rows"][0]["cells"] == ["g", 3, "True", "x"]


def test_openapi_v3_documents_for_served_kinds(client: Client, kube_emulator: Emulator) -> None:
    index = client.get("/openapi/v3").json()["paths"]
    assert "api/v1" in index and "apis/apps/v1" in index
    assert "apis/example.com/v1" not in index
    core = client.get(index["api/v1"]["serverRelativeURL"]).json()
    item = core["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
    }
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    schema = core["components"]["schemas"]["core.v1.ConfigMap"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "", "version": "v1", "kind": "ConfigMap"}
    ]
    kube_emulator.create_object(CRD)
    assert kube_emulator.settle()
    url = client.get("/openapi/v3").json()["paths"]["apis/example.com/v1"]["serverRelativeURL"]
    custom = client.get(url).json()["components"]["schemas"]["com.example.v1.Gadget"]
    assert custom["properties"]["spec"]["description"] == "Wanted."
    assert client.get("/openapi/v3/apis/nothing.example.com/v1").status_code == 404
