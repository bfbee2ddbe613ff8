"""Object semantics from the API conventions: concurrency, selectors, paging, subresources."""

from __future__ import annotations

import threading

import pytest

from cloudcoil_sync.testing import Emulator

from .conftest import Client, configmap

CM = "/api/v1/namespaces/default/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"


def deployment(name: str, replicas: int = 1) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "img:1"}]},
            },
        },
    }


def test_optimistic_concurrency_only_one_writer_wins(client: Client) -> None:
    created = client.post(CM, configmap("occ", k="0")).json()
    first = {**created, "data": {"k": "a"}}
    second = {**created, "data": {"k": "b"}}
    assert client.put(CM + "/occ", first).status_code == 200
    response = client.put(CM + "/occ", second)
    assert response.status_code == 409
    assert response.json()["reason"] == "Conflict"
    assert client.get(CM + "/occ").json()["data"] == {"k": "a"}


def test_concurrent_patches_without_resource_version_all_apply(client: Client) -> None:
    client.post(CM, configmap("many"))
    errors: list[int] = []

    def patch(i: int) -> None:
        c = client.as_token(client.emulator.admin_token)
        for j in range(10):
            r = c.patch(CM + "/many", {"data": {f"k{i}-{j}": "v"}})
            if r.status_code != 200:
                errors.append(r.status_code)
        c.close()

    threads = [threading.Thread(target=patch, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(client.get(CM + "/many").json()["data"]) == 40


def test_a_create_carrying_a_resource_version_is_refused_as_kube_apiserver_does(
    client: Client,
) -> None:
    """kube-apiserver 1.32 (the kit's, 2026-12-07): its storage refuses a POST whose body keeps
    the resourceVersion of an object it was copied from — a 500 with no reason — after every
    other check; "0", "" and unparsable versions pass; a dry run skips that check and echoes
    the version; an apply's create is not refused."""
    copied = {**configmap("copied"), "metadata": {"name": "copied", "resourceVersion": "7"}}
    refused = client.post(CM, copied)
    assert refused.status_code == 500
    assert refused.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "resourceVersion should not be set on objects to be created",
        "code": 500,
    }
    assert client.get(CM + "/copied").status_code == 404
    dry = client.post(CM + "?dryRun=All", copied)
    assert dry.status_code == 201 and dry.json()["metadata"]["resourceVersion"] == "7"
    for index, version in enumerate(["0", "", "abc"]):
        body = {**configmap(f"v{index}"), "metadata": {"name": f"v{index}"}}
        body["metadata"]["resourceVersion"] = version
        created = client.post(CM, body)
        assert created.status_code == 201, (version, created.text)
        assert created.json()["metadata"]["resourceVersion"] not in ("0", "", "abc")
    applied = client.request(
        "PATCH",
        CM + "/copied?fieldManager=t",
        json=copied,
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert applied.status_code == 201, applied.text


def test_resource_versions_increase_across_kinds(client: Client) -> None:
    a = client.post(CM, configmap("rv-a")).json()["metadata"]["resourceVersion"]
    b = client.post(DEPLOY, deployment("rv-b")).json()["metadata"]["resourceVersion"]
    c = client.patch(CM + "/rv-a", {"data": {"x": "y"}}).json()["metadata"]["resourceVersion"]
    assert int(a) < int(b) < int(c)


def test_generate_name(client: Client) -> None:
    body = {"metadata": {"generateName": "gen-"}, "data": {}}
    name = client.post(CM, body).json()["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5


def test_label_and_field_selectors(client: Client) -> None:
    for name, labels in [
        ("s1", {"env": "prod", "tier": "web"}),
        ("s2", {"env": "dev"}),
        ("s3", {"tier": "db"}),
    ]:
        body = configmap(name)
        body["metadata"]["labels"] = labels
        client.post(CM, body)

    def names(query: str) -> list[str]:
        items = client.get(CM, params={"labelSelector": query}).json()["items"]
        return [i["metadata"]["name"] for i in items]

    assert names("env=prod") == ["s1"]
    assert names("env==dev") == ["s2"]
    assert names("env!=prod") == ["s2", "s3"]
    assert names("env in (prod,dev)") == ["s1", "s2"]
    assert names("env notin (prod)") == ["s2", "s3"]
    assert names("tier") == ["s1", "s3"]
    assert names("!tier") == ["s2"]
    assert names("env=prod,tier=web") == ["s1"]
    by_field = client.get(CM, params={"fieldSelector": "metadata.name=s3"}).json()["items"]
    assert [i["metadata"]["name"] for i in by_field] == ["s3"]
    everywhere = client.get(
        "/api/v1/configmaps", params={"fieldSelector": "metadata.namespace=default"}
    )
    assert len(everywhere.json()["items"]) == 3


def test_pagination_keeps_first_resource_version_and_visits_everything(client: Client) -> None:
    for i in range(7):
        client.post(CM, configmap(f"p{i}"))
    first = client.get(CM, params={"limit": 3}).json()
    assert first["metadata"]["remainingItemCount"] == 4
    seen = [i["metadata"]["name"] for i in first["items"]]
    token = first["metadata"]["continue"]
    client.post(CM, configmap("p9-late"))
    while token:
        page = client.get(CM, params={"limit": 3, "continue": token}).json()
        assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        seen += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
    assert seen[:7] == [f"p{i}" for i in range(7)]


@pytest.mark.kube_emulator(deployments=None)  # no rollout simulator writing the status
def test_status_subresource_and_generation_for_deployments(client: Client) -> None:
    created = client.post(DEPLOY, deployment("d1")).json()
    assert created["metadata"]["generation"] == 1
    assert created["status"] == {}
    status = client.patch(
        DEPLOY + "/d1/status", {"status": {"replicas": 3}, "spec": {"replicas": 9}}
    )
    assert status.json()["status"] == {"replicas": 3}
    assert status.json()["spec"]["replicas"] == 1
    assert status.json()["metadata"]["generation"] == 1
    spec = client.patch(DEPLOY + "/d1", {"spec": {"replicas": 2}, "status": {"replicas": 0}})
    assert spec.json()["metadata"]["generation"] == 2
    assert spec.json()["status"] == {"replicas": 3}


def test_scale_subresource(client: Client) -> None:
    client.post(DEPLOY, deployment("d2", replicas=1))
    scale = client.get(DEPLOY + "/d2/scale").json()
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    client.patch(DEPLOY + "/d2/scale", {"spec": {"replicas": 4}})
    assert client.get(DEPLOY + "/d2").json()["spec"]["replicas"] == 4


def test_create_in_missing_namespace_is_404(client: Client) -> None:
    response = client.post("/api/v1/namespaces/nope/configmaps", configmap("x"))
    assert response.status_code == 404
    assert response.json()["details"] == {"name": "nope", "kind": "namespaces"}


def test_names_follow_kube_apiservers_dns_rules(client: Client) -> None:
    # Go's regexp `$` ends the text: a trailing newline is no DNS label.
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "abc\n"}}
    refused = client.post("/api/v1/namespaces", namespace)
    assert refused.status_code == 422, refused.text
    assert "a lowercase RFC 1123 label must consist of" in refused.json()["message"]
    # IsDNS1123Subdomain limits the whole name to 253 characters, not each label to 63.
    name = "a" * 64 + ".example"
    assert client.post(CM, configmap(name)).status_code == 201
    assert client.post(CM, configmap("b" * 254)).status_code == 422


def test_namespace_deletion_removes_contents_then_namespace(client: Client) -> None:
    emulator: Emulator = client.emulator
    client.post("/api/v1/namespaces", {"metadata": {"name": "doomed"}})
    held = configmap("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    client.post("/api/v1/namespaces/doomed/configmaps", held)
    client.post("/api/v1/namespaces/doomed/configmaps", configmap("free"))
    deleted = client.delete("/api/v1/namespaces/doomed").json()
    assert deleted["status"]["phase"] == "Terminating"
    refused = client.post("/api/v1/namespaces/doomed/configmaps", configmap("new"))
    assert refused.status_code == 403
    assert emulator.wait_for(
        lambda: emulator.get_object("", "configmaps", "doomed", "free") is None
    )
    assert client.get("/api/v1/namespaces/doomed").status_code == 200
    client.patch("/api/v1/namespaces/doomed/configmaps/held", {"metadata": {"finalizers": None}})
    assert emulator.wait_for(lambda: emulator.get_object("", "namespaces", "", "doomed") is None)


def test_dry_run_never_persists(client: Client) -> None:
    response = client.post(CM + "?dryRun=All", configmap("dry"))
    assert response.status_code == 201
    assert "resourceVersion" not in response.json()["metadata"]
    assert client.get(CM + "/dry").status_code == 404
    client.post(CM, configmap("dry2", k="v"))
    patched = client.patch(CM + "/dry2?dryRun=All", {"data": {"k": "changed"}})
    assert patched.json()["data"] == {"k": "changed"}
    assert client.get(CM + "/dry2").json()["data"] == {"k": "v"}
    assert client.delete(CM + "/dry2?dryRun=All").status_code == 200
    assert client.get(CM + "/dry2").status_code == 200


def test_delete_precondition_resource_version(client: Client) -> None:
    created = client.post(CM, configmap("pre")).json()
    client.patch(CM + "/pre", {"data": {"x": "1"}})
    stale = {"preconditions": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    response = client.delete(CM + "/pre", stale)
    assert response.status_code == 409
    assert "ResourceVersion in the precondition" in response.json()["message"]


def test_events_v1_and_core_are_the_same_objects(client: Client) -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/c",
        "reportingInstance": "i",
        "action": "Do",
        "reason": "Because",
        "type": "Normal",
        "note": "hello",
        "regarding": {"kind": "ConfigMap", "name": "x", "namespace": "default"},
    }
    assert client.post("/apis/events.k8s.io/v1/namespaces/default/events", event).status_code == 201
    core = client.get("/api/v1/namespaces/default/events").json()["items"]
    assert [(e["message"], e["involvedObject"]["name"]) for e in core] == [("hello", "x")]
    v1 = client.get("/apis/events.k8s.io/v1/namespaces/default/events/e1").json()
    assert v1["note"] == "hello" and v1["apiVersion"] == "events.k8s.io/v1"


def test_json_patch_operations(client: Client) -> None:
    client.post(CM, configmap("jp", a="1", b="2"))
    ops = [
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "remove", "path": "/data/b"},
        {"op": "copy", "from": "/data/a", "path": "/data/c"},
        {"op": "move", "from": "/data/a", "path": "/data/d"},
        {"op": "add", "path": "/metadata/labels", "value": {"x/y": "z"}},
        {"op": "replace", "path": "/metadata/labels/x~1y", "value": "w"},
    ]
    result = client.patch(CM + "/jp", ops, "application/json-patch+json").json()
    assert result["data"] == {"c": "1", "d": "1"}
    assert result["metadata"]["labels"] == {"x/y": "w"}
    bad = client.patch(
        CM + "/jp", [{"op": "remove", "path": "/data/nope"}], "application/json-patch+json"
    )
    assert bad.status_code == 422


def test_bodies_that_are_not_strict_json_are_refused(client: Client) -> None:
    headers = {"Content-Type": "application/json"}
    for raw in (b'{"kind":"ConfigMap","apiVersion":"v1","data":{"a":NaN}}', b'{"a": "\xff"}'):
        resp = client.request("POST", CM, data=raw, headers=headers)
        assert resp.status_code == 400, raw
        assert resp.json()["message"].startswith("the body of the request could not be decoded")
    assert client.get(CM).json()["items"] == []


def test_custom_resource_without_status_subresource_bumps_generation_on_status(
    client: Client,
) -> None:
    emulator: Emulator = client.emulator
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    path = "/apis/example.com/v1/namespaces/default/gadgets"
    assert emulator.wait_for(lambda: client.get(path).status_code == 200)
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {"a": 1},
        "status": {"ok": False},
    }
    created = client.post(path, body).json()
    assert created["status"] == {"ok": False}  # no status subresource: status is kept
    patched = client.patch(path + "/g", {"status": {"ok": True}}).json()
    assert patched["metadata"]["generation"] == 2
    labelled = client.patch(path + "/g", {"metadata": {"labels": {"x": "y"}}}).json()
    assert labelled["metadata"]["generation"] == 2
    assert client.get(path + "/g/status").status_code == 404


def test_object_helpers_present_objects_as_their_group_serves_them(client: Client) -> None:
    emulator: Emulator = client.emulator
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "h1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "c",
        "reportingInstance": "i",
        "action": "A",
        "reason": "R",
        "type": "Normal",
        "note": "n",
    }
    client.post("/apis/events.k8s.io/v1/namespaces/default/events", event)
    [v1] = emulator.list_objects("events.k8s.io", "events", "default")
    assert (v1["apiVersion"], v1["note"]) == ("events.k8s.io/v1", "n")
    core = emulator.get_object("", "events", "default", "h1")
    assert core is not None and core["message"] == "n"
