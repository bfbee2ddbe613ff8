"""Strategic merge patch for built-in kinds, as ``kubectl apply`` and ``kubectl patch`` send it.

Maps merge as in a JSON merge patch (``null`` deletes). Lists whose field has a patch merge key
(containers by ``name``, ports by ``containerPort`` or ``port``...) merge element by element
on that key; ``finalizers`` merge as a set; every other list is replaced. The directives
``$patch`` (``replace``, ``delete``, ``merge``), ``$setElementOrder/<list>``,
``$retainKeys`` and ``$deleteFromPrimitiveList/<list>`` are applied. Simplification: merge keys
are looked up by field name, not by the Go type that holds the field (the few kinds where a
name has two meanings, such as ``ports``, are told apart by the elements' keys).
"""

from __future__ import annotations

import copy
from typing import Any

from cloudcoil_sync.testing._internal.patch import PatchError

__all__ = ["MERGE_KEYS", "apply_strategic_merge_patch"]

JSON = dict[str, Any]
#: List fields merged by key, as their patchMergeKey in the Kubernetes API types.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "secrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "taints": "key",
}
_MERGED_PRIMITIVES = {"finalizers"}
_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"


def _merge_key(name: str, items: list[Any]) -> str | None:
    if name == "ports":  # container ports by containerPort, Service ports by port
        dicts = [i for i in items if isinstance(i, dict)]
        return "containerPort" if any("containerPort" in i for i in dicts) else "port"
    return MERGE_KEYS.get(name)


def _clean(value: Any) -> Any:
    """``value`` without directives (what a new element or a replaced map stores)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def apply_strategic_merge_patch(original: Any, patch: Any) -> Any:
    """``original`` (not modified) with ``patch`` applied; ``PatchError`` if malformed."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    result = _merge_map(original if isinstance(original, dict) else {}, patch)
    if result is None:
        raise PatchError("a strategic merge patch cannot delete the object")
    return result


def _merge_map(original: JSON, patch: JSON) -> JSON | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        cleaned: JSON = _clean(patch)
        return cleaned
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch directive {directive!r}")
    result = dict(original)
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            current = result.get(key)
            result[key] = _merge_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = value
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM) and isinstance(result.get(key[len(_DELETE_FROM) :]), list):
            name = key[len(_DELETE_FROM) :]
            result[name] = [item for item in result[name] if item not in (value or [])]
        elif key.startswith(_ORDER) and isinstance(result.get(key[len(_ORDER) :]), list):
            name = key[len(_ORDER) :]
            result[name] = _reorder(name, result[name], value or [])
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(name: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_clean(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    key = _merge_key(name, [*current, *patch])
    if key is None:
        if name in _MERGED_PRIMITIVES:
            return [*current, *(i for i in patch if i not in current)]
        return [_clean(i) for i in patch]
    out = [copy.deepcopy(i) for i in current]
    for element in patch:
        if not isinstance(element, dict) or key not in element:
            raise PatchError(f"an element of {name} has no merge key {key!r}")
        at = next(
            (i for i, e in enumerate(out) if isinstance(e, dict) and e.get(key) == element[key]),
            None,
        )
        if element.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            out.append(_clean(element))
        else:
            merged = _merge_map(out[at], element)
            if merged is None:
                del out[at]
            else:
                out[at] = merged
    return out


def _reorder(name: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = _merge_key(name, items)

    def ident(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    wanted = [ident(i) for i in order]
    position = {value: index for index, value in enumerate(wanted) if _hashable(value)}
    ranked = [i for i in items if _hashable(ident(i)) and ident(i) in position]
    ranked.sort(key=lambda i: position[ident(i)])
    return ranked + [i for i in items if not (_hashable(ident(i)) and ident(i) in position)]


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)
