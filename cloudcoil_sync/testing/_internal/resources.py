"""Resource types the emulator serves: built-in kinds and kinds defined by CRDs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUILTIN", "Registry", "ResourceType"]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    builtin: bool = True
    # Objects of two types with the same storage key are the same objects (Event in two groups).
    storage: tuple[str, str] = ("", "")
    has_generation: bool = False
    # A CRD's webhook conversion (conversion.Converter) and a deprecated version's Warning.
    converter: Any = field(default=None, compare=False, hash=False, repr=False)
    deprecation: str | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return self.storage if self.storage != ("", "") else (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def status_subresource(self) -> bool:
        return "status" in self.subresources


# Verbs where kube-apiserver serves fewer than the standard eight.
_VERBS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "bindings"): ("create",),
    ("", "componentstatuses"): ("get", "list"),
    ("", "namespaces"): ("create", "delete", "get", "list", "patch", "update", "watch"),
    ("", "serviceaccounts/token"): ("create",),
    ("authentication.k8s.io", "tokenreviews"): ("create",),
    ("authentication.k8s.io", "selfsubjectreviews"): ("create",),
    ("authorization.k8s.io", "subjectaccessreviews"): ("create",),
    ("authorization.k8s.io", "selfsubjectaccessreviews"): ("create",),
    ("authorization.k8s.io", "selfsubjectrulesreviews"): ("create",),
    ("authorization.k8s.io", "localsubjectaccessreviews"): ("create",),
}


_SHORT: dict[str, tuple[str, ...]] = {
    "componentstatuses": ("cs",),
    "configmaps": ("cm",),
    "endpoints": ("ep",),
    "events": ("ev",),
    "limitranges": ("limits",),
    "namespaces": ("ns",),
    "nodes": ("no",),
    "persistentvolumeclaims": ("pvc",),
    "persistentvolumes": ("pv",),
    "pods": ("po",),
    "replicationcontrollers": ("rc",),
    "resourcequotas": ("quota",),
    "serviceaccounts": ("sa",),
    "services": ("svc",),
    "daemonsets": ("ds",),
    "deployments": ("deploy",),
    "replicasets": ("rs",),
    "statefulsets": ("sts",),
    "cronjobs": ("cj",),
    "horizontalpodautoscalers": ("hpa",),
    "ingresses": ("ing",),
    "networkpolicies": ("netpol",),
    "poddisruptionbudgets": ("pdb",),
    "priorityclasses": ("pc",),
    "storageclasses": ("sc",),
    "customresourcedefinitions": ("crd", "crds"),
    "certificatesigningrequests": ("csr",),
}
_ALL_CATEGORY = {
    "pods",
    "services",
    "daemonsets",
    "deployments",
    "replicasets",
    "statefulsets",
    "cronjobs",
    "jobs",
    "replicationcontrollers",
}


def _t(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    sub: tuple[str, ...] = (),
    short: tuple[str, ...] = (),
    **kw: Any,
) -> ResourceType:
    singular = kw.pop("singular", kind.lower())
    gen = kw.pop("generation", "status" in sub)
    kw.setdefault("verbs", _VERBS.get((group, plural), ALL_VERBS))
    if group in ("", "apps", "batch", "autoscaling", "networking.k8s.io", "policy") or "." in group:
        short = short or _SHORT.get(plural, ())
    if plural in _ALL_CATEGORY:
        kw.setdefault("categories", ("all",))
    return ResourceType(
        group,
        version,
        plural,
        kind,
        namespaced,
        singular,
        sub,
        short,
        has_generation=gen,
        **kw,
    )


# A compact table of the kinds operators use; the client's REST table extends it when present.
BUILTIN: tuple[ResourceType, ...] = (
    _t("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _t("", "v1", "endpoints", "Endpoints", short=("ep",), singular="endpoints"),
    _t("", "v1", "events", "Event", short=("ev",)),
    _t("", "v1", "limitranges", "LimitRange", short=("limits",)),
    _t(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        ("finalize", "status"),
        ("ns",),
        generation=False,
    ),
    _t("", "v1", "nodes", "Node", False, ("status",), ("no",), generation=False),
    _t(
        "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", sub=("status",), short=("pvc",)
    ),
    _t("", "v1", "persistentvolumes", "PersistentVolume", False, ("status",), ("pv",)),
    _t("", "v1", "pods", "Pod", sub=("status",), short=("po",), generation=True),
    _t("", "v1", "replicationcontrollers", "ReplicationController", sub=("scale", "status")),
    _t("", "v1", "resourcequotas", "ResourceQuota", sub=("status",), short=("quota",)),
    _t("", "v1", "secrets", "Secret"),
    _t("", "v1", "serviceaccounts", "ServiceAccount", sub=("token",), short=("sa",)),
    _t("", "v1", "services", "Service", sub=("status",), short=("svc",), generation=False),
    _t("apps", "v1", "controllerrevisions", "ControllerRevision"),
    _t("apps", "v1", "daemonsets", "DaemonSet", sub=("status",), short=("ds",)),
    _t("apps", "v1", "deployments", "Deployment", sub=("scale", "status"), short=("deploy",)),
    _t("apps", "v1", "replicasets", "ReplicaSet", sub=("scale", "status"), short=("rs",)),
    _t("apps", "v1", "statefulsets", "StatefulSet", sub=("scale", "status"), short=("sts",)),
    _t("batch", "v1", "cronjobs", "CronJob", sub=("status",), short=("cj",)),
    _t("batch", "v1", "jobs", "Job", sub=("status",)),
    _t("coordination.k8s.io", "v1", "leases", "Lease"),
    _t("events.k8s.io", "v1", "events", "Event", short=("ev",), storage=("", "events")),
    _t("networking.k8s.io", "v1", "ingresses", "Ingress", sub=("status",), short=("ing",)),
    _t("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    _t("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", sub=("status",)),
    _t("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _t("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _t("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _t("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _t(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("status",),
        ("crd", "crds"),
    ),
    _t(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        generation=True,
    ),
    _t(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        generation=True,
    ),
    _t("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",)),
    _t("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short=("sc",)),
)


def _from_client_table() -> list[ResourceType]:
    """Every kind in the client's offline REST table (``cloudcoil_sync.client._internal.rest``)."""
    try:
        from cloudcoil_sync.client._internal.rest import builtin_mappings
    except ImportError:
        return []
    out: list[ResourceType] = []
    for m in builtin_mappings():
        if getattr(m, "subresource_only", False):
            continue
        subs = tuple(sorted(set(m.subresources) & _SERVED_SUBRESOURCES))
        out.append(_t(m.group, m.version, m.plural, m.kind, m.namespaced, subs))
    return out


_SERVED_SUBRESOURCES = {"status", "scale", "finalize"}


@dataclass
class Registry:
    """Thread-safe lookup of served resource types by (group, version, plural)."""

    _types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # CRD -> its Converter or None (set by the emulator: conversion.converter_for).
    converters: Callable[[dict[str, Any]], Any] | None = None

    @classmethod
    def with_builtins(cls) -> Registry:
        reg = cls()
        for rt in _from_client_table():
            reg.add(rt)
        for rt in BUILTIN:  # our table wins: it carries generation and storage rules
            reg.add(rt)
        return reg

    def add(self, rt: ResourceType) -> None:
        with self._lock:
            self._types[(rt.group, rt.version, rt.plural)] = rt

    def add_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        """Serve the CRD's served versions (converting through its webhook, if any)."""
        converter = self.converters(crd) if self.converters is not None else None
        types = crd_types(crd, converter)
        for rt in types:
            self.add(rt)
        return types

    def remove_group_plural(self, group: str, plural: str) -> None:
        with self._lock:
            for key in [k for k in self._types if k[0] == group and k[2] == plural]:
                del self._types[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in list(self._types.values()):
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        with self._lock:
            return sorted(self._types.values(), key=lambda r: (r.group, r.version, r.plural))

    def groups(self) -> dict[str, list[str]]:
        """group name → served versions (core group is "")."""
        out: dict[str, list[str]] = {}
        for rt in self.all():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out


def crd_types(crd: dict[str, Any], converter: Any = None) -> list[ResourceType]:
    """Resource types a CustomResourceDefinition serves (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subs = tuple(sorted((version.get("subresources") or {}).keys()))
        out.append(
            ResourceType(
                group=spec.get("group", ""),
                version=version["name"],
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular") or names.get("kind", "").lower(),
                subresources=subs,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                builtin=False,
                has_generation=True,
                converter=converter,
                deprecation=_deprecation(spec, version),
            )
        )
    return out


def _deprecation(spec: dict[str, Any], version: dict[str, Any]) -> str | None:
    """The ``Warning`` a deprecated version sends (kube-apiserver's default text if unset)."""
    if not version.get("deprecated"):
        return None
    kind = (spec.get("names") or {}).get("kind", "")
    text = version.get("deprecationWarning")
    if text is None:
        text = f"{spec.get('group', '')}/{version.get('name', '')} {kind} is deprecated"
    return '299 - "' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'
