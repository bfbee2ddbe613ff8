"""REST mapping: which URL serves a kind (group, version, plural, scope, subresources).

Resolution is offline first: the built-in table (every kind in cloudcoil-models-kubernetes),
``@custom_resource`` metadata on model classes (``__cloudcoil_crd__``) and mappings registered
with :func:`register` (e.g. from ``CRD`` objects). Discovery against the server is used by the
client only when a kind is unknown at run time (see :mod:`.discovery`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from cloudcoil_sync.client._internal.builtin import BUILTIN_ROWS, SUBRESOURCE_ONLY

__all__ = [
    "RESTMapping",
    "UnknownKind",
    "builtin_mappings",
    "lookup",
    "mappings_from_crd",
    "register",
    "split_api_version",
]


_PLAIN = re.compile(r"[a-z0-9][a-z0-9.\-]*\Z")


def _segment(value: str) -> str:
    """URL-quote a path segment (object and namespace names are usually plain DNS names)."""
    return value if _PLAIN.match(value) else quote(value, safe="")


class UnknownKind(LookupError):
    """No offline REST mapping for a kind (discovery may still find it)."""


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"apps/v1"`` -> ``("apps", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True, slots=True)
class RESTMapping:
    """Where the API server serves one kind."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: frozenset[str] = field(default_factory=frozenset)
    #: Served only as a subresource of other resources (Scale, Eviction, TokenRequest).
    subresource_only: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base(self) -> str:
        """URL prefix of the group-version: ``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """URL path of the collection or of one object (and its subresource).

        ``namespace=None`` on a namespaced kind addresses all namespaces (collections only);
        cluster-scoped kinds ignore ``namespace``.
        """
        if self.subresource_only:
            raise ValueError(
                f"{self.kind} ({self.api_version}) is served only as the {self.plural!r} "
                "subresource of another resource; use that resource's client with "
                f"subresource={self.plural!r}"
            )
        parts = [self.base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{_segment(namespace)}")
        elif self.namespaced and name is not None:
            raise ValueError(f"{self.kind} {name!r} is namespaced: a namespace is required")
        parts.append(self.plural)
        if name is not None:
            if not name:
                raise ValueError(f"{self.kind}: empty object name")
            parts.append(_segment(name))
        if subresource:
            if name is None:
                raise ValueError(f"subresource {subresource!r} needs an object name")
            if subresource not in self.subresources:
                known = ", ".join(sorted(self.subresources)) or "none"
                raise ValueError(
                    f"{self.kind} ({self.api_version}) has no {subresource!r} subresource "
                    f"(known: {known})"
                )
            parts.append(subresource)
        return "/".join(parts)


def _from_row(row: tuple[str, str, str, bool, str]) -> RESTMapping:
    api_version, kind, plural, namespaced, subs = row
    group, version = split_api_version(api_version)
    only = subs == SUBRESOURCE_ONLY
    return RESTMapping(
        group,
        version,
        kind,
        plural,
        namespaced,
        frozenset() if only else frozenset(subs.split()),
        subresource_only=only,
    )


_BUILTIN: tuple[RESTMapping, ...] = tuple(_from_row(r) for r in BUILTIN_ROWS)
_lock = threading.Lock()
_by_kind: dict[tuple[str, str], RESTMapping] = {}
_by_plural: dict[tuple[str, str, str], RESTMapping] = {}


def _index(mapping: RESTMapping) -> None:
    _by_kind[(mapping.api_version, mapping.kind)] = mapping
    if not mapping.subresource_only:
        _by_plural[(mapping.group, mapping.version, mapping.plural)] = mapping


for _m in _BUILTIN:
    _index(_m)


def builtin_mappings() -> tuple[RESTMapping, ...]:
    """Every built-in mapping (one per apiVersion/kind of cloudcoil-models-kubernetes)."""
    return _BUILTIN


def mappings_from_crd(crd: Any) -> list[RESTMapping]:
    """Mappings (one per served version) of a CustomResourceDefinition.

    Accepts a CRD manifest dict, a CustomResourceDefinition model, or an object with a
    ``manifest()`` method (``cloudcoil_sync.crd.CRD``).
    """
    body: Any = crd
    if hasattr(body, "manifest") and callable(body.manifest):
        body = body.manifest()
    if hasattr(body, "model_dump"):
        body = body.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not isinstance(body, Mapping):
        raise TypeError(f"not a CustomResourceDefinition: {type(crd).__name__}")
    spec = body.get("spec") or {}
    names = spec.get("names") or {}
    try:
        group, kind, plural = spec["group"], names["kind"], names["plural"]
    except KeyError as exc:
        raise ValueError(f"CustomResourceDefinition is missing spec field {exc}") from None
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    out = []
    for ver in spec.get("versions") or []:
        subs = frozenset((ver.get("subresources") or {}).keys())
        out.append(RESTMapping(group, ver["name"], kind, plural, namespaced, subs))
    return out


def register(mapping: RESTMapping | Any) -> list[RESTMapping]:
    """Register a RESTMapping, or every version of a CRD, process-wide. Returns the mappings."""
    mappings = [mapping] if isinstance(mapping, RESTMapping) else mappings_from_crd(mapping)
    with _lock:
        for m in mappings:
            _index(m)
    return mappings


def _from_crd_marker(model: type, meta: Any) -> RESTMapping:
    group, version = split_api_version(_gvk_of(model)[0])
    kind = getattr(meta, "kind", None) or _gvk_of(model)[1]
    group = getattr(meta, "group", None) or group
    subs = {"status"} if getattr(meta, "status", False) else set()
    if getattr(meta, "scale", False):
        subs.add("scale")
    return RESTMapping(
        group,
        getattr(meta, "version", None) or version,
        kind,
        meta.plural,
        getattr(meta, "scope", "Namespaced") == "Namespaced",
        frozenset(subs),
    )


def _gvk_of(model: Any) -> tuple[str, str]:
    gvk = model.gvk()
    return str(gvk.api_version), str(gvk.kind)


def lookup(target: Any) -> RESTMapping:
    """Offline mapping for a model class/instance, a dict object, a GVK, ``(apiVersion, kind)``
    or ``(group, version, plural)``. Raises :class:`UnknownKind` if not known offline."""
    if isinstance(target, RESTMapping):
        return target
    if isinstance(target, tuple):
        with _lock:
            if len(target) == 3:
                found = _by_plural.get((target[0], target[1], target[2]))
            elif len(target) == 2:
                found = _by_kind.get((target[0], target[1]))
            else:
                raise TypeError(
                    f"expected (group, version, plural) or (apiVersion, kind): {target}"
                )
        if found is None:
            raise UnknownKind(f"no REST mapping known offline for {target}")
        return found
    if isinstance(target, Mapping):
        return lookup((target.get("apiVersion", ""), target.get("kind", "")))
    model = target if isinstance(target, type) else type(target)
    meta = getattr(model, "__cloudcoil_crd__", None)
    if meta is not None:
        return _from_crd_marker(model, meta)
    if hasattr(model, "gvk"):
        return lookup(_gvk_of(model))
    if hasattr(target, "api_version") and hasattr(target, "kind"):
        return lookup((str(target.api_version), str(target.kind)))
    raise TypeError(f"cannot map {target!r} to a Kubernetes resource")


def known_kinds() -> Iterable[tuple[str, str]]:
    """(apiVersion, kind) pairs known offline (built-in and registered)."""
    with _lock:
        return list(_by_kind)
