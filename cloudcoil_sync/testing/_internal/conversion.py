"""Custom resources in several versions, converted as kube-apiserver 1.32 converts them.

A CRD with ``conversion.strategy: Webhook`` gets a `Converter` on each of its served types
(`resources.crd_types`): objects are stored in the storage version (a write in another
version is converted before it is stored) and converted to the version a client reads,
lists or watches, by a ConversionReview v1 POSTed over HTTPS to the CRD's
``conversion.webhook.clientConfig`` (URL or routed Service, ``caBundle`` trust, 30 s
deadline; `admission_transport`). A failed call or a ``Failure`` result is kube-apiserver's
500 ``conversion webhook for <group>/<version>, Kind=<kind> failed: <why>`` (recorded in
``tests/testing/kube_apiserver_conversion/``). Deprecated versions answer every request
with their ``Warning`` (`resources.crd_types`); ``status.storedVersions`` gains the storage
version on every update of the CRD's spec, and a version still listed there cannot leave
``spec.versions`` (422).
Simplification: each object is converted in its own review, for lists and watches too.
"""

from __future__ import annotations

import uuid
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.admission_review import CallFailed
from cloudcoil_sync.testing._internal.admission_transport import WebhookTransport

__all__ = [
    "Converter",
    "converter_for",
    "note_storage_version",
    "stored_version_causes",
]

JSON = dict[str, Any]
_TIMEOUT = 30  # kube-apiserver's fixed conversion webhook timeout
_REVIEW = "apiextensions.k8s.io/v1"
_CALL_FAILED = "failed to call webhook: "


class Converter:
    """Conversion of one CRD's objects through its webhook (thread-safe: no state of its
    own besides the CRD's settings; connections are the transport's)."""

    def __init__(self, transport: WebhookTransport, crd: JSON) -> None:
        spec = crd.get("spec") or {}
        self.transport = transport
        self.group = spec.get("group", "")
        self.kind = (spec.get("names") or {}).get("kind", "")
        versions = spec.get("versions") or []
        storage = next((v["name"] for v in versions if v.get("storage")), "")
        self.storage_api_version = f"{self.group}/{storage}"
        webhook = dict((spec.get("conversion") or {}).get("webhook") or {})
        self.webhook: JSON = {**webhook, "timeoutSeconds": _TIMEOUT}

    def to_storage(self, obj: JSON) -> JSON:
        return self.convert(obj, self.storage_api_version)

    def convert(self, obj: JSON, api_version: str) -> JSON:
        """``obj`` as ``api_version``; kube-apiserver's 500 when the webhook fails."""
        if obj.get("apiVersion") == api_version:
            return obj
        uid = str(uuid.uuid4())
        review = {
            "apiVersion": _REVIEW,
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": api_version, "objects": [obj]},
        }
        try:
            answer = self.transport.post(self.webhook, review)
        except CallFailed as failed:
            raise self._failed(obj, str(failed).removeprefix(_CALL_FAILED)) from None
        return self._converted(obj, answer, uid, api_version)

    def _converted(self, obj: JSON, answer: Any, uid: str, api_version: str) -> JSON:
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict) or response.get("uid") != uid:
            raise self._failed(obj, "conversion webhook response is not valid")
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise self._failed(obj, str(result.get("message") or "conversion failed"))
        objects = response.get("convertedObjects")
        if not isinstance(objects, list) or len(objects) != 1 or not isinstance(objects[0], dict):
            raise self._failed(obj, "expected 1 converted objects")
        out: JSON = objects[0]
        if out.get("apiVersion") != api_version:
            raise self._failed(
                obj, f"invalid apiVersion {out.get('apiVersion')!r} in the converted object"
            )
        before, after = obj.get("metadata") or {}, out.get("metadata") or {}
        for key in ("name", "namespace", "uid"):
            if before.get(key) != after.get(key):
                raise self._failed(obj, f"metadata.{key} changed by the conversion webhook")
        # Only labels and annotations may change; the rest of metadata is the stored one.
        metadata = {k: v for k, v in before.items() if k not in ("labels", "annotations")}
        metadata.update({k: after[k] for k in ("labels", "annotations") if after.get(k)})
        return {**out, "metadata": metadata}

    def _failed(self, obj: JSON, why: str) -> st.ApiError:
        gvk = f"{obj.get('apiVersion')}, Kind={obj.get('kind') or self.kind}"
        return st.ApiError(500, "", f"conversion webhook for {gvk} failed: {why}")


def converter_for(crd: JSON, transport: WebhookTransport | None) -> Converter | None:
    """The CRD's converter if it converts by webhook (and the emulator can call one)."""
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    if transport is None or conversion.get("strategy") != "Webhook":
        return None
    return Converter(transport, crd)


def note_storage_version(crd: JSON) -> None:
    """An update of the CRD's spec adds its storage version to ``status.storedVersions``."""
    versions = (crd.get("spec") or {}).get("versions") or []
    storage = next((v.get("name") for v in versions if v.get("storage")), None)
    status = crd.setdefault("status", {})
    stored = status.get("storedVersions") or []
    if storage and storage not in stored:
        status["storedVersions"] = [*stored, storage]


def stored_version_causes(crd: JSON) -> list[tuple[str, str, str]]:
    """A version still in ``status.storedVersions`` must stay in ``spec.versions``."""
    names = {v.get("name") for v in (crd.get("spec") or {}).get("versions") or []}
    stored = ((crd.get("status") or {}).get("storedVersions")) or []
    return [
        (
            "FieldValueInvalid",
            f"status.storedVersions[{i}]",
            f'Invalid value: "{name}": must appear in spec.versions',
        )
        for i, name in enumerate(stored)
        if name not in names
    ]
