"""Every client operation against the Kubernetes API emulator over HTTPS."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from cloudcoil.models.kubernetes.apiextensions.v1 import CustomResourceDefinition
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace

from cloudcoil_sync.client import (
    AlreadyExists,
    Config,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    WatchEvent,
)
from cloudcoil_sync.testing import Emulator


def _cm(name: str, **data: str) -> ConfigMap:
    return ConfigMap.model_validate(
        {"metadata": {"name": name, "labels": {"app": "t"}}, "data": data}
    )


def _names(items: Any) -> list[str]:
    return [str(i.metadata.name) for i in items if i.metadata is not None]


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


def test_crud_roundtrip(kube_config: Config) -> None:
    api = kube_config.client(ConfigMap)
    created = api.create(_cm("a", k="v"))
    assert isinstance(created, ConfigMap) and created.metadata is not None
    assert created.metadata.namespace == "default" and created.metadata.uid
    with pytest.raises(AlreadyExists, match='"a" already exists'):
        api.create(_cm("a"))
    got = api.get("a")
    assert got.data == {"k": "v"}

    got.data = {"k": "w"}
    replaced = api.replace(got)
    assert replaced.data == {"k": "w"}
    with pytest.raises(Conflict):  # stale resourceVersion
        api.replace(got)

    patched = api.merge_patch("a", {"data": {"m": "1"}})
    assert patched.data == {"k": "w", "m": "1"}
    assert patched.metadata is not None
    rv = patched.metadata.resource_version
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/data/j", "value": "2"},
    ]
    assert api.json_patch("a", ops).data == {"k": "w", "m": "1", "j": "2"}
    with pytest.raises(Invalid):  # the `test` guard now fails
        api.json_patch("a", ops)

    raw = api.raw.get("a")
    assert isinstance(raw, dict) and raw["data"]["j"] == "2"

    with pytest.raises(Conflict):
        api.delete("a", uid="00000000-0000-0000-0000-000000000000")
    api.delete("a", uid=replaced.metadata.uid if replaced.metadata else None)
    with pytest.raises(NotFound, match='"a" not found'):
        api.get("a")
    with pytest.raises(NotFound):
        api.delete("a")


def test_list_pages_selectors_and_namespaces(kube_config: Config) -> None:
    kube_config.client(Namespace).create({"metadata": {"name": "other"}})
    api = kube_config.client(ConfigMap)
    for i in range(7):
        api.create(_cm(f"c{i}"))
    kube_config.client(ConfigMap, namespace="other").create(_cm("x"))
    api.create({"metadata": {"name": "unlabelled"}})

    page = api.list(label_selector="app=t", limit=2)  # four pages
    assert sorted(_names(page)) == [f"c{i}" for i in range(7)]
    assert page.resource_version and int(page.resource_version) > 0
    every = api.raw.list(all_namespaces=True, label_selector="app=t", limit=3)
    assert {c["metadata"]["namespace"] for c in every} == {"default", "other"}
    assert all(c["kind"] == "ConfigMap" and c["apiVersion"] == "v1" for c in every)
    assert _names(api.list(namespace="other")) == ["x"]
    by_field = api.list(field_selector="metadata.name=c3")
    assert _names(by_field) == ["c3"]
    # cluster-scoped: the client namespace is ignored
    assert {"default", "other"} <= set(_names(kube_config.client(Namespace, namespace="x").list()))


def test_server_side_apply_and_dry_run(kube_config: Config) -> None:
    api = kube_config.client(ConfigMap)
    intent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "s"},
        "data": {"owned": "a"},
    }
    assert api.apply(intent, field_manager="a").data == {"owned": "a"}
    with pytest.raises(Conflict, match="conflict"):
        api.apply({**intent, "data": {"owned": "b"}}, field_manager="b")
    assert api.apply({**intent, "data": {"owned": "b"}}, field_manager="b", force=True).data == {
        "owned": "b"
    }
    dry = api.apply({**intent, "data": {"owned": "c"}}, field_manager="b", dry_run=True)
    assert dry.data == {"owned": "c"} and api.get("s").data == {"owned": "b"}
    api.create(_cm("d"), dry_run=True)
    with pytest.raises(NotFound):
        api.get("d")
    api.delete("s", dry_run=True)
    assert api.get("s").metadata is not None


def test_status_and_scale_subresources(kube_config: Config) -> None:
    api = kube_config.client(Deployment)
    dep = api.create(_deployment("web"))
    assert dep.metadata is not None and dep.metadata.generation == 1
    status = api.merge_patch(
        "web", {"status": {"observedGeneration": 1, "replicas": 1}}, subresource="status"
    )
    assert status.status is not None and status.status.observed_generation == 1
    # writes to the main resource ignore status
    main = api.merge_patch("web", {"status": {"replicas": 9}})
    assert main.status is not None and main.status.replicas == 1

    fresh = api.get("web", subresource="status")
    assert fresh.status is not None
    fresh.status.ready_replicas = 1
    assert api.replace_status(fresh).status is not None

    scale = api.get_scale("web")
    assert scale.spec is not None and scale.spec.replicas == 1
    assert api.patch_scale("web", 3).spec.replicas == 3
    assert api.get("web").spec.replicas == 3  # type: ignore[union-attr]
    assert api.raw.get_scale("web")["kind"] == "Scale"


def test_watch_resume_and_expired(kube_emulator: Emulator, kube_config: Config) -> None:
    api = kube_config.client(ConfigMap)
    start = api.list().resource_version
    api.create(_cm("w1"))
    api.merge_patch("w1", {"data": {"a": "1"}})
    api.delete("w1")
    with api.watch(resource_version=start, timeout_seconds=5) as w:
        events: list[WatchEvent] = []
        for ev in w:
            if ev.type != "BOOKMARK":
                events.append(ev)
            if len(events) == 3:
                break
        resume = w.resource_version
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    api.create(_cm("w2"))
    with api.watch(resource_version=resume, timeout_seconds=5) as w2:
        ev = next(e for e in w2 if e.type != "BOOKMARK")
    assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "w2")

    kube_emulator.forget_history()
    with pytest.raises(Expired):
        for _ in api.watch(resource_version=start, timeout_seconds=5):
            pass


def test_watch_close_from_another_thread(kube_config: Config) -> None:
    w = kube_config.client(ConfigMap).watch(timeout_seconds=60)
    finished = threading.Event()

    def consume() -> None:
        for _ in w:
            pass
        finished.set()

    t = threading.Thread(target=consume)
    t.start()
    w.close()
    assert finished.wait(5)
    t.join(5)


def test_custom_resource_via_discovery(kube_emulator: Emulator, kube_config: Config) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com",
            "names": {
                "kind": "Gizmo",
                "plural": "gizmos",
                "singular": "gizmo",
                "listKind": "GizmoList",
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
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
    crds = kube_config.client(CustomResourceDefinition)
    crds.create(crd)

    def established() -> bool:
        conds = (crds.raw.get("gizmos.example.com").get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    assert kube_emulator.wait_for(established)
    gizmos = kube_config.client(("example.com", "v1", "gizmos"))
    made = gizmos.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Gizmo",
            "metadata": {"name": "g"},
            "spec": {"size": 1},
        }
    )
    assert made["metadata"]["namespace"] == "default"
    assert gizmos.mapping.namespaced and "status" in gizmos.mapping.subresources
    assert gizmos.merge_patch("g", {"status": {"ok": True}}, subresource="status")["status"] == {
        "ok": True
    }
    assert [g["metadata"]["name"] for g in gizmos.list()] == ["g"]


def test_forbidden_and_unauthorized(kube_emulator: Emulator) -> None:
    kube_emulator.add_token("nobody-token", "nobody")
    with kube_emulator.config(token="nobody-token") as cfg:
        with pytest.raises(Forbidden, match="forbidden"):
            cfg.client(ConfigMap).list()
        with pytest.raises(Forbidden):
            cfg.client(ConfigMap).get("x")
    from cloudcoil_sync.client import Unauthorized

    with kube_emulator.config(token="garbage") as cfg, pytest.raises(Unauthorized):
        cfg.client(ConfigMap).get("x")


def test_retries_injected_faults(kube_emulator: Emulator, kube_config: Config) -> None:
    api = kube_config.client(ConfigMap)
    kube_config.transport.retry = type(kube_config.transport.retry)(base=0.001, cap=0.01)
    kube_emulator.faults.inject(429, count=2, method="POST", retry_after=0)
    assert api.create(_cm("r")).metadata is not None  # 429: retried even for POST
    kube_emulator.faults.inject(503, count=2, method="GET")
    assert api.get("r").metadata is not None
    kube_emulator.faults.inject(500, count=1, method="PATCH")
    from cloudcoil_sync.client import ServerError

    with pytest.raises(ServerError):  # not retried: the server may have applied it
        api.merge_patch("r", {"data": {"x": "1"}})
    assert kube_emulator.faults.injected == 5


def test_concurrent_writers_share_one_pool(kube_emulator: Emulator, kube_config: Config) -> None:
    api = kube_config.client(ConfigMap)
    errors: list[BaseException] = []
    barrier = threading.Barrier(32)

    def work(i: int) -> None:
        try:
            barrier.wait(10)
            name = f"t{i}"
            api.create(_cm(name))
            for j in range(5):
                api.merge_patch(name, {"data": {"n": str(j)}})
                api.apply(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": name},
                        "data": {f"f{i}": "x"},
                    },
                    field_manager=f"m{i}",
                )
            assert api.raw.get(name)["data"][f"f{i}"] == "x"
            api.delete(name)
        except BaseException as exc:
            errors.append(exc)

    before = kube_emulator.connections_accepted
    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    stats = kube_config.transport.pool_stats()
    opened = kube_emulator.connections_accepted - before
    assert stats["requests"] >= 32 * 13
    # connections are reused: at most one per concurrent thread, far fewer than requests
    assert stats["connections"] <= 32 and opened <= 33, (stats, opened)
    assert api.list(label_selector="app=t").items == []


def test_watch_dropped_by_server(kube_emulator: Emulator, kube_config: Config) -> None:
    from cloudcoil_sync.client import WatchStreamError

    api = kube_config.client(ConfigMap)
    # a clean end (server-side timeout or graceful drop): iteration just stops
    w = api.watch(timeout_seconds=30)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 1)
    kube_emulator.drop_watches()
    assert [e for e in w if e.type != "BOOKMARK"] == []
    # a cut connection mid-stream: a transport error naming the resume point
    w = api.watch(timeout_seconds=30, resource_version=api.list().resource_version)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 1)
    kube_emulator.drop_watches(abort=True)
    with pytest.raises(WatchStreamError, match="resume from resourceVersion"):
        list(w)
