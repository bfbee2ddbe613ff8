"""The ``serviceaccounts/token`` subresource (TokenRequest), as ``kubectl create token`` uses it.

The token is accepted by this emulator as the ServiceAccount (RBAC applies to it). It has a
JWT's shape and claims (``iss``, ``sub``, ``aud``, ``exp``, ``kubernetes.io``) so that tools
reading them work, but its signature is random (verify nothing with it) and it does not expire
here: ``exp`` is reported as asked (default one hour) but not enforced, and deleting the
ServiceAccount does not revoke it.
"""

from __future__ import annotations

import base64
import datetime
import json
import secrets
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.crud import Req

if TYPE_CHECKING:
    from cloudcoil_sync.testing._internal.backend import Backend

__all__ = ["DEFAULT_AUDIENCE", "token_claims", "token_request"]

JSON = dict[str, Any]
DEFAULT_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
_DEFAULT_SECONDS = 3600
_MIN_SECONDS = 600  # kube-apiserver's lower bound for expirationSeconds
_TOO_SHORT = "may not specify a duration less than 10 minutes"


def _spec(body: Any) -> JSON:
    if body is None:
        return {}
    if not isinstance(body, dict) or body.get("kind", "TokenRequest") != "TokenRequest":
        raise st.bad_request("the body of a token request must be a TokenRequest")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise st.bad_request("TokenRequest spec must be an object")
    return spec


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _jwt(
    namespace: str,
    name: str,
    account: JSON,
    audiences: list[str],
    issued: datetime.datetime,
    expires: datetime.datetime,
) -> str:
    claims = {
        "aud": audiences,
        "exp": int(expires.timestamp()),
        "iat": int(issued.timestamp()),
        "iss": DEFAULT_AUDIENCE,
        "jti": secrets.token_hex(16),
        "kubernetes.io": {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": (account.get("metadata") or {}).get("uid")},
        },
        "nbf": int(issued.timestamp()),
        "sub": f"system:serviceaccount:{namespace}:{name}",
    }
    signature = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    return f"{_b64({'alg': 'RS256', 'kid': 'cloudcoil-sync-emulator'})}.{_b64(claims)}.{signature}"


def token_claims(token: str) -> JSON | None:
    """The claims of a JWT-shaped token (one from TokenRequest); None for any other token."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


def token_request(emu: Backend, req: Req) -> tuple[int, JSON]:
    """Answer ``POST .../serviceaccounts/<name>/token`` (201 and a TokenRequest)."""
    account = emu.store.get(req.rt.key, req.namespace, req.name)
    if account is None:
        raise st.not_found("serviceaccounts", "", req.name)
    spec = _spec(req.body)
    seconds = spec.get("expirationSeconds") or _DEFAULT_SECONDS
    if not isinstance(seconds, int) or seconds < _MIN_SECONDS:
        raise st.invalid(
            "TokenRequest",
            "authentication.k8s.io",
            req.name,
            [("FieldValueInvalid", "spec.expirationSeconds", _TOO_SHORT)],
        )
    audiences = spec.get("audiences") or [DEFAULT_AUDIENCE]
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    expires = now + datetime.timedelta(seconds=seconds)
    token = _jwt(req.namespace, req.name, account, list(audiences), now, expires)
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{req.namespace}")
    emu.add_token(token, f"system:serviceaccount:{req.namespace}:{req.name}", groups)
    asked = {k: spec[k] for k in ("audiences", "boundObjectRef") if spec.get(k)}
    fields = req.answered_fields(
        "authentication.k8s.io/v1", {"spec": {**asked, "expirationSeconds": seconds}}, "token"
    )
    return 201, {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": req.name,
            "namespace": req.namespace,
            "creationTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "managedFields": fields,
        },
        "spec": {
            "audiences": list(audiences),
            "expirationSeconds": seconds,
            "boundObjectRef": spec.get("boundObjectRef"),
        },
        "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }
