"""Field sets (``fieldsV1``) and managedFields bookkeeping for Update and Apply operations.

A field set is a ``set`` of path tuples such as ``("f:data", "f:k")``; a path ending in ``"."``
marks ownership of a container itself. Schema knowledge is a small table (see the package
docstring): lists are atomic unless listed as keyed or set lists; for built-in kinds only
``NULLABLE`` containers get a ``"."`` entry when created, for custom resources every container.
"""

from __future__ import annotations

import json
from typing import Any

from cloudcoil_sync.testing._internal.pruning import OBJECT_META
from cloudcoil_sync.testing._internal.schema_validation import property_schema

__all__ = [
    "FieldSet",
    "fields_of",
    "from_tree",
    "path_text",
    "to_tree",
    "value_at",
]

JSON = dict[str, Any]
Path = tuple[str, ...]
FieldSet = set[Path]

# Lists merged by key (name → key fields); every other list is atomic except SET_LISTS.
KEYED_LISTS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "imagePullSecrets": ("name",),
    "tolerations": (),
}
SET_LISTS = {"finalizers"}
# Elements of these keyed lists are atomic (no per-field ownership).
ATOMIC_ELEMENTS = {"ownerReferences"}
# Structs kube marks atomic: owned as one leaf.
ATOMIC_STRUCTS = {"selector", "regarding", "involvedObject", "related", "roleRef"}
# Built-in containers that are pointers/maps/slices (so their creation is owned with ".").
NULLABLE = {
    "data",
    "resourceAttributes",  # access reviews: pointers
    "nonResourceAttributes",
    "binaryData",
    "stringData",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "matchLabels",
    "nodeSelector",
    "rollingUpdate",
    "conversion",
    "env",
    "ports",
    "volumeMounts",
    "volumes",
    "args",
    "command",
}
# Metadata the server owns: no manager owns it in managedFields (the rest of ObjectMeta:
# labels, annotations, ownerReferences, finalizers, generateName, are owned as written).
IGNORED_META = OBJECT_META - {
    "generateName",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
}


def _key_token(element: Any, keys: tuple[str, ...]) -> str:
    if keys and isinstance(element, dict) and all(k in element for k in keys):
        return "k:" + json.dumps({k: element[k] for k in keys}, separators=(",", ":"))
    return "v:" + json.dumps(element, separators=(",", ":"))


def _walk(node: Any, name: str, path: Path, out: dict[Path, Any], custom: bool) -> None:
    """Record ``path → value`` for leaves and ``path+(".",) → True`` for owned containers."""
    if isinstance(node, dict) and node and name not in ATOMIC_STRUCTS:
        if custom or name in NULLABLE:
            out[(*path, ".")] = True
        for key, child in node.items():
            _walk(child, key, (*path, "f:" + key), out, custom)
        return
    if isinstance(node, list) and node and (name in KEYED_LISTS or name in SET_LISTS):
        if custom or name in NULLABLE:
            out[(*path, ".")] = True
        keys = KEYED_LISTS.get(name, ())
        for element in node:
            epath = (*path, _key_token(element, keys))
            if isinstance(element, dict) and name not in ATOMIC_ELEMENTS and keys:
                out[(*epath, ".")] = True
                for key, child in element.items():
                    _walk(child, key, (*epath, "f:" + key), out, custom)
            else:
                out[epath] = element
        return
    if node is not None:  # null fields are absent, not owned
        out[path] = node


def _walk_schema(node: Any, path: Path, out: dict[Path, Any], schema: JSON) -> None:
    """A custom resource's fields, by its CRD schema: lists are atomic unless declared
    ``set`` or ``map`` (keyed by ``x-kubernetes-list-map-keys``); nulls are owned."""
    if isinstance(node, dict) and node and schema.get("x-kubernetes-map-type") != "atomic":
        out[(*path, ".")] = True
        for key, child in node.items():
            sub = property_schema(schema, key) or {}
            _walk_schema(child, (*path, "f:" + key), out, sub)
        return
    kind = schema.get("x-kubernetes-list-type")
    if isinstance(node, list) and node and kind in ("set", "map"):
        out[(*path, ".")] = True
        keys = tuple(schema.get("x-kubernetes-list-map-keys") or ()) if kind == "map" else ()
        items = (schema.get("items") or {}).get("properties") or {}
        for element in node:
            epath = (*path, _key_token(element, keys))
            if isinstance(element, dict) and keys:
                out[(*epath, ".")] = True
                for key, child in element.items():
                    _walk_schema(child, (*epath, "f:" + key), out, items.get(key) or {})
            else:
                out[epath] = element
        return
    out[path] = node


def fields_of(obj: JSON, custom: bool | JSON, part: str | None = None) -> dict[Path, Any]:
    """Every owned path of ``obj`` with its value; ``part`` limits to one top-level field.

    ``custom``: False for built-in kinds, True for a custom resource, or its CRD's schema.
    """
    out: dict[Path, Any] = {}
    schema = custom if isinstance(custom, dict) else None
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (part is not None and key != part):
            continue
        if key == "metadata":
            for mkey, mval in (value or {}).items():
                if mkey not in IGNORED_META:
                    _walk(mval, mkey, ("f:metadata", "f:" + mkey), out, bool(custom))
            continue
        if schema is not None:
            _walk_schema(value, ("f:" + key,), out, (schema.get("properties") or {}).get(key) or {})
        else:
            _walk(value, key, ("f:" + key,), out, bool(custom))
    return out


def leaves(fields: dict[Path, Any]) -> FieldSet:
    return {p for p in fields if p[-1] != "."}


def to_tree(paths: FieldSet) -> JSON:
    tree: JSON = {}
    for path in sorted(paths):
        node = tree
        for token in path:
            node = node.setdefault(token, {})
    return tree


def from_tree(tree: JSON, prefix: Path = ()) -> FieldSet:
    out: FieldSet = set()
    for token, child in tree.items():
        path = (*prefix, token)
        if token == "." or not child:
            out.add(path)
        else:
            out |= from_tree(child, path)
    return out


def value_at(obj: Any, path: Path) -> Any:
    """Value of ``obj`` at a field path; ``KeyError`` when absent."""
    node = obj
    for token in path:
        if token == ".":
            return node
        kind, _, rest = token.partition(":")
        if kind == "f" and isinstance(node, dict):
            node = node[rest]
        elif kind in ("k", "v") and isinstance(node, list):
            wanted = json.loads(rest)
            for element in node:
                if (kind == "v" and element == wanted) or (
                    kind == "k"
                    and isinstance(element, dict)
                    and all(element.get(k) == v for k, v in wanted.items())
                ):
                    node = element
                    break
            else:
                raise KeyError(token)
        else:
            raise KeyError(token)
    return node


def path_text(path: Path) -> str:
    """kube's printed form: ``.data.owned``, ``.spec.containers[name="c"].image``."""
    out = []
    for token in path:
        kind, _, rest = token.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            pairs = ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(rest).items())
            out.append(f"[{pairs}]")
        elif kind == "v":
            out.append(f"[={rest}]")
    return "".join(out)
