"""Per-Config REST mapper: offline table first, API discovery only for unknown kinds."""

from __future__ import annotations

import threading
from typing import Any

from cloudcoil_sync.client._internal import rest
from cloudcoil_sync.client._internal.errors import NotFound
from cloudcoil_sync.client._internal.rest import RESTMapping, UnknownKind, split_api_version
from cloudcoil_sync.client._internal.transport import Transport

__all__ = ["RESTMapper"]


class RESTMapper:
    """Resolves kinds to mappings; caches one discovery document per group-version."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._lock = threading.Lock()
        self._group_versions: dict[tuple[str, str], list[RESTMapping]] = {}

    def resolve(self, target: Any) -> RESTMapping:
        try:
            return rest.lookup(target)
        except UnknownKind:
            pass
        group, version, by, value = self._discovery_key(target)
        for refresh in (False, True):
            for mapping in self._discover(group, version, refresh=refresh):
                if getattr(mapping, by) == value:
                    return mapping
        gv = f"{group}/{version}" if group else version
        raise UnknownKind(f"the server does not serve {by} {value!r} in {gv}")

    @staticmethod
    def _discovery_key(target: Any) -> tuple[str, str, str, str]:
        if isinstance(target, tuple) and len(target) == 3:
            return target[0], target[1], "plural", target[2]
        if isinstance(target, tuple) and len(target) == 2:
            api_version, kind = target
        elif isinstance(target, dict):
            api_version, kind = target.get("apiVersion", ""), target.get("kind", "")
        else:
            model: Any = target if isinstance(target, type) else type(target)
            gvk = model.gvk()
            api_version, kind = gvk.api_version, gvk.kind
        group, version = split_api_version(str(api_version))
        return group, version, "kind", str(kind)

    def _discover(self, group: str, version: str, *, refresh: bool) -> list[RESTMapping]:
        key = (group, version)
        with self._lock:
            cached = self._group_versions.get(key)
        if cached is not None and not refresh:
            return cached
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            body = self._transport.request_json("GET", path)
        except NotFound:
            raise UnknownKind(f"the server does not serve API group-version {path[1:]}") from None
        mappings = parse_resource_list(group, version, body)
        with self._lock:
            self._group_versions[key] = mappings
        return mappings


def parse_resource_list(group: str, version: str, body: dict[str, Any]) -> list[RESTMapping]:
    """Mappings from an ``APIResourceList`` (legacy discovery of one group-version)."""
    resources = body.get("resources") or []
    subs: dict[str, set[str]] = {}
    for res in resources:
        name = str(res.get("name", ""))
        if "/" in name:
            parent, sub = name.split("/", 1)
            subs.setdefault(parent, set()).add(sub)
    return [
        RESTMapping(
            group,
            version,
            str(res.get("kind", "")),
            str(res["name"]),
            bool(res.get("namespaced", False)),
            frozenset(subs.get(str(res["name"]), ())),
        )
        for res in resources
        if "/" not in str(res.get("name", "/"))
    ]
