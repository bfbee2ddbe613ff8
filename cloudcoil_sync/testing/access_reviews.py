"""TokenReview and SubjectAccessReview, as kube-apiserver answers them.

A delegated authenticator (an operator guarding its `/metrics`) posts a TokenReview to learn
who a bearer token belongs to, then a SubjectAccessReview to learn whether that user may do
something: a resource verb (`resourceAttributes`) or a non-resource one (`nonResourceAttributes`,
e.g. `get` on `/metrics`, granted by ClusterRole rules with `nonResourceURLs` bound by
ClusterRoleBindings). Both are answered 201 with the request echoed and its `status` filled
in; nothing is stored. Simplification: `uid` and `extra` are echoed, not used for decisions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import status as st
from .rbac import Attributes, User

if TYPE_CHECKING:
    from .crud import Req
    from .rbac import Authorizer

__all__ = ["REVIEWS", "review"]

JSON = dict[str, Any]
TOKEN_REVIEWS = ("authentication.k8s.io", "tokenreviews")
ACCESS_REVIEWS = ("authorization.k8s.io", "subjectaccessreviews")
REVIEWS = frozenset({TOKEN_REVIEWS, ACCESS_REVIEWS})


def review(authorizer: Authorizer, req: Req) -> JSON:
    """The answered review for a create of one of REVIEWS."""
    body = req.body if isinstance(req.body, dict) else {}
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise st.bad_request("spec is required")
    kind = "TokenReview" if req.rt.key == TOKEN_REVIEWS else "SubjectAccessReview"
    status = _token(authorizer, spec) if kind == "TokenReview" else _access(authorizer, spec)
    return {
        "kind": kind,
        "apiVersion": f"{req.rt.group}/v1",
        "metadata": {"creationTimestamp": None, **(body.get("metadata") or {})},
        "spec": spec,
        "status": status,
    }


def _token(authorizer: Authorizer, spec: JSON) -> JSON:
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise st.bad_request("spec.token is required")
    user = authorizer.authenticate(f"Bearer {token}")
    if user is None:
        return {"user": {}, "error": "invalid bearer token"}
    return {
        "authenticated": True,
        "user": {"username": user.name, "groups": list(user.groups)},
        "audiences": list(spec.get("audiences") or []),
    }


def _access(authorizer: Authorizer, spec: JSON) -> JSON:
    name = spec.get("user") or ""
    groups = tuple(spec.get("groups") or ())
    if not name and not groups:
        raise st.bad_request("at least one of user or group must be specified")
    user = User(str(name), tuple(str(group) for group in groups))
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(non_resource, dict):
        raise st.bad_request("exactly one of nonResourceAttributes or resourceAttributes")
    if isinstance(non_resource, dict):
        allowed = _non_resource_allowed(
            authorizer, user, str(non_resource.get("verb", "")), str(non_resource.get("path", ""))
        )
    else:
        assert isinstance(resource, dict)
        attrs = Attributes(
            str(resource.get("verb", "")),
            str(resource.get("group", "")),
            str(resource.get("resource", "")),
            str(resource.get("subresource", "")),
            str(resource.get("namespace", "")),
            str(resource.get("name", "")),
        )
        allowed = authorizer.allowed(user, attrs)
    if allowed:
        return {"allowed": True, "reason": "allowed by RBAC"}
    return {"allowed": False}


def _non_resource_allowed(authorizer: Authorizer, user: User, verb: str, path: str) -> bool:
    if "system:masters" in user.groups:
        return True
    for scope, rules in authorizer.grants(user):
        if scope is not None:  # only ClusterRoleBindings grant non-resource URLs
            continue
        for rule in rules:
            verbs = rule.get("verbs") or []
            if ("*" in verbs or verb in verbs) and _url_matches(rule, path):
                return True
    return False


def _url_matches(rule: JSON, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url == path or url == "*" or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False
