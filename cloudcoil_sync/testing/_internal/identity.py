"""Who a request acts as: impersonation headers, and SelfSubjectAccessReview (``auth can-i``).

``Impersonate-User`` / ``Impersonate-Group`` (``kubectl --as``/``--as-group``) replace the
caller's identity when the caller may ``impersonate`` users (and groups): the admin may, others
need an RBAC grant, as in kube-apiserver. ``Impersonate-Uid`` and ``Impersonate-Extra-*`` are
not supported (a 400 says so). A SelfSubjectAccessReview is answered for the (possibly
impersonated) caller from the same RBAC evaluation as its requests; every authenticated user
may create one. Non-resource URLs are allowed by ClusterRole ``nonResourceURLs`` rules bound
cluster-wide (exact paths, or a prefix ending in ``*``); the discovery, version, OpenAPI and
health paths are open to every authenticated user, as the emulator serves them, and anonymous
users may get ``/version``, ``/healthz``, ``/livez`` and ``/readyz`` only (403 elsewhere), as
kube-apiserver 1.32's bootstrap RBAC allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.rbac import MASTERS, Attributes, User

if TYPE_CHECKING:
    from cloudcoil_sync.testing._internal.crud import Req
    from cloudcoil_sync.testing._internal.rbac import Authorizer

__all__ = [
    "SELF_ACCESS_REVIEWS",
    "access_decision",
    "answered",
    "attributes",
    "decision",
    "impersonated",
    "non_resource_reason",
    "review_invalid",
    "self_access_review",
]

JSON = dict[str, Any]
SELF_ACCESS_REVIEWS = ("authorization.k8s.io", "selfsubjectaccessreviews")
_OPEN_PATHS = ("/api", "/apis", "/version", "/healthz", "/readyz", "/livez", "/openapi")
# kube-apiserver 1.32's system:public-info-viewer, bound to system:authenticated and
# system:unauthenticated: all that anonymous users may get.
_PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
_PUBLIC = (
    'RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of ClusterRole '
    '"system:public-info-viewer" to Group "system:unauthenticated"'
)
# kube-apiserver grants the open paths by its bootstrap binding system:discovery.
_DISCOVERY = (
    'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" '
    'to Group "system:authenticated"'
)
_REVIEWS_GROUP = "authorization.k8s.io"


def review_invalid(field: str, value: str, message: str) -> st.ApiError:
    """kube-apiserver's 422 for an access review's spec (its kind and name are empty)."""
    text = f'Invalid value: "{value}": {message}'
    cause = {"reason": "FieldValueInvalid", "message": text, "field": field}
    return st.ApiError(
        422,
        "Invalid",
        f'.{_REVIEWS_GROUP} "" is invalid: {field}: {text}',
        {"group": _REVIEWS_GROUP, "causes": [cause]},
    )


def answered(req: Req, kind: str, body: JSON, spec: JSON, status: JSON) -> JSON:
    """A review as kube-apiserver answers it: the request's spec, managedFields and status."""
    meta: JSON = {"creationTimestamp": None, **(body.get("metadata") or {})}
    fields = req.answered_fields(req.rt.api_version, {"spec": spec})
    if fields:
        meta["managedFields"] = fields
    return {
        "kind": kind,
        "apiVersion": req.rt.api_version,
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def impersonated(authorizer: Authorizer, caller: User, headers: Any) -> User:
    """``caller``, or the user its impersonation headers name (403 if it may not)."""
    name = headers.get("Impersonate-User")
    groups_header = headers.get("Impersonate-Group")
    if name is None and groups_header is None:
        return caller
    for key in headers:
        if key.startswith(("impersonate-extra-", "impersonate-uid")):
            raise st.bad_request(f"the emulator does not support the {key} header")
    if not name:
        raise st.bad_request("requested impersonation of groups without a user")
    groups = [g.strip() for g in (groups_header or "").split(",") if g.strip()]
    wanted = [("users", name)] + [("groups", group) for group in groups]
    for resource, value in wanted:
        attrs = Attributes("impersonate", "", resource, "", "", value)
        if not authorizer.allowed(caller, attrs):
            raise st.ApiError(
                403,
                "Forbidden",
                f'{resource} "{value}" is forbidden: User "{caller.name}" cannot impersonate '
                f'resource "{resource}" in API group "" at the cluster scope',
                {"name": value, "kind": resource},
            )
    if name.startswith("system:serviceaccount:"):
        namespace = name.split(":")[2] if name.count(":") >= 3 else ""
        groups += ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    admin = "system:masters" in groups
    return User(name, tuple(dict.fromkeys([*groups, "system:authenticated"])), admin)


def self_access_review(authorizer: Authorizer, req: Req) -> JSON:
    """The answered SelfSubjectAccessReview of ``req.user`` (201, nothing stored)."""
    body = req.body if isinstance(req.body, dict) else {}
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise st.bad_request("spec is required")
    user = req.user or User("system:anonymous", ("system:unauthenticated",))
    return answered(
        req, "SelfSubjectAccessReview", body, spec, access_decision(authorizer, user, spec)
    )


def access_decision(authorizer: Authorizer, user: User, spec: JSON) -> JSON:
    """The status of an access review's ``spec`` (resource or non-resource attributes) for
    ``user``; kube's 422 unless exactly one kind of attributes is given."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(non_resource, dict):
        raise review_invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    if isinstance(resource, dict):
        return decision(authorizer.reason(user, attributes(resource)))
    assert isinstance(non_resource, dict)
    path, verb = str(non_resource.get("path", "")), str(non_resource.get("verb", ""))
    return decision(non_resource_reason(authorizer, user, verb, path))


def attributes(resource: JSON) -> Attributes:
    return Attributes(
        str(resource.get("verb", "")),
        str(resource.get("group", "")),
        str(resource.get("resource", "")),
        str(resource.get("subresource", "")),
        str(resource.get("namespace", "")),
        str(resource.get("name", "")),
    )


def decision(reason: str | None) -> JSON:
    """A review's status: kube-apiserver gives a reason only when it allows."""
    return {"allowed": True, "reason": reason} if reason is not None else {"allowed": False}


def non_resource_reason(authorizer: Authorizer, user: User, verb: str, path: str) -> str | None:
    """Why ``user`` may ``verb`` the non-resource ``path``; None if it may not."""
    if user.admin or "system:masters" in user.groups:
        return MASTERS
    if verb == "get" and path in _PUBLIC_PATHS and "system:unauthenticated" in user.groups:
        return _PUBLIC
    if verb == "get" and any(path == p or path.startswith(p + "/") for p in _OPEN_PATHS):
        return _DISCOVERY if "system:authenticated" in user.groups else None
    for scope, rules, reason in authorizer.explained_grants(user):
        if scope is not None:
            continue  # RoleBindings cannot grant non-resource URLs
        for rule in rules:
            verbs = rule.get("verbs") or []
            urls = rule.get("nonResourceURLs") or []
            if ("*" in verbs or verb in verbs) and any(_url_matches(u, path) for u in urls):
                return reason
    return None


def _url_matches(rule: str, path: str) -> bool:
    return rule == path or (rule.endswith("*") and path.startswith(rule[:-1]))
