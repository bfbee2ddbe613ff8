"""Offline RBAC inference: the least privilege the operator's own API calls need.

Grants come from the definition only (primary kinds, owned and watched kinds, Events, the
leader-election Lease and explicit ``RBACRule``s); handler bodies are never inspected. Plural,
scope and status subresource come, in order, from the app's CRDs, the built-in REST table
(every kind of cloudcoil-models-kubernetes), ``@custom_resource`` metadata and ``RBACRule``
declarations, so built-in kinds need no ``RBACRule``. Nothing here touches the network.

Grants land in buckets: ``None`` is the ClusterRole (all-namespaces access and every
cluster-scoped kind), a namespace name is a Role there. Grants with the same (group,
endpoint, resourceNames) merge their verbs. Wildcards are never generated or accepted, and the
runtime ServiceAccount never receives rights to install CRDs, RBAC or webhook configurations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from cloudcoil_sync._internal.names import dns_label

__all__ = [
    "READ_VERBS",
    "ApiIdentity",
    "ControllerAccess",
    "IdentityTable",
    "Permissions",
    "RuleAccess",
    "infer_permissions",
]

Scope = Literal["Namespaced", "Cluster"]
READ_VERBS = ("get", "list", "watch")
RBAC_API = "rbac.authorization.k8s.io/v1"
_EVENTS = ("events.k8s.io", "events")
_LEASES = ("coordination.k8s.io", "leases")


@dataclass(frozen=True)
class ApiIdentity:
    """What RBAC needs to know about a kind: API group, plural, scope, status subresource."""

    group: str
    plural: str
    scope: Scope
    status: bool = False


def _kind_key(resource: type[Any]) -> tuple[str, str]:
    gvk = resource.gvk()
    return str(gvk.group), str(gvk.kind)


def _marker_identity(resource: type[Any]) -> ApiIdentity | None:
    # Not inherited: a subclass must redeclare its own plural.
    marker = resource.__dict__.get("__cloudcoil_crd__")
    if marker is None:
        return None
    status = getattr(marker, "status", None)
    has_status = status is True or (status is None and "status" in resource.model_fields)
    group = getattr(marker, "group", None) or _kind_key(resource)[0]
    return ApiIdentity(group, marker.plural, getattr(marker, "scope", "Namespaced"), has_status)


def _builtin_identity(resource: type[Any]) -> ApiIdentity | None:
    from cloudcoil_sync.client import UnknownKind
    from cloudcoil_sync.client._internal.rest import lookup

    gvk = resource.gvk()
    try:
        mapping = lookup((str(gvk.api_version), str(gvk.kind)))
    except UnknownKind:
        return None
    scope: Scope = "Namespaced" if mapping.namespaced else "Cluster"
    return ApiIdentity(mapping.group, mapping.plural, scope, "status" in mapping.subresources)


class IdentityTable:
    """Plural/scope/status per (group, kind), with conflicting declarations rejected."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], ApiIdentity] = {}

    def declare(self, resource: type[Any] | tuple[str, str], identity: ApiIdentity) -> None:
        """Record ``identity`` for a model class or a (group, kind) pair."""
        group, kind = key = resource if isinstance(resource, tuple) else _kind_key(resource)
        previous = self._known.get(key)
        if previous is not None and (previous.plural, previous.scope) != (
            identity.plural,
            identity.scope,
        ):
            raise ValueError(f"Conflicting plural/scope declarations for {group}/{kind}")
        status = identity.status or bool(previous and previous.status)
        self._known[key] = ApiIdentity(identity.group, identity.plural, identity.scope, status)

    def declare_crd(self, manifest: Mapping[str, Any]) -> None:
        spec = manifest["spec"]
        status = any("status" in (v.get("subresources") or {}) for v in spec["versions"])
        identity = ApiIdentity(spec["group"], spec["names"]["plural"], spec["scope"], status)
        self.declare((spec["group"], spec["names"]["kind"]), identity)

    def declare_rule(self, rule: RuleAccess) -> None:
        """Take plural/scope from an RBACRule: both, or one completing a known kind."""
        if rule.plural is None and rule.scope is None:
            return
        known = self.known(rule.resource)
        if rule.plural is not None and rule.scope is not None:
            group = known.group if known else _kind_key(rule.resource)[0]
            self.declare(rule.resource, ApiIdentity(group, rule.plural, rule.scope))
            return
        if known is None:
            raise ValueError(f"Provide both plural and scope for {rule.resource.__name__}")
        plural = rule.plural or known.plural
        self.declare(rule.resource, ApiIdentity(known.group, plural, rule.scope or known.scope))

    def known(self, resource: type[Any]) -> ApiIdentity | None:
        """Declared identity, else built-in table, else ``@custom_resource`` metadata."""
        key = _kind_key(resource)
        found = self._known.get(key)
        if found is None:
            found = _builtin_identity(resource) or _marker_identity(resource)
            if found is not None:
                self._known[key] = found
        return found

    def resolve(self, resource: type[Any]) -> ApiIdentity:
        found = self.known(resource)
        if found is None:
            name = resource.__name__
            raise ValueError(
                f"Offline RBAC needs plural and scope for {name}; "
                f"add RBACRule({name}, verbs=(...), plural=..., scope=...)"
            )
        return found


@dataclass(frozen=True)
class ControllerAccess:
    """What one controller does against the API, in RBAC terms.

    ``namespace=None`` means all namespaces. ``owns`` pairs each owned kind with its prune flag.
    ``events_namespace`` is where a cluster-scoped primary's Events go (None: operator namespace).
    """

    resource: type[Any]
    namespace: str | None
    owns: tuple[tuple[type[Any], bool], ...] = ()
    watches: tuple[type[Any], ...] = ()
    events: bool = True
    events_namespace: str | None = None
    namespaces: tuple[str, ...] = ()  # a list of namespaces: a Role in each, no ClusterRole
    namespace_selector: str | None = None  # selected namespaces: a ClusterRole


@dataclass(frozen=True)
class RuleAccess:
    """The fields of an ``RBACRule`` (any object with these attributes works)."""

    resource: type[Any]
    verbs: tuple[str, ...]
    plural: str | None = None
    scope: Scope | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    subresources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    @classmethod
    def of(cls, rule: Any) -> RuleAccess:
        if isinstance(rule, RuleAccess):
            return rule
        return cls(
            rule.resource,
            tuple(rule.verbs),
            getattr(rule, "plural", None),
            getattr(rule, "scope", None),
            getattr(rule, "namespace", None),
            bool(getattr(rule, "all_namespaces", False)),
            tuple(getattr(rule, "subresources", ())),
            tuple(getattr(rule, "resource_names", ())),
        )


_RuleKey = tuple[str, str, tuple[str, ...]]


class Permissions:
    """Grant buckets: ``None`` → ClusterRole, a namespace → Role in it."""

    def __init__(self) -> None:
        self._buckets: dict[str | None, dict[_RuleKey, set[str]]] = defaultdict(
            lambda: defaultdict(set)
        )

    def grant(
        self,
        api: ApiIdentity,
        verbs: Iterable[str],
        namespace: str | None,
        *,
        subresources: Sequence[str] = (),
        names: Sequence[str] = (),
    ) -> None:
        verbs = tuple(verbs)
        for value in (*verbs, *subresources, *names, api.plural):
            if "*" in value:
                raise ValueError(f"RBAC wildcards are never generated or accepted: {value!r}")
        target = None if api.scope == "Cluster" else namespace
        endpoints = [f"{api.plural}/{sub}" for sub in subresources] or [api.plural]
        for endpoint in endpoints:
            self._buckets[target][(api.group, endpoint, tuple(sorted(set(names))))].update(verbs)

    def rules(self, target: str | None) -> list[dict[str, Any]]:
        """PolicyRules of one bucket, sorted by (group, endpoint, resourceNames)."""
        rules = []
        for (group, endpoint, names), verbs in sorted(self._buckets.get(target, {}).items()):
            rule: dict[str, Any] = {
                "apiGroups": [group],
                "resources": [endpoint],
                "verbs": sorted(verbs),
            }
            if names:
                rule["resourceNames"] = list(names)
            rules.append(rule)
        return rules

    def targets(self) -> list[str | None]:
        """Buckets in document order: the cluster bucket first, then namespaces sorted."""
        return sorted(self._buckets, key=lambda target: (target is not None, target or ""))

    def documents(self, *, name: str, namespace: str) -> list[dict[str, Any]]:
        """ClusterRole/Role documents, each followed by its binding to the operator's SA.

        Every role is named ``<name>.<namespace>`` (the operator's install namespace), so the
        same operator installed in two namespaces gets distinct cluster-scoped objects.
        """
        role_name = f"{name}.{namespace}"
        subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        documents: list[dict[str, Any]] = []
        for target in self.targets():
            kind = "ClusterRole" if target is None else "Role"
            metadata: dict[str, str] = {"name": role_name}
            if target is not None:
                metadata["namespace"] = target
            documents.append(
                {
                    "apiVersion": RBAC_API,
                    "kind": kind,
                    "metadata": dict(metadata),
                    "rules": self.rules(target),
                }
            )
            documents.append(
                {
                    "apiVersion": RBAC_API,
                    "kind": f"{kind}Binding",
                    "metadata": dict(metadata),
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": kind,
                        "name": role_name,
                    },
                    "subjects": [dict(subject)],
                }
            )
        return documents


def infer_permissions(
    *,
    namespace: str,
    controllers: Sequence[ControllerAccess],
    rules: Sequence[Any] = (),
    crds: Sequence[tuple[type[Any], Mapping[str, Any]]] = (),
    lease: tuple[str, str | None] | None = None,
    shard_leases: str | None = None,
) -> Permissions:
    """The operator's runtime permissions (reference table, 0.8 semantics plus pruning).

    ``namespace`` is the operator namespace; ``crds`` pairs each CRD's model with its manifest;
    ``lease`` is the leader-election (name, namespace or None) if election is configured;
    ``shard_leases`` the namespace of a sharded operator's Leases (their names are per Pod).
    """
    table = IdentityTable()
    for _, manifest in crds:
        table.declare_crd(manifest)
    accesses = [RuleAccess.of(rule) for rule in rules]
    for access in accesses:
        table.declare_rule(access)

    permissions = Permissions()
    for controller in controllers:
        for scoped in _scoped(controller):
            _controller_grants(permissions, table, scoped, namespace)
    for access in accesses:
        api = table.resolve(access.resource)
        if api.scope == "Cluster" and access.namespace is not None:
            raise ValueError("Cluster resources cannot have a namespaced RBACRule")
        target = None if access.all_namespaces else access.namespace or namespace
        if target is not None:
            dns_label(target, "RBAC namespace")
        permissions.grant(
            api,
            access.verbs,
            target,
            subresources=access.subresources,
            names=access.resource_names,
        )
    if lease is not None:
        lease_name, lease_namespace = lease
        lease_namespace = dns_label(lease_namespace or namespace, "Leader election namespace")
        leases = ApiIdentity(*_LEASES, "Namespaced")
        permissions.grant(leases, ("create",), lease_namespace)
        # watch: standbys wait on the Lease instead of polling it (a release wakes them).
        permissions.grant(leases, ("get", "update", "watch"), lease_namespace, names=(lease_name,))
    if shard_leases is not None:
        # Each replica creates and renews its own shard Lease; the coordinator lists and
        # watches them all and competes for the ring Lease. Objects: the primary and owned
        # kinds already have `patch` (the assignment labels).
        verbs = ("create", "get", "list", "watch", "update", "patch")
        permissions.grant(ApiIdentity(*_LEASES, "Namespaced"), verbs, shard_leases)
    return permissions


def _scoped(controller: ControllerAccess) -> list[ControllerAccess]:
    """One access per listed namespace (a Role in each); every namespace (a ClusterRole)
    when a selector picks them while running, plus reading the namespaces."""
    if controller.namespace_selector is not None:
        return [replace(controller, namespace=None)]
    return [replace(controller, namespace=n) for n in controller.namespaces] or [controller]


def _controller_grants(
    permissions: Permissions, table: IdentityTable, controller: ControllerAccess, namespace: str
) -> None:
    primary = table.resolve(controller.resource)
    if controller.namespace_selector is not None:
        permissions.grant(ApiIdentity("", "namespaces", "Cluster"), ("list", "watch"), None)
    watched = controller.namespace
    if watched is not None:
        dns_label(watched, "Controller namespace")
    permissions.grant(primary, (*READ_VERBS, "patch"), watched)
    if primary.status:
        permissions.grant(primary, ("patch",), watched, subresources=("status",))
    if controller.events:
        events_namespace = (
            controller.events_namespace or namespace if primary.scope == "Cluster" else watched
        )
        permissions.grant(ApiIdentity(*_EVENTS, "Namespaced"), ("create",), events_namespace)
    # A cluster-scoped owner sees (and writes) its namespaced children in every namespace.
    children = None if primary.scope == "Cluster" else watched
    for kind, prune in controller.owns:
        verbs = (*READ_VERBS, "create", "patch", *(("delete",) if prune else ()))
        permissions.grant(table.resolve(kind), verbs, children)
    for kind in controller.watches:
        permissions.grant(table.resolve(kind), READ_VERBS, children)
