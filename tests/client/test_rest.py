"""REST mapping: built-in table coverage and path construction."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import SimpleNamespace
from typing import Any

import cloudcoil.models.kubernetes as kube_models
import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace
from cloudcoil.resources import Resource
from recordings import exchange

from cloudcoil_sync.client._internal import rest
from cloudcoil_sync.client._internal.rest import RESTMapping, UnknownKind, lookup, register


def _all_models() -> list[type[Resource]]:
    found: dict[str, type[Resource]] = {}
    for info in pkgutil.walk_packages(kube_models.__path__, kube_models.__name__ + "."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Resource)
                and obj is not Resource
                and obj.__module__ == module.__name__
            ):
                found[f"{obj.__module__}.{obj.__name__}"] = obj
    return list(found.values())


def test_every_model_class_is_mapped() -> None:
    models = _all_models()
    assert len(models) >= 83
    for model in models:
        mapping = lookup(model)
        gvk = model.gvk()
        assert (mapping.api_version, mapping.kind) == (gvk.api_version, gvk.kind)
        assert mapping.plural and mapping.plural == mapping.plural.lower()
    assert len(rest.builtin_mappings()) == len(
        {(m.gvk().api_version, m.gvk().kind) for m in models}
    )


@pytest.mark.parametrize("name", ["03-discovery-api-v1.json", "04-discovery-apps-v1.json"])
def test_matches_recorded_discovery(name: str) -> None:
    body = exchange(name)["response"]["body"]
    group, version = rest.split_api_version(body["groupVersion"])
    top = {r["name"]: r for r in body["resources"] if "/" not in r["name"]}
    subs: dict[str, set[str]] = {}
    for r in body["resources"]:
        if "/" in r["name"]:
            parent, sub = r["name"].split("/", 1)
            subs.setdefault(parent, set()).add(sub)
    for plural, res in top.items():
        mapping = lookup((group, version, plural))
        assert mapping.kind == res["kind"]
        assert mapping.namespaced == res["namespaced"]
        assert mapping.subresources == frozenset(subs.get(plural, set())), plural


def test_paths() -> None:
    cm = lookup(ConfigMap)
    assert cm.api_version == "v1"
    assert cm.path("ns") == "/api/v1/namespaces/ns/configmaps"
    assert cm.path(None) == "/api/v1/configmaps"
    assert cm.path("ns", "a") == "/api/v1/namespaces/ns/configmaps/a"
    dep = lookup(Deployment)
    assert dep.path("x", "d", "scale") == "/apis/apps/v1/namespaces/x/deployments/d/scale"
    ns = lookup(Namespace)
    assert ns.path("ignored", "n", "status") == "/api/v1/namespaces/n/status"
    with pytest.raises(ValueError, match="no 'status' subresource"):
        cm.path("ns", "a", "status")
    with pytest.raises(ValueError, match="namespace is required"):
        cm.path(None, "a")
    with pytest.raises(ValueError, match="subresource"):
        lookup(("autoscaling/v1", "Scale")).path("ns", "x")


def test_irregular_plurals_and_scopes() -> None:
    expect = {
        ("networking.k8s.io/v1", "IngressClass"): ("ingressclasses", False),
        ("networking.k8s.io/v1", "NetworkPolicy"): ("networkpolicies", True),
        ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
        ("storage.k8s.io/v1", "StorageClass"): ("storageclasses", False),
        ("coordination.k8s.io/v1", "Lease"): ("leases", True),
        ("v1", "Endpoints"): ("endpoints", True),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
            "customresourcedefinitions",
            False,
        ),
    }
    for key, (plural, namespaced) in expect.items():
        m = lookup(key)
        assert (m.plural, m.namespaced) == (plural, namespaced)


def test_dict_and_tuple_lookup() -> None:
    assert lookup({"apiVersion": "apps/v1", "kind": "Deployment"}).plural == "deployments"
    assert lookup(("apps", "v1", "deployments")).kind == "Deployment"
    with pytest.raises(UnknownKind):
        lookup(("example.com", "v1", "nothings"))


def test_custom_resource_marker() -> None:
    class Widget(Resource):
        __cloudcoil_crd__ = SimpleNamespace(plural="widgets", scope="Namespaced", status=True)

        @classmethod
        def gvk(cls) -> Any:
            return SimpleNamespace(api_version="example.com/v1", kind="Widget")

    m = lookup(Widget)
    assert m == RESTMapping("example.com", "v1", "Widget", "widgets", True, frozenset({"status"}))
    assert m.path("a", "w", "status") == "/apis/example.com/v1/namespaces/a/widgets/w/status"


def test_register_crd_manifest() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "spec": {
            "group": "test.example.org",
            "names": {"kind": "Gadget", "plural": "gadgets"},
            "scope": "Cluster",
            "versions": [
                {"name": "v1", "subresources": {"status": {}, "scale": {}}},
                {"name": "v2"},
            ],
        },
    }
    mappings = register(crd)
    assert [m.version for m in mappings] == ["v1", "v2"]
    m = lookup(("test.example.org", "v1", "gadgets"))
    assert not m.namespaced and m.subresources == {"status", "scale"}
    assert lookup(("test.example.org/v2", "Gadget")).path("x", "g") == (
        "/apis/test.example.org/v2/gadgets/g"
    )


def test_real_custom_resource_decorator_and_crd_object() -> None:
    from typing import Literal

    from pydantic import Field

    from cloudcoil_sync.crd import CRD, custom_resource

    @custom_resource(plural="sprockets", scope="Cluster")
    class Sprocket(Resource):
        api_version: Literal["parts.example.com/v1"] = Field(
            "parts.example.com/v1", alias="apiVersion"
        )
        kind: Literal["Sprocket"] = "Sprocket"
        status: dict[str, Any] | None = None

    m = lookup(Sprocket)
    assert (m.group, m.version, m.plural, m.namespaced) == (
        "parts.example.com",
        "v1",
        "sprockets",
        False,
    )
    assert m.subresources == {"status"}
    registered = register(CRD(Sprocket))
    assert registered == [m]
    assert lookup(("parts.example.com", "v1", "sprockets")) == m
