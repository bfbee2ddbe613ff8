"""Who a request acts as: impersonation headers, and SelfSubjectAccessReview (``auth can-i``).

``Impersonate-User`` / ``Impersonate-Group`` (``kubectl --as``/``--as-group``) replace the
caller's identity when the caller may ``impersonate`` users (and groups): the admin may, others
need an RBAC grant, as in kube-apiserver. ``Impersonate-Uid`` and ``Impersonate-Extra-*`` are
not supported (a 400 says so). A SelfSubjectAccessReview is answered for the (possibly
impersonated) caller from the same RBAC evaluation as its requests; every authenticated user
may create one. Non-resource URLs are allowed by ClusterRole ``nonResourceURLs`` rules bound
cluster-wide (exact paths, or a prefix ending in ``*``); the discovery, version, OpenAPI and
health paths are open to every authenticated user, as the emulator serves them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import status as st
from .rbac import Attributes, User

if TYPE_CHECKING:
    from .crud import Req
    from .rbac import Authorizer

__all__ = ["SELF_ACCESS_REVIEWS", "impersonated", "self_access_review"]

JSON = dict[str, Any]
SELF_ACCESS_REVIEWS = ("authorization.k8s.io", "selfsubjectaccessreviews")
_OPEN_PATHS = ("/api", "/apis", "/version", "/healthz", "/readyz", "/livez", "/openapi")


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
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(non_resource, dict):
        raise st.invalid(
            "SelfSubjectAccessReview",
            "authorization.k8s.io",
            "",
            [
                (
                    "FieldValueRequired",
                    "spec.resourceAttributes",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            ],
        )
    if isinstance(resource, dict):
        attrs = Attributes(
            str(resource.get("verb", "")),
            str(resource.get("group", "")),
            str(resource.get("resource", "")),
            str(resource.get("subresource", "")),
            str(resource.get("namespace", "")),
            str(resource.get("name", "")),
        )
        allowed = authorizer.allowed(user, attrs)
    else:
        assert isinstance(non_resource, dict)
        path, verb = str(non_resource.get("path", "")), str(non_resource.get("verb", ""))
        allowed = _non_resource_allowed(authorizer, user, verb, path)
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": {"allowed": allowed},
    }


def _non_resource_allowed(authorizer: Authorizer, user: User, verb: str, path: str) -> bool:
    if user.admin or "system:masters" in user.groups:
        return True
    if verb == "get" and any(path == p or path.startswith(p + "/") for p in _OPEN_PATHS):
        return "system:authenticated" in user.groups
    for scope, rules in authorizer.grants(user):
        if scope is not None:
            continue  # RoleBindings cannot grant non-resource URLs
        for rule in rules:
            verbs = rule.get("verbs") or []
            urls = rule.get("nonResourceURLs") or []
            if ("*" in verbs or verb in verbs) and any(_url_matches(u, path) for u in urls):
                return True
    return False


def _url_matches(rule: str, path: str) -> bool:
    return rule == path or (rule.endswith("*") and path.startswith(rule[:-1]))
