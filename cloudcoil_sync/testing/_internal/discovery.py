"""Discovery documents: /api, /apis, /api/v1, /apis/<group>/<version>, aggregated v2, /version."""

from __future__ import annotations

from typing import Any

from cloudcoil_sync.testing._internal.resources import ALL_VERBS, Registry, ResourceType

__all__ = ["AGGREGATED", "api_versions", "group_list", "resource_list", "version_info"]

JSON = dict[str, Any]
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_SUB_VERBS = ["get", "patch", "update"]


def version_info() -> JSON:
    return {
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-cloudcoil-sync-emulator",
        "gitCommit": "$Format:%H$",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.5",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server: str) -> JSON:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    }


def group_list(registry: Registry) -> JSON:
    groups = []
    for group, versions in registry.groups().items():
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource(rt: ResourceType) -> JSON:
    out: JSON = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": sorted(rt.verbs),
    }
    if rt.short_names:
        out["shortNames"] = list(rt.short_names)
    if rt.categories:
        out["categories"] = list(rt.categories)
    return out


def _subresource(rt: ResourceType, sub: str) -> JSON:
    out: JSON = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
    kind = _SUB_KINDS.get(sub)
    if kind is not None:
        out.update(kind)
    else:
        out["kind"] = rt.kind
    out["verbs"] = _sub_verbs(sub)
    return out


# Subresources answered with another kind than their resource's.
_SUB_KINDS: dict[str, JSON] = {
    "scale": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
    "token": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
}


def _sub_verbs(sub: str) -> list[str]:
    return {"finalize": ["update"], "token": ["create"]}.get(sub, list(_SUB_VERBS))


def resource_list(registry: Registry, group: str, version: str) -> JSON | None:
    types = [rt for rt in registry.all() if rt.group == group and rt.version == version]
    if not types:
        return None
    resources: list[JSON] = []
    for rt in types:
        resources.append(_resource(rt))
        resources.extend(_subresource(rt, sub) for sub in sorted(rt.subresources))
    out: JSON = {"kind": "APIResourceList"}
    if group:
        out["apiVersion"] = "v1"
    out["groupVersion"] = f"{group}/{version}" if group else version
    out["resources"] = resources
    return out


def _aggregated_resource(rt: ResourceType) -> JSON:
    out: JSON = {
        "resource": rt.plural,
        "responseKind": {"group": "", "version": "", "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": sorted(rt.verbs or ALL_VERBS),
    }
    if rt.short_names:
        out["shortNames"] = list(rt.short_names)
    if rt.categories:
        out["categories"] = list(rt.categories)
    if rt.subresources:
        subs = []
        for sub in sorted(rt.subresources):
            kind = _SUB_KINDS.get(sub) or {"group": "", "version": "", "kind": rt.kind}
            subs.append({"subresource": sub, "responseKind": kind, "verbs": _sub_verbs(sub)})
        out["subresources"] = subs
    return out


def aggregated(registry: Registry, core: bool) -> JSON:
    """APIGroupDiscoveryList for the core group (``core``) or for all named groups."""
    items = []
    for group, versions in registry.groups().items():
        if bool(group) == core:
            continue
        entries = []
        for version in versions:
            types = [rt for rt in registry.all() if rt.group == group and rt.version == version]
            entries.append(
                {
                    "version": version,
                    "resources": [_aggregated_resource(rt) for rt in types],
                    "freshness": "Current",
                }
            )
        meta: JSON = {"creationTimestamp": None}
        if group:
            meta = {"name": group, "creationTimestamp": None}
        items.append({"metadata": meta, "versions": entries})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
