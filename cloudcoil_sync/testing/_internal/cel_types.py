"""kube-apiserver's typed CEL compilation: ``self`` and ``oldSelf`` declared from the schema.

kube-apiserver compiles a rule with ``self`` typed by the structural schema at the rule's node
(``SchemaDeclType``): an object with properties (or with neither properties nor
``additionalProperties``) is an object type whose fields are the declared properties (plus
``apiVersion``, ``kind`` and ``metadata.name``/``generateName`` at a resource root or embedded
resource), ``additionalProperties`` a ``map(string, T)``, an array a ``list(T)``, integer /
number / boolean / string ``int`` / ``double`` / ``bool`` / ``string``, a ``byte`` string
``bytes``, ``date`` and ``date-time`` strings ``timestamp``, ``duration`` strings ``duration``,
int-or-string and untyped nodes ``dyn``. So ``size()`` of an object or ``self.replicas + "x"``
refuse the CRD. Object types are named ``selfType<N>``, ``selfType<N>.<field>``, ``.@idx`` for
list items and ``.@elem`` for map values, as kube-apiserver names them (``<N>`` is random there).

cel-expr-python types objects as protobuf messages, built here in a descriptor pool under
internal names that error messages are translated back from. Approximated: a list or map
nested directly in a list or map value is a ``list(dyn)`` / ``map(string, dyn)`` (protobuf has
no nested repeated fields); a comparison of numbers of different types is not an error (the
checker's errors for it are dropped: cel-go compares across numeric types, cel-cpp's checker
has no option for it); the ``oldSelf`` of an ``optionalOldSelf`` rule is dyn (cel-expr-python
declares no optional type). Only compilation is typed: rules are evaluated on plain JSON.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import Any

__all__ = ["type_error"]

JSON = dict[str, Any]
_counter = itertools.count(1)
_STRUCT_FIELD = re.compile(r"undefined field '([^']*)' not found in struct '[^']*'")
# kube-apiserver's cel-go compares numbers across types (``self.ratio > 1``); cel-cpp's checker
# has no such option and its runtime compares them anyway, so those errors are dropped.
_CROSS_NUMERIC = re.compile(
    r"ERROR: [^\n]*found no matching overload for '_(<|<=|>|>=)_' applied to "
    r"'\((int|uint|double), (int|uint|double)\)'"
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCALARS = {"integer": "int64", "number": "double", "boolean": "bool", "string": "string"}
_FORMATS = {
    "date-time": "google.protobuf.Timestamp",
    "date": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
    "byte": "bytes",
}


def _kind(node: JSON) -> str:
    """``dyn``, ``object``, ``map``, ``list`` or a protobuf scalar / well-known type name."""
    kind = node.get("type")
    if node.get("x-kubernetes-int-or-string") or not kind:
        return "dyn"
    if kind == "object":
        return "map" if isinstance(node.get("additionalProperties"), dict) else "object"
    if kind == "array":
        return "list" if isinstance(node.get("items"), dict) else "dyn"
    if kind == "string" and node.get("format") in _FORMATS:
        return _FORMATS[node["format"]]
    return _SCALARS.get(str(kind), "dyn")


def _fields(node: JSON, root: bool) -> dict[str, JSON]:
    fields = dict(node.get("properties") or {})
    if root or node.get("x-kubernetes-embedded-resource"):
        kept = {"name": {"type": "string"}, "generateName": {"type": "string"}}
        meta: JSON = {"type": "object", "properties": kept}
        fields.setdefault("apiVersion", {"type": "string"})
        fields.setdefault("kind", {"type": "string"})
        fields["metadata"] = meta
    return {name: schema for name, schema in fields.items() if _IDENT.match(name)}


def _entry_name(field: str) -> str:
    """protobuf's name of a map field's entry message (``my_map`` -> ``MyMapEntry``)."""
    parts = field.split("_")
    return "".join(part[:1].upper() + part[1:] for part in parts) + "Entry"


class _Builder:
    """Protobuf messages for the object types of one schema node."""

    def __init__(self, descriptor: Any, serial: int) -> None:
        self.pb = descriptor
        self.package = f"k8s_cel_{serial}"
        self.file = descriptor.FileDescriptorProto(
            name=f"{self.package}.proto", package=self.package, syntax="proto3"
        )
        for dependency in ("struct", "timestamp", "duration"):
            self.file.dependency.append(f"google/protobuf/{dependency}.proto")
        self.names: dict[str, str] = {}  # internal full name -> kube's type name

    def message(self, node: JSON, name: str, root: bool) -> str:
        internal = f"{self.package}.m{len(self.names)}"
        self.names[internal] = name
        message = self.file.message_type.add(name=internal.rsplit(".", 1)[1])
        field_type = self.pb.FieldDescriptorProto
        for number, (key, child) in enumerate(_fields(node, root).items(), 1):
            field = message.field.add(name=key, number=number, label=field_type.LABEL_OPTIONAL)
            kind = _kind(child)
            if kind == "list":
                field.label = field_type.LABEL_REPEATED
                self._set(field, child["items"], f"{name}.{key}.@idx", nested=True)
            elif kind == "map":
                entry = message.nested_type.add(name=_entry_name(key))
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=field_type.TYPE_STRING, label=1)
                value = entry.field.add(name="value", number=2, label=1)
                self._set(value, child["additionalProperties"], f"{name}.{key}.@elem", True)
                field.label = field_type.LABEL_REPEATED
                field.type = field_type.TYPE_MESSAGE
                field.type_name = f".{internal}.{entry.name}"
            else:
                self._set(field, child, f"{name}.{key}", nested=False)
        return internal

    def _set(self, field: Any, node: JSON, name: str, nested: bool) -> None:
        field_type = self.pb.FieldDescriptorProto
        kind = _kind(node)
        if kind in ("int64", "double", "bool", "string", "bytes"):
            field.type = getattr(field_type, f"TYPE_{kind.upper()}")
            return
        field.type = field_type.TYPE_MESSAGE
        if kind == "object":
            field.type_name = "." + self.message(node, name, False)
        elif kind == "list" and nested:
            field.type_name = ".google.protobuf.ListValue"
        elif kind == "map" and nested:
            field.type_name = ".google.protobuf.Struct"
        elif kind in ("list", "map"):  # a list or map field of an object: handled by message()
            raise AssertionError(kind)
        elif kind.startswith("google."):
            field.type_name = "." + kind
        else:
            field.type_name = ".google.protobuf.Value"

    def cel_type(self, cel: Any, node: JSON, name: str, root: bool) -> Any:
        """The CEL type of ``self`` at ``node``."""
        kind = _kind(node)
        if kind == "object":
            return cel.Type(self.message(node, name, root))
        if kind == "list":
            return cel.Type.List(self.cel_type(cel, node["items"], f"{name}.@idx", False))
        if kind == "map":
            value = node["additionalProperties"]
            return cel.Type.Map(cel.Type.STRING, self.cel_type(cel, value, f"{name}.@elem", False))
        simple = {"int64": "INT", "double": "DOUBLE", "bool": "BOOL", "string": "STRING"}
        simple |= {"bytes": "BYTES", "google.protobuf.Timestamp": "TIMESTAMP"}
        simple["google.protobuf.Duration"] = "DURATION"
        return getattr(cel.Type, simple.get(kind, "DYN"))


@lru_cache(maxsize=256)
def _typed_environment(
    schema_key: str, root: bool, optional_old: bool
) -> tuple[Any, dict[str, str]]:
    import json

    from cel_expr_python import cel
    from google.protobuf import (
        descriptor_pb2,
        descriptor_pool,
        duration_pb2,
        struct_pb2,
        timestamp_pb2,
    )

    from cloudcoil_sync.testing._internal.cel_library import typed_environment

    node = json.loads(schema_key)
    builder = _Builder(descriptor_pb2, next(_counter))
    self_type = builder.cel_type(cel, node, f"selfType{builder.package.rsplit('_', 1)[1]}", root)
    pool = descriptor_pool.DescriptorPool()
    for module in (struct_pb2, timestamp_pb2, duration_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    pool.Add(builder.file)
    for internal in builder.names:
        pool.FindMessageTypeByName(internal)  # KeyError where protobuf refused the file
    old_type = cel.Type.DYN if optional_old else self_type  # cel-expr-python has no optional type
    env = typed_environment({"self": self_type, "oldSelf": old_type}, pool)
    return env, builder.names


def type_error(node: JSON, root: bool, text: str, optional_old: bool = False) -> str:
    """cel-go's compile error for ``text`` with ``self``/``oldSelf`` typed by ``node``, or
    ``""`` where it type-checks (or cel-expr-python / protobuf are not there to check it).
    ``optional_old``: an ``optionalOldSelf`` rule, whose ``oldSelf`` is not checked."""
    import json

    key = json.dumps(_shape(node), sort_keys=True)
    try:
        env, names = _typed_environment(key, root, optional_old)
    except (ImportError, KeyError):  # no checker, or a schema protobuf cannot express
        return ""
    try:
        env.compile(text)
    except RuntimeError as exc:
        error = str(exc).removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")
        for internal, name in names.items():
            error = re.sub(rf"\b{re.escape(internal)}\b", name, error)
        error = _STRUCT_FIELD.sub(r"undefined field '\1'", error)
        return "\n".join(b for b in _blocks(error) if not _CROSS_NUMERIC.match(b))
    return ""


def _blocks(error: str) -> list[str]:
    """The errors of a compile error text (each ``ERROR: ...`` with its two excerpt lines)."""
    return ["ERROR: " + part.rstrip("\n") for part in error.split("ERROR: ")[1:]]


_SHAPE_KEYS = ("type", "format", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource")


def _shape(node: JSON) -> JSON:
    """The parts of a schema that decide its CEL type (the cache key of its environment)."""
    out: JSON = {key: node[key] for key in _SHAPE_KEYS if key in node}
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: _shape(v) for k, v in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = _shape(node[key])
    return out
