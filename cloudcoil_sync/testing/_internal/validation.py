"""Validation, defaulting and version conversion for the kinds whose rules operators meet."""

from __future__ import annotations

import base64
import contextlib
from typing import Any

from cloudcoil_sync.testing._internal.deployment_validation import deployment_causes
from cloudcoil_sync.testing._internal.go_base64 import check_bytes_fields
from cloudcoil_sync.testing._internal.object_meta import (
    Cause,
    config_key_messages,
    invalid_value,
    meta_causes,
)
from cloudcoil_sync.testing._internal.resources import ResourceType
from cloudcoil_sync.testing._internal.status import ApiError, invalid

__all__ = [
    "apply_defaults",
    "check_kind",
    "from_storage",
    "prepare_for_create",
    "to_storage",
    "validate",
    "write_warnings",
]

JSON = dict[str, Any]
_SECRET_LIMIT = 1048576


def validate(rt: ResourceType, obj: JSON, api_group: str) -> None:
    """Raise 422 Invalid for the rules kube-apiserver enforces that operators trip over."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    rbac = rt.group == "rbac.authorization.k8s.io"  # path-segment names: "system:x" is valid
    kind_names = "label" if rt.plural == "namespaces" else "path" if rbac else "subdomain"
    # apiextensions validates metadata with apimachinery's rules only (its CRD cleanup
    # finalizer has no '/'); the kinds of k8s.io/kubernetes add core's finalizer rule.
    core = rt.group != "apiextensions.k8s.io"
    causes = meta_causes(meta, names=kind_names, builtin=core)
    if rbac:
        bad = next((s for s in ("/", "%") if s in name), None)
        if not name:
            message = "Required value: name or generateName is required"
            causes.insert(0, ("FieldValueRequired", "metadata.name", message))
        elif name in (".", "..") or bad:
            why = f"may not contain '{bad}'" if bad else f"may not be '{name}'"
            causes.insert(
                0, ("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {why}')
            )
    if rt.kind == "Deployment" and rt.group == "apps":
        causes += deployment_causes(obj)
    if rt.kind == "ConfigMap" and rt.group == "":
        causes += _config_map_causes(obj)
    elif rt.kind == "Secret" and rt.group == "":
        causes += _secret_causes(obj)
    if api_group == "events.k8s.io" and rt.kind == "Event" and not obj.get("eventTime"):
        causes.append(("FieldValueRequired", "eventTime", "Required value"))
    if rt.kind == "CustomResourceDefinition":
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
        if name and name != expected:
            causes.append(
                (
                    "FieldValueInvalid",
                    "metadata.name",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                )
            )
    if causes:
        # Events validate as the internal core kind: no group in the details.
        group = "" if rt.kind == "Event" else rt.group
        raise invalid(rt.kind, group, name, causes)


def _deployment_defaults(spec: JSON) -> None:
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    _pod_spec_defaults(template.setdefault("spec", {}))


def _pod_spec_defaults(pod: JSON) -> None:
    for container in pod.get("containers") or []:
        container.setdefault("resources", {})
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = str(container.get("image", ""))
        latest = image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    pod.setdefault("restartPolicy", "Always")
    pod.setdefault("terminationGracePeriodSeconds", 30)
    pod.setdefault("dnsPolicy", "ClusterFirst")
    pod.setdefault("securityContext", {})
    pod.setdefault("schedulerName", "default-scheduler")


def _drop_empty(obj: JSON, keys: tuple[str, ...]) -> None:
    for key in keys:
        if obj.get(key) == {}:
            del obj[key]


def apply_defaults(rt: ResourceType, obj: JSON, creating: bool) -> None:
    """Server-side defaults for the kinds where tests compare them (mutates ``obj``)."""
    kind = rt.kind
    # Typed maps kube-apiserver encodes with omitempty: an empty one is not stored.
    if isinstance(obj.get("metadata"), dict):
        _drop_empty(obj["metadata"], ("labels", "annotations"))
    if kind in ("ConfigMap", "Secret") and rt.group == "":  # []byte maps, decoded as Go does
        check_bytes_fields(kind, obj, "data" if kind == "Secret" else "binaryData")
    if kind == "Secret" and rt.group == "":
        _secret_defaults(obj)
    if kind in ("ConfigMap", "Secret") and rt.group == "":
        _drop_empty(obj, ("data", "binaryData", "stringData"))
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet") and rt.group == "apps":
        if kind == "Deployment":
            _deployment_defaults(obj.setdefault("spec", {}))
        if creating:
            obj.setdefault("status", {})
    elif kind == "Pod" and rt.group == "":
        _pod_spec_defaults(obj.setdefault("spec", {}))
    elif kind == "Namespace" and rt.group == "":
        name = obj["metadata"].get("name", "")
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = name
    elif kind == "CustomResourceDefinition":
        spec = obj.setdefault("spec", {})
        spec.setdefault("conversion", {"strategy": "None"})
        names = spec.get("names")
        if isinstance(names, dict) and names.get("kind"):  # apiextensions' SetDefaults
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        if creating:
            stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
            obj["status"] = {
                "conditions": None,
                "acceptedNames": {"plural": "", "kind": ""},
                "storedVersions": stored,
            }


def prepare_for_create(rt: ResourceType, obj: JSON) -> None:
    """Strategy fields set after managedFields are computed (so nobody owns them)."""
    if rt.kind == "Namespace" and rt.group == "":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}


# events.k8s.io/v1 field ↔ core/v1 field (storage is core/v1).
_EVENT_FIELDS = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_EVENT_DEFAULTS: dict[str, Any] = {"source": {}, "firstTimestamp": None, "lastTimestamp": None}


def _is_events_v1(rt: ResourceType) -> bool:
    return rt.group == "events.k8s.io" and rt.kind == "Event"


def to_storage(rt: ResourceType, obj: JSON) -> JSON:
    """Convert an object written through ``rt`` into its storage form."""
    if rt.converter is not None:  # a CRD converting by webhook (conversion.py)
        return rt.converter.to_storage(obj)  # type: ignore[no-any-return]
    if _is_events_v1(rt):
        out = {_EVENT_FIELDS.get(k, k): v for k, v in obj.items()}
        out["apiVersion"] = "v1"
        for key, value in _CORE_EVENT_DEFAULTS.items():
            out.setdefault(key, value)
        return out
    if rt.kind == "Event" and rt.group == "":
        for key, value in _CORE_EVENT_DEFAULTS.items():
            obj.setdefault(key, value)
    return obj


def from_storage(rt: ResourceType, obj: JSON) -> JSON:
    """Present a stored object through ``rt`` (apiVersion, kind and event field names)."""
    if rt.converter is not None and obj.get("apiVersion") != rt.api_version:
        return rt.converter.convert(obj, rt.api_version)  # type: ignore[no-any-return]
    if _is_events_v1(rt):
        back = {v: k for k, v in _EVENT_FIELDS.items()}
        out = {back.get(k, k): v for k, v in obj.items()}
        out["apiVersion"] = rt.api_version
        out["kind"] = rt.kind
        return out
    if obj.get("apiVersion") != rt.api_version or obj.get("kind") != rt.kind:
        return {**obj, "kind": rt.kind, "apiVersion": rt.api_version}
    return obj


def check_kind(rt: ResourceType, obj: JSON) -> None:
    """A body whose kind/apiVersion names another type is rejected like kube-apiserver does."""
    kind = obj.get("kind")
    if kind and kind != rt.kind:
        raise ApiError(
            400,
            "BadRequest",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json, application/yaml (kind {kind!r} does not match {rt.kind!r})",
        )


def _config_map_causes(obj: JSON) -> list[Cause]:
    """ValidateConfigMap: data and binaryData keys, and no key in both."""
    causes: list[Cause] = []
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    for where, keys in (("data", data), ("binaryData", binary)):
        for key in keys:
            causes += _key_causes(where, key)
            if where == "data" and key in binary:
                message = "duplicate of key present in binaryData"
                causes.append(invalid_value(f"data[{key}]", key, message))
    return causes


def _key_causes(where: str, key: str) -> list[Cause]:
    """IsConfigMapKey's problems with a key of ``where`` (a ConfigMap's or a Secret's)."""
    return [invalid_value(f"{where}[{key}]", key, m) for m in config_key_messages(key)]


def _secret_defaults(obj: JSON) -> None:
    """stringData is write-only: merged into data (winning over a key in both) and dropped;
    an empty type is Opaque."""
    strings = obj.pop("stringData", None)
    if isinstance(strings, dict) and strings:
        data = obj.get("data")
        data = data if isinstance(data, dict) else {}
        obj["data"] = {
            **data,
            **{k: base64.b64encode(str(v).encode()).decode() for k, v in strings.items()},
        }
    if not obj.get("type"):
        obj["type"] = "Opaque"


def _secret_causes(obj: JSON) -> list[Cause]:
    """ValidateSecret: keys, the 1 MiB limit, and the keys a TLS Secret must have."""
    causes: list[Cause] = []
    data = obj.get("data") or {}
    size = 0
    for key, value in data.items():
        causes += _key_causes("data", key)
        with contextlib.suppress(ValueError, TypeError):
            size += len(base64.b64decode(str(value or ""), validate=True))
    if size > _SECRET_LIMIT:
        message = f"Too long: may not be more than {_SECRET_LIMIT} bytes"
        causes.append(("FieldValueTooLong", "data", message))
    if obj.get("type") == "kubernetes.io/tls":
        for key in ("tls.crt", "tls.key"):
            if key not in data:
                causes.append(("FieldValueRequired", f"data[{key}]", "Required value"))
    return causes


def write_warnings(rt: ResourceType, obj: JSON) -> list[str]:
    """What kube-apiserver accepts with a warning: a TLS Secret whose data holds no PEM
    (Go's tls.X509KeyPair error; a pair that does not match is not checked here)."""
    if rt.kind != "Secret" or rt.group != "" or obj.get("type") != "kubernetes.io/tls":
        return []
    data = obj.get("data") or {}
    for key, what in (("tls.crt", "certificate"), ("tls.key", "key")):
        with contextlib.suppress(ValueError, TypeError):
            if b"-----BEGIN" not in base64.b64decode(str(data.get(key) or ""), validate=True):
                return [f"tls: failed to find any PEM data in {what} input"]
    return []
