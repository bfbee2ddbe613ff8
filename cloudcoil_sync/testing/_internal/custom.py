"""Custom resources written as kube-apiserver 1.32 writes them: their CRD's schema applied.

For each write of a custom resource (create, update, patch, apply; main resource or
``/status``): fields the schema does not declare are reported (``fieldValidation``: ``Warn``,
the default, as ``Warning`` headers; ``Strict`` as a 400 for a body, a 422 for a patch; a
server-side apply with one is a 500, as kube-apiserver's typed-patch error), then pruned; schema
defaults are filled; the object is validated (metadata name, structural schema, list types,
``/scale`` replica paths) and refused with kube-apiserver's 422 causes. Schemas are read from the
stored CRD and cached by its resourceVersion.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.cel_rules import CelUnavailable, CompiledRules, compile_rules
from cloudcoil_sync.testing._internal.object_meta import finalizer_warnings, meta_causes
from cloudcoil_sync.testing._internal.pruning import apply_schema_defaults, prune, unknown_fields
from cloudcoil_sync.testing._internal.ratcheting import ratchet
from cloudcoil_sync.testing._internal.request import Req
from cloudcoil_sync.testing._internal.resources import ResourceType
from cloudcoil_sync.testing._internal.schema_validation import (
    Cause,
    default_causes,
    go_value,
    list_type_causes,
    schema_causes,
)
from cloudcoil_sync.testing._internal.store import Store

__all__ = ["CustomResources", "CustomType", "at", "scale_paths"]

JSON = dict[str, Any]
_CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
# Causes after which kube-apiserver evaluates no CEL rule (apiextensions' hasBlockingErr).
_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
_UNCHECKED = (
    'Invalid value: "null": some validation rules were not checked because the object was '
    "invalid; correct the existing errors to complete validation"
)
_GO_TYPES = {bool: "bool", float: "float64", str: "string", dict: "map[string]interface {}"}


@dataclass(frozen=True)
class CustomType:
    """One served version of a CRD: its schema and subresources."""

    kind: str
    group: str
    version: str
    schema: JSON
    scale: JSON | None
    has_rules: bool
    rules: CompiledRules | None = None  # None with has_rules: CEL unavailable

    @property
    def qualified(self) -> str:
        return f"{self.kind}.{self.group}"


class CustomResources:
    """Schema lookups (cached per CRD resourceVersion) and the write-path steps."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], CustomType | None] = {}

    def lookup(self, rt: ResourceType) -> CustomType | None:
        if rt.builtin:
            return None
        crd = self.store.get(_CRDS, "", f"{rt.plural}.{rt.group}")
        if crd is None:
            return None
        key = (crd["metadata"]["name"], rt.version, str(crd["metadata"].get("resourceVersion")))
        with self._lock:
            if key not in self._cache:
                self._cache[key] = _custom_type(crd, rt.version)
            return self._cache[key]

    # -- decoding: unknown fields, pruning, defaults ------------------------------------------
    def check_unknown(self, req: Req, obj: JSON, how: str) -> None:
        """Report fields the schema does not declare, as the request's fieldValidation asks."""
        custom = self.lookup(req.rt)
        if custom is None or not isinstance(obj, dict):
            return
        paths = sorted(unknown_fields(custom.schema, obj))
        if not paths:
            return
        if how == "apply":
            raise _typed_patch_error(req, custom, obj, f".{paths[0]}: field not declared in schema")
        mode = req.query.get("fieldValidation") or "Warn"
        listed = ", ".join(f'unknown field "{p}"' for p in paths)
        if mode == "Strict" and how == "patch":
            raise _patch_strict(obj, listed)
        if mode == "Strict":
            raise st.bad_request(
                f'{custom.kind} in version "{custom.version}" cannot be handled as a '
                f"{custom.kind}: strict decoding error: {listed}"
            )
        if mode == "Warn":
            req.warnings.extend(f'299 - "unknown field \\"{p}\\""' for p in paths)

    def check_apply(self, req: Req, applied: JSON) -> None:
        """A server-side apply configuration must type-check (unknown fields, map-key dups)."""
        custom = self.lookup(req.rt)
        if custom is None:
            return
        self.check_unknown(req, applied, "apply")
        for _, field, _ in list_type_causes(custom.schema, applied, ""):
            keys = _dup_keys(custom.schema, applied, field)
            raise _typed_patch_error(req, custom, applied, f"{keys}")

    def default(self, rt: ResourceType, obj: JSON) -> None:
        """Fill schema defaults only (what reading a stored object adds), in place."""
        custom = self.lookup(rt)
        if custom is not None:
            apply_schema_defaults(custom.schema, obj)

    def normalise(self, rt: ResourceType, obj: JSON) -> None:
        """Prune undeclared fields and fill defaults, in place."""
        custom = self.lookup(rt)
        if custom is not None:
            prune(custom.schema, obj)
            apply_schema_defaults(custom.schema, obj)

    # -- validation ---------------------------------------------------------------------------
    def validate(self, req: Req, obj: JSON, old: JSON | None = None) -> None:
        """Raise kube-apiserver's 422 for an invalid custom resource (``old``: the stored
        object of an update, for transition rules)."""
        custom = self.lookup(req.rt)
        if custom is None:
            return
        causes = _metadata_causes(obj.get("metadata") or {}) if req.subresource != "status" else []
        node, path = custom.schema, ""
        value: Any = obj
        was: Any = old
        if req.subresource == "status":
            node = (custom.schema.get("properties") or {}).get("status") or {}
            value, was, path = obj.get("status"), (old or {}).get("status"), "status"
            if value is not None:
                causes += schema_causes(node, value, "status", "")
        else:
            causes += schema_causes(custom.schema, _root_view(obj), "", "")
        causes += list_type_causes(node, value, path)
        causes = ratchet(causes, obj, old) + _scale_causes(custom.scale, obj)
        if custom.has_rules:
            causes += _rule_causes(custom, node, value, was, path, causes)
        if causes:
            name = (obj.get("metadata") or {}).get("name", "")
            raise invalid(custom.kind, custom.group, name, causes)
        if req.subresource != "status":
            for text in finalizer_warnings(obj.get("metadata") or {}, (old or {}).get("metadata")):
                req.warn(text)

    def crd_causes(self, crd: JSON) -> list[Cause]:
        """What kube-apiserver refuses in a CRD's CEL rules (compilation, reasons)."""
        versions = (crd.get("spec") or {}).get("versions") or []
        schemas = [((v.get("schema") or {}).get("openAPIV3Schema") or {}) for v in versions]
        same = all(s == schemas[0] for s in schemas)
        causes: list[Cause] = []
        for i, schema in enumerate(schemas[:1] if same else schemas):
            if "x-kubernetes-validations" not in json.dumps(schema):
                continue
            prefix = "spec.validation.openAPIV3Schema"
            prefix = prefix if same else f"spec.versions[{i}].schema.openAPIV3Schema"
            try:
                causes += compile_rules(schema, prefix).errors
            except CelUnavailable as exc:
                causes.append(("FieldValueForbidden", prefix, f"Forbidden: {exc}"))
        return causes

    def crd_default_causes(self, crd: JSON) -> list[Cause]:
        """Schema defaults must satisfy their own schema (kube-apiserver refuses the CRD)."""
        versions = (crd.get("spec") or {}).get("versions") or []
        schemas = [((v.get("schema") or {}).get("openAPIV3Schema") or {}) for v in versions]
        same = all(s == schemas[0] for s in schemas)
        causes: list[Cause] = []
        for i, schema in enumerate(schemas[:1] if same else schemas):
            prefix = "spec.validation.openAPIV3Schema"
            causes += default_causes(
                schema, prefix if same else f"spec.versions[{i}].schema.openAPIV3Schema"
            )
        return causes


def _rule_causes(
    custom: CustomType, node: JSON, value: Any, old: Any, path: str, causes: list[Cause]
) -> list[Cause]:
    """The CEL rules' causes, unless a blocking schema error stops them (as kube-apiserver)."""
    if any(c[0] in _BLOCKING for c in causes):
        return [("FieldValueInvalid", "<nil>", _UNCHECKED)]
    if custom.rules is None:
        raise st.ApiError(500, "InternalError", str(CelUnavailable("CEL rules not evaluated")))
    return custom.rules.evaluate(node, value, old, path)


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> st.ApiError:
    """kube-apiserver's 422: ``Kind.group "name" is invalid: [causes]``."""
    texts = [f"{field}: {message}" for _, field, message in causes]
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details: JSON = {"name": name, "group": group, "kind": kind}
    details["causes"] = [{"reason": r, "message": m, "field": f} for r, f, m in causes]
    return st.ApiError(422, "Invalid", f'{kind}.{group} "{name}" is invalid: {text}', details)


def _custom_type(crd: JSON, version: str) -> CustomType | None:
    spec = crd.get("spec") or {}
    for entry in spec.get("versions") or []:
        if entry.get("name") != version:
            continue
        schema = (entry.get("schema") or {}).get("openAPIV3Schema") or {}
        scale = (entry.get("subresources") or {}).get("scale")
        kind = (spec.get("names") or {}).get("kind", "")
        has_rules = "x-kubernetes-validations" in json.dumps(schema)
        rules = None
        if has_rules:  # without CEL: refused at CRD creation (crd_causes), writes get a 500
            with contextlib.suppress(CelUnavailable):
                rules = compile_rules(schema, "")
        return CustomType(kind, spec.get("group", ""), version, schema, scale, has_rules, rules)
    return None


def _root_view(obj: JSON) -> JSON:
    """The object as the schema validates it (metadata is validated as ObjectMeta instead)."""
    return {k: v for k, v in obj.items() if k != "metadata"}


def _metadata_causes(meta: JSON) -> list[Cause]:
    return meta_causes(meta, builtin=False)


def _scale_causes(scale: JSON | None, obj: JSON) -> list[Cause]:
    """The replica paths of a ``/scale`` subresource must hold non-negative int64 values."""
    causes: list[Cause] = []
    for key in ("specReplicasPath", "statusReplicasPath"):
        path = (scale or {}).get(key)
        if not path:
            continue
        found, value = _at(obj, path)
        if not found:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            got = (
                "[]interface {}" if isinstance(value, list) else _GO_TYPES.get(type(value), "<nil>")
            )
            message = (
                f"Invalid value: 0: {path} accessor error: {go_value(value)} is of the type "
                f"{got}, expected int64"
            )
            causes.append(("FieldValueInvalid", path, message))
        elif value < 0:
            message = f"Invalid value: {value}: should be a non-negative integer"
            causes.append(("FieldValueInvalid", path, message))
    return causes


def scale_paths(custom: CustomType | None) -> tuple[str, str]:
    """Where a ``/scale`` subresource reads and writes replicas (built-in kinds: spec/status)."""
    scale = (custom.scale if custom is not None else None) or {}
    spec = scale.get("specReplicasPath") or ".spec.replicas"
    return spec, scale.get("statusReplicasPath") or ".status.replicas"


def at(obj: Any, path: str) -> tuple[bool, Any]:
    """The value at a ``.a.b`` path of ``obj``, and whether it is there."""
    return _at(obj, path)


def _at(obj: Any, path: str) -> tuple[bool, Any]:
    for part in path.strip(".").split("."):
        if not isinstance(obj, dict) or part not in obj:
            return False, None
        obj = obj[part]
    return True, obj


def _dup_keys(schema: JSON, obj: JSON, field: str) -> str:
    """``.spec.ports: duplicate entries for key [name="a"]`` for a duplicated list entry."""
    list_path, _, index = field.rpartition("[")
    node: Any = schema
    value: Any = obj
    for part in list_path.split("."):
        node = (node.get("properties") or {}).get(part) or {}
        value = value.get(part) if isinstance(value, dict) else None
    item = value[int(index.rstrip("]"))] if isinstance(value, list) else None
    keys = node.get("x-kubernetes-list-map-keys") or []
    if isinstance(item, dict) and keys:
        listed = ",".join(f"{k}={json.dumps(item.get(k))}" for k in keys)
        return f".{list_path}: duplicate entries for key [{listed}]"
    return f".{list_path}: duplicate entries for value {json.dumps(item)}"


def _typed_patch_error(req: Req, custom: CustomType, obj: JSON, why: str) -> st.ApiError:
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace', '')}/{meta.get('name', req.name)}"
    gvk = f"{custom.group}/{custom.version}, Kind={custom.kind}"
    return st.ApiError(500, "", f"failed to create typed patch object ({where}; {gvk}): {why}")


def go_json(obj: Any) -> str:
    """Go's encoding/json of a decoded object: sorted keys, compact, HTML characters escaped."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _patch_strict(obj: JSON, listed: str) -> st.ApiError:
    quoted = json.dumps(go_json(obj), ensure_ascii=False)
    message = f"Invalid value: {quoted}: strict decoding error: {listed}"
    causes = [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}]
    return st.ApiError(422, "Invalid", f' "" is invalid: patch: {message}', {"causes": causes})
