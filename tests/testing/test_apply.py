"""Server-side apply: ownership, conflicts, force, shared fields, removal of dropped fields."""

from __future__ import annotations

from typing import Any

from .conftest import Client

CM = "/api/v1/namespaces/default/configmaps"
APPLY = "application/apply-patch+yaml"


def apply(
    client: Client, manager: str, data: dict[str, str], force: bool = False, name: str = "ssa"
) -> Any:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return client.patch(f"{CM}/{name}{query}", body, APPLY)


def owners(obj: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for entry in obj["metadata"]["managedFields"]:
        data = entry["fieldsV1"].get("f:data", {})
        out[entry["manager"]] = {k[2:] for k in data if k != "."}
    return out


def test_apply_creates_then_updates_with_apply_operation(client: Client) -> None:
    created = apply(client, "a", {"x": "1"})
    assert created.status_code == 201
    updated = apply(client, "a", {"x": "2", "y": "1"})
    assert updated.status_code == 200
    entry = updated.json()["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"]) == ("a", "Apply")
    assert owners(updated.json()) == {"a": {"x", "y"}}


def test_conflicts_name_every_manager_and_field(client: Client) -> None:
    apply(client, "a", {"x": "1", "y": "1"})
    response = apply(client, "b", {"x": "2", "y": "2"})
    assert response.status_code == 409
    body = response.json()
    assert body["message"] == (
        'Apply failed with 2 conflicts: conflicts with "a":\n- .data.x\n- .data.y'
    )
    assert [c["field"] for c in body["details"]["causes"]] == [".data.x", ".data.y"]


def test_same_value_is_shared_ownership_without_conflict(client: Client) -> None:
    apply(client, "a", {"x": "1"})
    shared = apply(client, "b", {"x": "1"})
    assert shared.status_code == 200
    assert owners(shared.json()) == {"a": {"x"}, "b": {"x"}}


def test_force_takes_ownership(client: Client) -> None:
    apply(client, "a", {"x": "1", "keep": "a"})
    forced = apply(client, "b", {"x": "2"}, force=True)
    assert forced.status_code == 200
    assert forced.json()["data"] == {"x": "2", "keep": "a"}
    assert owners(forced.json()) == {"a": {"keep"}, "b": {"x"}}


def test_fields_a_manager_stops_applying_are_removed_unless_shared(client: Client) -> None:
    apply(client, "a", {"x": "1", "y": "1", "z": "1"})
    apply(client, "b", {"z": "1"})
    result = apply(client, "a", {"x": "1"}).json()
    assert result["data"] == {"x": "1", "z": "1"}


def test_update_manager_conflict_mentions_api_version(client: Client) -> None:
    client.post(
        CM,
        {"metadata": {"name": "mixed"}, "data": {"x": "1"}},
        headers={"User-Agent": "editor/1.0"},
    )
    response = apply(client, "a", {"x": "2"}, name="mixed")
    assert response.status_code == 409
    assert response.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "editor" using v1: .data.x'
    )


def test_an_update_under_the_appliers_own_name_is_another_manager(client: Client) -> None:
    """kube-apiserver 1.32, observed: apply, `kubectl scale` (an Update of /scale as manager
    "kubectl"), apply again as "kubectl": a conflict naming the scale subresource."""
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }
    ua = {"User-Agent": "kubectl/v1.32.4 (linux/amd64) kubernetes/0000000"}
    applied = client.patch(f"{deployments}/web?fieldManager=kubectl", deployment, APPLY)
    assert applied.status_code == 201
    scaled = client.patch(f"{deployments}/web/scale", {"spec": {"replicas": 3}}, headers=ua)
    assert scaled.status_code == 200
    entries = client.get(f"{deployments}/web").json()["metadata"]["managedFields"]
    scale = next(e for e in entries if e.get("subresource") == "scale")
    assert (scale["manager"], scale["operation"]) == ("kubectl", "Update")
    assert scale["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    again = client.patch(f"{deployments}/web?fieldManager=kubectl", deployment, APPLY)
    assert again.status_code == 409
    assert again.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" '
        "using apps/v1: .spec.replicas"
    )


def test_update_takes_fields_from_appliers(client: Client) -> None:
    apply(client, "a", {"x": "1", "y": "1"})
    client.patch(CM + "/ssa", {"data": {"x": "edited"}}, headers={"User-Agent": "kubectl/1"})
    obj = client.get(CM + "/ssa").json()
    assert owners(obj) == {"a": {"y"}, "kubectl": {"x"}}


def test_keyed_lists_merge_by_key(client: Client) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments/app?fieldManager="
    base = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "main", "image": "img:1"}]},
            },
        },
    }
    assert client.patch(path + "a", base, APPLY).status_code == 201
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app"},
        "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "s:1"}]}}},
    }
    merged = client.patch(path + "b", sidecar, APPLY).json()
    names = [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]]
    assert names == ["main", "side"]


def test_an_apply_of_only_name_and_namespace_records_no_manager(client: Client) -> None:
    """kube-apiserver drops a manager whose field set is empty (structured-merge-diff's
    Updater: apiVersion, kind, name and namespace are stripped from every set): a
    ServiceAccount applied with nothing but its name has no managedFields at all."""
    sa = "/api/v1/namespaces/default/serviceaccounts/bare?fieldManager=installer"
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bare"}}
    named = {**body, "metadata": {"name": "bare", "namespace": "default"}}
    created = client.patch(sa, named, APPLY)
    assert created.status_code == 201
    assert "managedFields" not in created.json()["metadata"]
    # A field makes it an owner; applying the name alone again gives the field up: the
    # label goes (nobody else owns it) and so does the manager's entry.
    labelled = {**body, "metadata": {"name": "bare", "labels": {"a": "b"}}}
    entries = client.patch(sa, labelled, APPLY).json()["metadata"]["managedFields"]
    assert [(e["manager"], e["fieldsV1"]) for e in entries] == [
        ("installer", {"f:metadata": {"f:labels": {"f:a": {}}}})
    ]
    bare = client.patch(sa, body, APPLY).json()["metadata"]
    assert "labels" not in bare and "managedFields" not in bare
    with_data = apply(client, "installer", {"x": "1"})
    assert [e["manager"] for e in with_data.json()["metadata"]["managedFields"]] == ["installer"]
