"""AdmissionReview v1 as kube-apiserver writes and reads it: the request sent to a webhook,
the checks on its answer, denials, JSONPatch mutations and the status split after them."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.admission_match import Attempt, is_namespace
from cloudcoil_sync.testing._internal.patch import PatchError, apply_json_patch
from cloudcoil_sync.testing._internal.request import Req

__all__ = [
    "REVIEW",
    "CallFailed",
    "denied",
    "internal",
    "options_for",
    "patched",
    "response_of",
    "review",
    "status_split",
]

JSON = dict[str, Any]
REVIEW = "admission.k8s.io/v1"
_OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


class CallFailed(Exception):
    """A webhook call that did not produce a usable review (failurePolicy decides)."""


def options_for(operation: str, req: Req) -> JSON:
    options: JSON = {"kind": _OPTIONS[operation], "apiVersion": "meta.k8s.io/v1"}
    if req.dry_run:
        options["dryRun"] = ["All"]
    if req.query.get("fieldManager"):
        options["fieldManager"] = req.query["fieldManager"]
    return options


def review(uid: str, attempt: Attempt) -> JSON:
    req = attempt.req
    rt = req.rt
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    # For Namespace objects kube-apiserver reports the namespace's own name (since 1.20,
    # kubernetes/kubernetes#95012, for every operation).
    namespace = req.name if is_namespace(req) else req.namespace
    user = req.user
    request: JSON = {
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": req.name,
        "namespace": namespace,
        "operation": attempt.operation,
        "userInfo": {
            "username": user.name if user else "",
            "groups": list(user.groups) if user else [],
        },
        "object": attempt.obj,
        "oldObject": attempt.old,
        "dryRun": attempt.dry_run,
        "options": attempt.options,
    }
    if req.subresource:
        request["subResource"] = request["requestSubResource"] = req.subresource
    return {"apiVersion": REVIEW, "kind": "AdmissionReview", "request": request}


def response_of(document: Any, uid: str) -> JSON:
    """The ``response`` of a well-formed review answering ``uid``."""
    if not isinstance(document, dict):
        raise CallFailed("received invalid webhook response: not an object")
    if document.get("apiVersion") != REVIEW or document.get("kind") != "AdmissionReview":
        raise CallFailed(
            "received invalid webhook response: expected webhook response of "
            f"{REVIEW}, Kind=AdmissionReview, got {document.get('apiVersion')}, "
            f"Kind={document.get('kind')}"
        )
    response = document.get("response")
    if not isinstance(response, dict):
        raise CallFailed("received invalid webhook response: response is missing")
    if response.get("uid") != uid:
        raise CallFailed(
            f'received invalid webhook response: expected response.uid="{uid}", '
            f'got "{response.get("uid")}"'
        )
    if not isinstance(response.get("allowed"), bool):
        raise CallFailed("received invalid webhook response: response.allowed is not a bool")
    return response


def denied(name: str, status: Any) -> st.ApiError:
    """kube-apiserver's rejection for ``allowed: false`` with the webhook's ``status``."""
    result = status if isinstance(status, dict) else {}
    code = result.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    reason = str(result.get("reason") or "")
    by = f'admission webhook "{name}" denied the request'
    if result.get("message"):
        message = f"{by}: {result['message']}"
    elif reason:
        message = f"{by}: {reason}"
    else:
        message = f"{by} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return st.ApiError(code, reason, message, details)


def patched(webhook: JSON, obj: JSON, response: JSON) -> JSON:
    """``obj`` with the response's JSONPatch applied (a new object), else ``obj`` itself."""
    patch = response.get("patch")
    if patch is None:
        return obj
    name = webhook.get("name", "")
    if response.get("patchType") != "JSONPatch":
        raise internal(
            f'webhook "{name}" returned a patch with patchType {response.get("patchType")!r}'
        )
    try:
        ops = json.loads(base64.b64decode(str(patch), validate=True))
        result = apply_json_patch(obj, ops)
    except (ValueError, binascii.Error) as exc:
        raise internal(f'webhook "{name}" returned an undecodable patch: {exc}') from None
    except PatchError as exc:
        raise internal(
            f'webhook "{name}" returned a patch that cannot be applied: {exc.why}'
        ) from None
    if not isinstance(result, dict) or _identity(result) != _identity(obj):
        raise internal(f'webhook "{name}" changed the apiVersion, kind, name or namespace')
    return result


def status_split(req: Req, before: JSON, after: JSON) -> JSON:
    """Keep only what the endpoint may change, as the strategies after admission do: a
    ``/status`` write keeps only the new status, any other write keeps the old status."""
    if req.subresource == "status":
        kept = {**before, "status": after.get("status")}
    else:
        kept = {**after, "status": before.get("status")}
    if kept["status"] is None:
        del kept["status"]
    return kept


def internal(message: str) -> st.ApiError:
    return st.ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def _identity(obj: JSON) -> tuple[Any, ...]:
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("name"), meta.get("namespace")
