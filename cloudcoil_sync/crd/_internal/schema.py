"""Turn a pydantic model's JSON Schema into a Kubernetes structural schema.

Input is ``model_json_schema(by_alias=True, mode="validation")`` (JSON Schema 2020-12 with
``$defs``); output is the OpenAPI v3.0 subset that apiextensions.k8s.io/v1 accepts: references
inlined, ``anyOf[T, null]`` as ``nullable``, ``int | str`` as ``x-kubernetes-int-or-string``,
open objects as ``x-kubernetes-preserve-unknown-fields``. Anything without a faithful
structural form raises :class:`SchemaError` naming the field path, e.g. ``Widget.spec.items[]``.
"""

from __future__ import annotations

import copy
import operator
from typing import Any, get_args

from pydantic import BaseModel, PlainSerializer, WrapSerializer

from cloudcoil_sync.crd._internal.markers import COLUMN_KEY, SchemaError

__all__ = ["check_models", "structural_schema"]

_NULL = {"type": "null"}
_PRIMITIVES = ("object", "array", "string", "number", "integer", "boolean")
_SCALARS = ("string", "integer", "number", "boolean")
_ANNOTATIONS = frozenset({"title", "description", "default", "example", COLUMN_KEY})
_EXTENSIONS = frozenset(
    {
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
_KEYWORDS = (
    _ANNOTATIONS
    | _EXTENSIONS
    | {
        "type",
        "properties",
        "items",
        "additionalProperties",
        "required",
        "nullable",
        "enum",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "externalDocs",
    }
)
_Refs = tuple[str, ...]


def _fail(path: str, message: str) -> SchemaError:
    return SchemaError(f"{path}: {message}")


def structural_schema(raw: dict[str, Any], root: str) -> dict[str, Any]:
    """Convert a root JSON Schema (with ``$defs``) into a structural schema.

    ``root`` names the model and prefixes every error path.
    """
    raw = copy.deepcopy(raw)
    definitions = raw.pop("$defs", {})
    return _Converter(definitions).convert(raw, root, ())


class _Converter:
    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions = definitions

    def convert(self, raw: Any, path: str, refs: _Refs) -> dict[str, Any]:
        node, refs = self._flatten(raw, path, refs)
        return self._finish(node, path, refs)

    # -- references and unions ------------------------------------------------------------

    def _flatten(self, raw: Any, path: str, refs: _Refs) -> tuple[dict[str, Any], _Refs]:
        """Resolve ``$ref`` and ``anyOf`` into one node; children stay unconverted."""
        if not isinstance(raw, dict):
            raise _fail(path, "boolean schemas are unsupported")
        node = copy.deepcopy(raw)
        if "$ref" in node:
            target, refs = self._dereference(node.pop("$ref"), path, refs)
            rest, refs = self._flatten(node, path, refs)
            node = _merge(target, rest, path)
        if "anyOf" in node:
            node, refs = self._union(node, path, refs)
        if isinstance(node.get("type"), list):
            kinds = node["type"]
            concrete = [kind for kind in kinds if kind != "null"]
            if "null" not in kinds or len(concrete) != 1:
                raise _fail(path, "mixed-type enums/unions are unsupported")
            node["type"] = concrete[0]
            node["nullable"] = True
        return node, refs

    def _dereference(self, ref: Any, path: str, refs: _Refs) -> tuple[dict[str, Any], _Refs]:
        prefix = "#/$defs/"
        if not isinstance(ref, str) or not ref.startswith(prefix):
            raise _fail(path, f"only local $defs references are supported: {ref!r}")
        name = ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
        if name in refs:
            raise _fail(path, f"recursive schema reference {name!r} is unsupported")
        if name not in self.definitions:
            raise _fail(path, f"unresolved schema reference {name!r}")
        return self._flatten(self.definitions[name], path, (*refs, name))

    def _union(self, node: dict[str, Any], path: str, refs: _Refs) -> tuple[dict[str, Any], _Refs]:
        variants = node.pop("anyOf")
        if not isinstance(variants, list):
            raise _fail(path, "anyOf must be a list")
        nullable = _NULL in variants
        branches = [variant for variant in variants if variant != _NULL]
        if len(branches) == 1:
            branch, refs = self._flatten(branches[0], path, refs)
            rest, refs = self._flatten(node, path, refs)
            node = _merge(branch, rest, path)
        elif (
            len(branches) == 2
            and {"type": "integer"} in branches
            and {"type": "string"} in branches
        ):
            node["x-kubernetes-int-or-string"] = True
        else:
            raise _fail(path, "unions must be T | None or unconstrained int | str")
        if nullable:
            node["nullable"] = True
        return node, refs

    # -- one flattened node ---------------------------------------------------------------

    def _finish(self, node: dict[str, Any], path: str, refs: _Refs) -> dict[str, Any]:
        _normalise_keywords(node, path)
        _check_type(node, path)
        self._children(node, path, refs)
        if "type" not in node and not node.get("x-kubernetes-int-or-string"):
            # An unconstrained JSON Schema is exactly pydantic's Any: any JSON, including null.
            if node.keys() - _ANNOTATIONS - {"nullable", "x-kubernetes-preserve-unknown-fields"}:
                raise _fail(path, "constraints require an explicit structural type")
            node["x-kubernetes-preserve-unknown-fields"] = True
            node["nullable"] = True
        _check_extensions(node, path)
        if node.get("x-kubernetes-int-or-string"):
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        return node

    def _children(self, node: dict[str, Any], path: str, refs: _Refs) -> None:
        extra = node.get("additionalProperties")
        if extra is False:
            raise _fail(
                path,
                "additionalProperties=false is forbidden by Kubernetes; "
                "use pruning or a webhook instead of extra='forbid'",
            )
        if extra is True:
            del node["additionalProperties"]
            node["x-kubernetes-preserve-unknown-fields"] = True
        elif isinstance(extra, dict):
            if node.get("properties"):
                raise _fail(path, "properties and additionalProperties cannot coexist in a CRD")
            node["additionalProperties"] = self.convert(extra, f"{path}.*", refs)
        if "properties" in node:
            properties = node["properties"]
            if node.get("x-kubernetes-embedded-resource"):
                properties["metadata"] = {"type": "object"}
            node["properties"] = {
                name: self.convert(child, f"{path}.{name}", refs)
                for name, child in properties.items()
            }
        if "items" in node:
            node["items"] = self.convert(node["items"], f"{path}[]", refs)


def _merge(base: dict[str, Any], extra: dict[str, Any], path: str) -> dict[str, Any]:
    """Combine a referenced/branch schema with the keywords written beside it."""
    for key, value in extra.items():
        if key in base and base[key] != value and key not in _ANNOTATIONS:
            raise _fail(path, f"conflicting {key!r} constraints around a reference or union")
        base[key] = value
    return base


def _normalise_keywords(node: dict[str, Any], path: str) -> None:
    """Rewrite JSON Schema 2020-12 spellings into their OpenAPI v3.0 equivalents."""
    if "const" in node:
        value = node.pop("const")
        if "enum" in node and value not in node["enum"]:
            raise _fail(path, "const conflicts with enum")
        node["enum"] = [value]
    for exclusive, inclusive, stricter in (
        ("exclusiveMinimum", "minimum", operator.gt),
        ("exclusiveMaximum", "maximum", operator.lt),
    ):
        bound = node.get(exclusive)
        if bound is None or isinstance(bound, bool):
            continue
        if inclusive in node and stricter(node[inclusive], bound):
            del node[exclusive]  # the inclusive bound already excludes this value
            continue
        node[inclusive] = bound
        node[exclusive] = True
    if node.pop("uniqueItems", False):
        raise _fail(
            path,
            "uniqueItems/set types are unsupported; use a list with x-kubernetes-list-type='set'",
        )
    if "examples" in node:
        examples = node.pop("examples")
        if examples and "example" not in node:
            node["example"] = examples[0]
    unsupported = node.keys() - _KEYWORDS
    if unsupported:
        raise _fail(path, f"unsupported schema keywords: {', '.join(sorted(unsupported))}")


def _check_type(node: dict[str, Any], path: str) -> None:
    kind = node.get("type")
    if kind == "null":
        raise _fail(path, "null-only fields are unsupported; use an optional concrete type")
    if "type" in node and kind not in _PRIMITIVES:
        raise _fail(path, "type must be a supported OpenAPI primitive")
    if kind == "array" and "items" not in node:
        raise _fail(path, "arrays require an items schema")


def _check_extensions(node: dict[str, Any], path: str) -> None:
    for flag in (
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ):
        if flag in node and node[flag] is not True:
            raise _fail(path, f"{flag} must be true when specified")
    kind = node.get("type")
    if node.get("x-kubernetes-embedded-resource") and kind != "object":
        raise _fail(path, "embedded resources require type object")
    if node.get("x-kubernetes-int-or-string") and "type" in node:
        raise _fail(path, "int-or-string must not specify type")
    if "x-kubernetes-map-type" in node and (
        kind != "object" or node["x-kubernetes-map-type"] not in ("atomic", "granular")
    ):
        raise _fail(path, "map-type requires an object and must be atomic or granular")
    list_type = node.get("x-kubernetes-list-type")
    if list_type is not None:
        _check_list_type(node, list_type, path)
    if "x-kubernetes-list-map-keys" in node and list_type != "map":
        raise _fail(path, "list-map-keys requires list-type='map'")
    rules = node.get("x-kubernetes-validations")
    if "x-kubernetes-validations" in node and (
        not isinstance(rules, list)
        or not all(
            isinstance(rule, dict) and isinstance(rule.get("rule"), str) and rule["rule"].strip()
            for rule in rules
        )
    ):
        raise _fail(path, "validations must be a list of nonempty CEL rules")


def _check_list_type(node: dict[str, Any], list_type: Any, path: str) -> None:
    if node.get("type") != "array" or list_type not in ("atomic", "set", "map"):
        raise _fail(path, "list-type requires an array and must be atomic, set or map")
    items = node.get("items", {})
    if list_type in ("set", "map") and items.get("nullable"):
        raise _fail(path, "set/map list items cannot be nullable")
    if list_type == "map":
        keys = node.get("x-kubernetes-list-map-keys")
        if items.get("type") != "object" or not isinstance(keys, list) or not keys:
            raise _fail(path, "map lists need object items and nonempty list-map-keys")
        for key in keys:
            field = items.get("properties", {}).get(key, {})
            if field.get("type") not in _SCALARS or field.get("nullable"):
                raise _fail(path, f"list map key {key!r} must be a nonnullable scalar property")
            if key not in items.get("required", []) and "default" not in field:
                raise _fail(path, f"list map key {key!r} must be required or have a default")
    if list_type == "set" and items.get("type") in ("object", "array"):
        marker = "x-kubernetes-map-type" if items["type"] == "object" else "x-kubernetes-list-type"
        if items.get(marker) != "atomic":
            raise _fail(path, "set list object/array items must be atomic")


def check_models(model: type[BaseModel]) -> None:
    """Reject model features whose wire form the JSON Schema does not describe."""
    pending: list[type[BaseModel]] = [model]
    seen: set[type[BaseModel]] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        _check_model(current)
        for field in current.model_fields.values():
            pending.extend(_nested_models(field.annotation))


def _check_model(model: type[BaseModel]) -> None:
    name = model.__name__
    if model.model_computed_fields:
        raise _fail(name, "computed fields are unsupported in stored resource models")
    decorators = model.__pydantic_decorators__
    if decorators.field_serializers or decorators.model_serializers:
        raise _fail(name, "custom serializers require an explicit schema and are unsupported")
    for field_name, field in model.model_fields.items():
        where = f"{name}.{field_name}"
        reads = field.validation_alias or field.alias or field_name
        writes = field.serialization_alias or field.alias or field_name
        if not isinstance(reads, str) or reads != writes:
            raise _fail(where, "validation and serialization aliases must match")
        if field.exclude or getattr(field, "exclude_if", None) is not None:
            raise _fail(where, "excluded fields are unsupported in stored resource models")
        if any(isinstance(item, (PlainSerializer, WrapSerializer)) for item in field.metadata):
            raise _fail(where, "custom serializers require an explicit schema and are unsupported")


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    pending = [annotation]
    while pending:
        item = pending.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            found.append(item)
        else:
            pending.extend(get_args(item))
    return found
