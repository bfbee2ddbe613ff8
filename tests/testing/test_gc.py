"""Garbage collection, finalizers and CRD lifecycle."""

from __future__ import annotations

from typing import Any

from cloudcoil_sync.testing import Emulator

from .conftest import Client, configmap

CM = "/api/v1/namespaces/default/configmaps"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def child_of(client: Client, name: str, parent: dict[str, Any], finalizer: str = "") -> None:
    body = configmap(name)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": parent["metadata"]["name"],
            "uid": parent["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    if finalizer:
        body["metadata"]["finalizers"] = [finalizer]
    assert client.post(CM, body).status_code == 201


def gone(emulator: Emulator, name: str) -> bool:
    return emulator.get_object("", "configmaps", "default", name) is None


def test_background_deletion_collects_children(client: Client) -> None:
    parent = client.post(CM, configmap("p")).json()
    child_of(client, "c1", parent)
    child_of(client, "c2", parent)
    assert (
        client.delete(CM + "/p", {"propagationPolicy": "Background"}).json()["status"] == "Success"
    )
    assert client.emulator.wait_for(
        lambda: gone(client.emulator, "c1") and gone(client.emulator, "c2")
    )


def test_foreground_deletion_waits_for_children(client: Client) -> None:
    emulator = client.emulator
    parent = client.post(CM, configmap("fg")).json()
    child_of(client, "held", parent, finalizer="example.com/hold")
    deleted = client.delete(CM + "/fg", {"propagationPolicy": "Foreground"}).json()
    assert deleted["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert emulator.wait_for(
        lambda: (
            (emulator.get_object("", "configmaps", "default", "held") or {})
            .get("metadata", {})
            .get("deletionTimestamp")
            is not None
        )
    )
    assert client.get(CM + "/fg").status_code == 200
    client.patch(CM + "/held", {"metadata": {"finalizers": None}})
    assert emulator.wait_for(lambda: gone(emulator, "fg"))


def test_orphan_deletion_keeps_children_without_owner(client: Client) -> None:
    parent = client.post(CM, configmap("op")).json()
    child_of(client, "kept", parent)
    client.delete(CM + "/op?propagationPolicy=Orphan")
    emulator = client.emulator
    assert emulator.wait_for(lambda: gone(emulator, "op"))
    kept = client.get(CM + "/kept").json()
    assert "ownerReferences" not in kept["metadata"]


def test_child_of_missing_owner_is_collected(client: Client) -> None:
    fake = {"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}}
    child_of(client, "orphaned", fake)
    assert client.emulator.wait_for(lambda: gone(client.emulator, "orphaned"))


def test_finalizers_hold_deletion_until_removed(client: Client) -> None:
    body = configmap("fin")
    body["metadata"]["finalizers"] = ["a/b", "c/d"]
    client.post(CM, body)
    marked = client.delete(CM + "/fin").json()
    assert marked["metadata"]["deletionTimestamp"]
    client.patch(CM + "/fin", {"metadata": {"finalizers": ["c/d"]}})
    assert client.get(CM + "/fin").status_code == 200
    final = client.patch(CM + "/fin", {"metadata": {"finalizers": []}})
    assert final.status_code == 200
    assert client.get(CM + "/fin").status_code == 404


def crd(scope: str = "Namespaced") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": scope,
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }


def test_crd_lifecycle_serves_kind_then_deletes_objects(client: Client) -> None:
    emulator = client.emulator
    assert client.get(WIDGETS).status_code == 404
    assert client.post(CRDS, crd()).status_code == 201
    assert emulator.wait_for(lambda: client.get(WIDGETS).status_code == 200)
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
    }
    created = client.post(WIDGETS, widget).json()
    assert created["metadata"]["generation"] == 1
    resources = client.get("/apis/example.com/v1").json()["resources"]
    assert {r["name"] for r in resources} == {"widgets", "widgets/status"}
    groups = [g["name"] for g in client.get("/apis").json()["groups"]]
    assert "example.com" in groups
    client.delete(CRDS + "/widgets.example.com")
    assert emulator.wait_for(lambda: client.get(WIDGETS).status_code == 404)
    assert emulator.list_objects("example.com", "widgets") == []


def test_crd_versions_added_later_are_served(client: Client) -> None:
    emulator = client.emulator
    client.post(CRDS, crd(scope="Cluster"))
    cluster_widgets = "/apis/example.com/v1/widgets"
    assert emulator.wait_for(lambda: client.get(cluster_widgets).status_code == 200)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "cw"}}
    assert client.post(cluster_widgets, widget).json()["metadata"].get("namespace") is None
    current = client.get(CRDS + "/widgets.example.com").json()
    v2 = {**current["spec"]["versions"][0], "name": "v2", "storage": False}
    current["spec"]["versions"].append(v2)
    assert client.put(CRDS + "/widgets.example.com", current).status_code == 200
    assert emulator.wait_for(lambda: client.get("/apis/example.com/v2/widgets").status_code == 200)
    assert [
        i["metadata"]["name"] for i in client.get("/apis/example.com/v2/widgets").json()["items"]
    ] == ["cw"]


def test_namespaced_kind_needs_a_namespace_to_write(client: Client) -> None:
    assert client.post("/api/v1/configmaps", configmap("nowhere")).status_code == 404
    assert client.get("/api/v1/configmaps").status_code == 200


def test_no_finalizer_can_be_added_during_deletion(client: Client) -> None:
    body = configmap("closing")
    body["metadata"]["finalizers"] = ["a/b"]
    client.post(CM, body)
    client.delete(CM + "/closing")
    refused = client.patch(CM + "/closing", {"metadata": {"finalizers": ["a/b", "c/d"]}})
    assert refused.status_code == 422
    assert refused.json()["message"] == (
        'ConfigMap "closing" is invalid: metadata.finalizers: Forbidden: no new finalizers can '
        'be added if the object is being deleted, found new finalizers []string{"c/d"}'
    )


def test_settle_waits_for_garbage_collection(client: Client) -> None:
    parent = client.post(CM, configmap("sp")).json()
    for i in range(5):
        child_of(client, f"sc{i}", parent)
    client.delete(CM + "/sp")
    assert client.emulator.settle(5)
    assert [
        o["metadata"]["name"] for o in client.emulator.list_objects("", "configmaps", "default")
    ] == []
