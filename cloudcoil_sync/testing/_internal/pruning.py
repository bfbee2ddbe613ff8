"""Pruning and defaulting of custom resources by their structural schema (kube-apiserver 1.32).

Pruning drops fields the schema does not declare (kept under
``x-kubernetes-preserve-unknown-fields``; an embedded resource keeps ``apiVersion``, ``kind``
and ``metadata``) and reports their paths, which kube-apiserver turns into
``unknown field "..."`` warnings or strict-decoding errors. Defaulting fills missing fields
(and ``null`` ones that are not ``nullable``) with their schema default, top down, then drops
the ``null`` values that are neither nullable nor defaulted.
"""

from __future__ import annotations

import copy
from typing import Any

from cloudcoil_sync.testing._internal.schema_validation import property_schema

__all__ = ["apply_schema_defaults", "prune", "unknown_fields"]

JSON = dict[str, Any]
_ROOT_KEPT = ("apiVersion", "kind", "metadata")
OBJECT_META = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def unknown_fields(node: JSON, value: Any, path: str = "", root: bool = True) -> list[str]:
    """The paths ``prune`` would drop, without changing ``value``."""
    found: list[str] = []
    _prune(node, value, path, root, found, remove=False)
    return found


def prune(node: JSON, value: Any, path: str = "", root: bool = True) -> list[str]:
    """Drop undeclared fields from ``value`` in place; return their paths.

    The root's ``metadata`` loses fields ObjectMeta does not have, silently (kube-apiserver
    decodes it as typed ObjectMeta and reports nothing).
    """
    dropped: list[str] = []
    _prune(node, value, path, root, dropped)
    meta = value.get("metadata") if root and isinstance(value, dict) else None
    if isinstance(meta, dict):
        for key in [k for k in meta if k not in OBJECT_META]:
            del meta[key]
    return dropped


def _prune(
    node: JSON, value: Any, path: str, keep_meta: bool, dropped: list[str], remove: bool = True
) -> None:
    if isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune(
                    items,
                    item,
                    f"{path}[{i}]",
                    bool(items.get("x-kubernetes-embedded-resource")),
                    dropped,
                    remove,
                )
        return
    if not isinstance(value, dict):
        return
    extra = node.get("additionalProperties")
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    embedded = keep_meta or node.get("x-kubernetes-embedded-resource")
    for key in list(value):
        child_path = f"{path}.{key}" if path else key
        if embedded and key in _ROOT_KEPT:
            continue
        child = property_schema(node, key)
        if child is None:
            if preserve or extra is True:
                continue
            dropped.append(child_path)
            if remove:
                del value[key]
            continue
        nested = bool(child.get("x-kubernetes-embedded-resource"))
        _prune(child, value[key], child_path, nested, dropped, remove)


def apply_schema_defaults(node: JSON, value: Any) -> None:
    """Fill defaults into ``value`` in place (top down) and drop unallowed nulls."""
    if isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for item in value:
                apply_schema_defaults(items, item)
        return
    if not isinstance(value, dict):
        return
    properties = node.get("properties") or {}
    for key, child in properties.items():
        if child.get("default") is None:  # a null default defaults nothing
            continue
        if key not in value or (value[key] is None and not child.get("nullable")):
            value[key] = copy.deepcopy(child["default"])
    for key in list(value):
        child = property_schema(node, key)
        if child is None:
            continue
        if value[key] is None and not child.get("nullable"):
            del value[key]
            continue
        apply_schema_defaults(child, value[key])
