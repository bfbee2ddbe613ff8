"""Strategic merge patch: keyed lists, directives, and what kubectl apply sends."""

from __future__ import annotations

from typing import Any

import pytest

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.patch import PatchError
from cloudcoil_sync.testing._internal.strategic import apply_strategic_merge_patch

from .conftest import Client

SPEC: dict[str, Any] = {
    "containers": [
        {"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}],
         "ports": [{"containerPort": 80}]},
        {"name": "side", "image": "busybox"},
    ],
    "volumes": [{"name": "tmp", "emptyDir": {}}],
}  # fmt: skip


def test_keyed_lists_merge_by_key_and_keep_what_the_patch_does_not_name() -> None:
    patched = apply_strategic_merge_patch(
        SPEC,
        {
            "$setElementOrder/containers": [{"name": "web"}, {"name": "side"}],
            "containers": [
                {"name": "web", "image": "nginx:1.28", "env": [{"name": "B", "value": "2"}]}
            ],
        },
    )
    web, side = patched["containers"]
    assert web["image"] == "nginx:1.28" and web["ports"] == [{"containerPort": 80}]
    assert web["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert side == {"name": "side", "image": "busybox"}
    assert not any(key.startswith("$") for key in patched)
    assert SPEC["containers"][0]["image"] == "nginx:1.27"  # the original is untouched


def test_directives() -> None:
    deleted = apply_strategic_merge_patch(
        SPEC, {"containers": [{"name": "side", "$patch": "delete"}]}
    )
    assert [c["name"] for c in deleted["containers"]] == ["web"]
    replaced = apply_strategic_merge_patch(
        SPEC, {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}
    )
    assert replaced["containers"] == [{"name": "only", "image": "x"}]
    reordered = apply_strategic_merge_patch(
        SPEC, {"$setElementOrder/containers": [{"name": "side"}, {"name": "web"}]}
    )
    assert [c["name"] for c in reordered["containers"]] == ["side", "web"]
    retained = apply_strategic_merge_patch(
        {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}},
    )
    assert retained == {"strategy": {"type": "Recreate"}}
    pruned = apply_strategic_merge_patch(
        {"metadata": {"finalizers": ["a", "b"]}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"]}},
    )
    assert pruned["metadata"]["finalizers"] == ["b", "c"]
    map_replaced = apply_strategic_merge_patch(
        {"data": {"a": "1", "b": "2"}}, {"data": {"$patch": "replace", "c": "3"}}
    )
    assert map_replaced == {"data": {"c": "3"}}
    assert apply_strategic_merge_patch({"a": {"b": 1}, "c": 2}, {"a": None}) == {"c": 2}
    service = apply_strategic_merge_patch(
        {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]},
        {"ports": [{"port": 443, "targetPort": 8443}]},
    )
    assert service["ports"][1] == {"port": 443, "name": "https", "targetPort": 8443}
    assert apply_strategic_merge_patch({"args": ["a"]}, {"args": ["b"]}) == {"args": ["b"]}
    with pytest.raises(PatchError):
        apply_strategic_merge_patch(SPEC, {"containers": [{"image": "no-name"}]})
    with pytest.raises(PatchError):
        apply_strategic_merge_patch(SPEC, {"$patch": "frobnicate"})


def test_custom_resources_refuse_strategic_merge_patch(
    client: Client, kube_emulator: Emulator
) -> None:
    from .test_tables_openapi import CRD

    kube_emulator.create_object(CRD)
    assert kube_emulator.settle()
    path = "/apis/example.com/v1/namespaces/default/gadgets"
    client.post(path, {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}})
    answer = client.patch(
        f"{path}/g", {"spec": {"size": 1}}, "application/strategic-merge-patch+json"
    )
    assert answer.status_code == 415
    assert "strategic-merge-patch" not in answer.json()["message"].split("(got")[0]
