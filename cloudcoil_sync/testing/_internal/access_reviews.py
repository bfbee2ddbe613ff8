"""TokenReview and SubjectAccessReview, as kube-apiserver answers them.

A delegated authenticator (an operator guarding its `/metrics`) posts a TokenReview to learn
who a bearer token belongs to, then a SubjectAccessReview to learn whether that user may do
something: a resource verb (`resourceAttributes`) or a non-resource one (`nonResourceAttributes`,
e.g. `get` on `/metrics`, granted by ClusterRole rules with `nonResourceURLs` bound by
ClusterRoleBindings). Both are answered 201 with the request echoed and its `status` filled
in (with kube-apiserver's RBAC reason and managedFields); nothing is stored. A TokenReview
reports the ServiceAccount's uid and the token's id (``extra``) and the audiences asked (the
server's by default). Simplification: a SubjectAccessReview's `uid` and `extra` are echoed, not
used for decisions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.identity import access_decision, answered, review_invalid
from cloudcoil_sync.testing._internal.rbac import User
from cloudcoil_sync.testing._internal.tokens import DEFAULT_AUDIENCE, token_claims

if TYPE_CHECKING:
    from cloudcoil_sync.testing._internal.crud import Req
    from cloudcoil_sync.testing._internal.rbac import Authorizer

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
    if req.rt.key == TOKEN_REVIEWS:
        return answered(req, "TokenReview", body, spec, _token(authorizer, spec))
    return answered(req, "SubjectAccessReview", body, spec, _access(authorizer, spec))


def _token(authorizer: Authorizer, spec: JSON) -> JSON:
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise st.bad_request("spec.token is required")
    user = authorizer.authenticate(f"Bearer {token}")
    if user is None:
        return {"user": {}, "error": "invalid bearer token"}
    claims = token_claims(token)
    wanted = list(spec.get("audiences") or [DEFAULT_AUDIENCE])
    if claims is not None and not set(wanted) & set(claims.get("aud") or []):
        return {"user": {}, "error": "token audiences are invalid for the target audiences"}
    info: JSON = {"username": user.name}
    uid = authorizer.account_uid(user.name)
    if uid:
        info["uid"] = uid
    info["groups"] = list(user.groups)
    if claims is not None and claims.get("jti"):
        info["extra"] = {"authentication.kubernetes.io/credential-id": [f"JTI={claims['jti']}"]}
    audiences = [a for a in wanted if claims is None or a in (claims.get("aud") or [])]
    return {"authenticated": True, "user": info, "audiences": audiences}


def _access(authorizer: Authorizer, spec: JSON) -> JSON:
    name = spec.get("user") or ""
    groups = tuple(spec.get("groups") or ())
    if not name and not groups:
        raise review_invalid("spec.user", "", "at least one of user or group must be specified")
    user = User(str(name), tuple(str(group) for group in groups))
    return access_decision(authorizer, user, spec)
