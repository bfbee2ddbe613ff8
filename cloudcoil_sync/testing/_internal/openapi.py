"""OpenAPI v3 documents generated from the served resource types, as kubectl needs them.

``/openapi/v3`` lists one document per served group-version; each document has the REST
paths of its resources (operations tagged with ``x-kubernetes-group-version-kind``, PATCH
declaring the ``fieldValidation`` parameter, so that kubectl validates server-side) and one
schema per kind. Custom resources get their CRD's ``openAPIV3Schema``; built-in kinds get a
schema that only types ``apiVersion``, ``kind`` and ``metadata`` and preserves every other
field (no field-level validation; strategic-merge-patch keys come from ``strategic.py``'s
table, not from these documents). OpenAPI v2 is not served.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cloudcoil_sync.testing._internal.resources import Registry, ResourceType
from cloudcoil_sync.testing._internal.store import Store

__all__ = ["document", "index"]

JSON = dict[str, Any]
_CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
_QUERY = ("dryRun", "fieldManager", "fieldValidation", "force")


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def index(registry: Registry, store: Store) -> JSON:
    """``/openapi/v3``: where each group-version's document is."""
    paths: JSON = {}
    for group, versions in registry.groups().items():
        for version in versions:
            path = _gv_path(group, version)
            digest = hashlib.sha256(repr(_signature(registry, store, group, version)).encode())
            url = f"/openapi/v3/{path}?hash={digest.hexdigest()[:32].upper()}"
            paths[path] = {"serverRelativeURL": url}
    return {"paths": paths}


def _signature(registry: Registry, store: Store, group: str, version: str) -> list[Any]:
    # Changes when the served types change (a CRD created or edited).
    types = _types(registry, group, version)
    crds = [
        (store.get(_CRD_KEY, "", f"{rt.plural}.{rt.group}") or {}).get("metadata", {})
        for rt in types
        if not rt.builtin
    ]
    return [[rt.plural for rt in types], [m.get("resourceVersion") for m in crds]]


def _types(registry: Registry, group: str, version: str) -> list[ResourceType]:
    return [rt for rt in registry.all() if rt.group == group and rt.version == version]


def document(registry: Registry, store: Store, path: str) -> JSON | None:
    """The document of ``api/v1`` or ``apis/<group>/<version>``; None if not served."""
    parts = path.split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    types = _types(registry, group, version)
    if not types:
        return None
    paths: JSON = {}
    schemas: JSON = {}
    for rt in types:
        name = _schema_name(rt)
        schemas[name] = _schema(rt, store)
        paths.update(_paths(rt, name))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _schema_name(rt: ResourceType) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "core"
    return f"{group}.{rt.version}.{rt.kind}"


def _gvk(rt: ResourceType) -> JSON:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _schema(rt: ResourceType, store: Store) -> JSON:
    schema: JSON = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if not rt.builtin:
        crd = store.get(_CRD_KEY, "", f"{rt.plural}.{rt.group}") or {}
        for served in (crd.get("spec") or {}).get("versions") or []:
            if served.get("name") == rt.version:
                schema = dict((served.get("schema") or {}).get("openAPIV3Schema") or schema)
    properties = dict(schema.get("properties") or {})
    properties.setdefault("apiVersion", {"type": "string"})
    properties.setdefault("kind", {"type": "string"})
    properties.setdefault(
        "metadata", {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    )
    return {
        **schema,
        "properties": properties,
        "x-kubernetes-group-version-kind": [_gvk(rt)],
    }


def _operation(rt: ResourceType, schema: str, action: str, query: tuple[str, ...]) -> JSON:
    ref = {"$ref": f"#/components/schemas/{schema}"}
    return {
        "operationId": f"{action}{rt.kind}",
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string"}} for name in query
        ],
        "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt),
    }


def _paths(rt: ResourceType, schema: str) -> JSON:
    base = "/" + _gv_path(rt.group, rt.version)
    where = (
        f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    )
    collection = {"get": _operation(rt, schema, "list", ())}
    item = {"get": _operation(rt, schema, "get", ())}
    if "create" in rt.verbs:
        collection["post"] = _operation(rt, schema, "post", _QUERY[:3])
    if "update" in rt.verbs:
        item["put"] = _operation(rt, schema, "put", _QUERY[:3])
    if "patch" in rt.verbs:
        item["patch"] = _operation(rt, schema, "patch", _QUERY)
    if "delete" in rt.verbs:
        item["delete"] = _operation(rt, schema, "delete", ("dryRun",))
    return {where: collection, f"{where}/{{name}}": item}
