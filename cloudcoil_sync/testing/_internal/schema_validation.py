"""Structural-schema validation of custom resources, as kube-apiserver 1.32 reports it.

The checks and messages are kube-openapi's (the validator kube-apiserver runs on custom
resources) and apiextensions-apiserver's list-type and embedded-resource checks, recorded from a
real server in ``tests/recordings/fidelity/``. A cause is a (reason, field, message) triple.
One difference: kube-apiserver reports the properties of one object in Go map order (random
from one request to the next); here they come in schema order.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import re
import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = [
    "Cause",
    "go_repr",
    "go_value",
    "list_type_causes",
    "property_schema",
    "schema_causes",
]

JSON = dict[str, Any]
Cause = tuple[str, str, str]
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def go_value(value: Any) -> str:
    """A value as Go's ``%v`` prints a decoded JSON number or string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return str(value)


def go_repr(value: Any) -> str:
    """A value as field.Invalid/Duplicate print it (Go's ``%#v`` of decoded JSON, roughly)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{go_repr(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_repr(v) for v in value) + "}"
    return go_value(value)


def property_schema(node: JSON, key: str) -> JSON | None:
    """The schema of an object's field ``key``: its declared property, else the schema of
    ``additionalProperties`` (when that is a schema, not a boolean), else None."""
    child = (node.get("properties") or {}).get(key)
    if child is None:
        extra = node.get("additionalProperties")
        child = extra if isinstance(extra, dict) else None
    return child


def json_type(value: Any) -> str:
    """The JSON type name kube-openapi reports for a value it found."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_ok(node: JSON, value: Any) -> bool:
    if node.get("x-kubernetes-int-or-string"):
        return json_type(value) in ("integer", "string")
    kind = node.get("type")
    if not kind:
        return True
    if kind == "integer":
        return json_type(value) == "integer"
    if kind == "number":
        return json_type(value) in ("integer", "number")
    return isinstance(value, _TYPES[kind]) and not (kind != "boolean" and isinstance(value, bool))


def _rfc3339(text: str) -> bool:
    pattern = r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)"
    if not re.fullmatch(pattern, text):
        return False
    try:
        datetime.datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _date(text: str) -> bool:
    try:
        return re.fullmatch(r"\d{4}-\d\d-\d\d", text) is not None and bool(
            datetime.date.fromisoformat(text)
        )
    except ValueError:
        return False


def _byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _uuid(text: str) -> bool:
    hexes = r"[0-9a-fA-F]"
    return re.fullmatch(
        rf"{hexes}{{8}}-?{hexes}{{4}}-?{hexes}{{4}}-?{hexes}{{4}}-?{hexes}{{12}}", text
    ) is not None and bool(uuid.UUID(text))


def _ip(version: int) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            return ipaddress.ip_address(text).version == version
        except ValueError:
            return False

    return check


def _cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


_HOST = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,62})?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,62})?)*\.?$")
_FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _rfc3339,
    "datetime": _rfc3339,
    "date": _date,
    "byte": _byte,
    "uuid": _uuid,
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "hostname": lambda t: len(t) <= 255 and _HOST.match(t) is not None,
    "email": lambda t: re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", t) is not None,
    "mac": lambda t: re.fullmatch(r"([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}", t) is not None,
}


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def schema_causes(node: JSON, value: Any, path: str, name: str) -> list[Cause]:
    """kube-openapi's causes for ``value`` at ``path``; ``name`` is the path its texts use."""
    if value is None:
        if node.get("nullable"):
            return []
        kinds = "integer,string" if node.get("x-kubernetes-int-or-string") else node.get("type")
        if not kinds:
            return []
        message = f'Invalid value: "null": {name} in body must be of type {kinds}: "null"'
        return [("FieldValueTypeInvalid", path, message)]
    if not _type_ok(node, value):
        kinds = "integer,string" if node.get("x-kubernetes-int-or-string") else node["type"]
        got = json_type(value)
        message = f'Invalid value: "{got}": {name} in body must be of type {kinds}: "{got}"'
        return [("FieldValueTypeInvalid", path, message)]
    causes: list[Cause] = []
    if isinstance(value, str):
        causes += _string_causes(node, value, path, name)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        causes += _number_causes(node, value, path, name)
    elif isinstance(value, list):
        causes += _array_causes(node, value, path, name)
    elif isinstance(value, dict):
        causes += _object_causes(node, value, path, name)
    if "enum" in node and value not in node["enum"]:
        allowed = ", ".join(json.dumps(v) if isinstance(v, str) else f'"{v}"' for v in node["enum"])
        message = f"Unsupported value: {go_repr(value)}: supported values: {allowed}"
        causes.append(("FieldValueNotSupported", path, message))
    return causes


def _string_causes(node: JSON, value: str, path: str, name: str) -> list[Cause]:
    out: list[Cause] = []
    shown = json.dumps(value, ensure_ascii=False)
    # kube-openapi's string validator stops at its first failure (length, then pattern).
    if "maxLength" in node and len(value) > node["maxLength"]:
        out.append(
            ("FieldValueTooLong", path, f"Too long: may not be more than {node['maxLength']} bytes")
        )
    elif "minLength" in node and len(value) < node["minLength"]:
        least = node["minLength"]
        message = f"Invalid value: {shown}: {name} in body should be at least {least} chars long"
        out.append(("FieldValueInvalid", path, message))
    elif "pattern" in node and not _regex(node["pattern"]).search(value):
        message = f"Invalid value: {shown}: {name} in body should match '{node['pattern']}'"
        out.append(("FieldValueInvalid", path, message))
    check = _FORMATS.get(node.get("format") or "")
    if check is not None and not check(value):
        message = (
            f"Invalid value: {shown}: {name} in body must be of type {node['format']}: {shown}"
        )
        out.append(("FieldValueTypeInvalid", path, message))
    return out


def _number_causes(node: JSON, value: float, path: str, name: str) -> list[Cause]:
    out: list[Cause] = []
    shown = go_value(value)

    def fail(text: str) -> None:
        out.append(("FieldValueInvalid", path, f"Invalid value: {shown}: {name} in body {text}"))

    if "maximum" in node:
        limit = node["maximum"]
        if node.get("exclusiveMaximum") and value >= limit:
            fail(f"should be less than {go_value(limit)}")
        elif value > limit:
            fail(f"should be less than or equal to {go_value(limit)}")
    if "minimum" in node:
        limit = node["minimum"]
        if node.get("exclusiveMinimum") and value <= limit:
            fail(f"should be greater than {go_value(limit)}")
        elif value < limit:
            fail(f"should be greater than or equal to {go_value(limit)}")
    factor = node.get("multipleOf")
    if factor and not (value / factor).is_integer():
        fail(f"should be a multiple of {go_value(factor)}")
    return out


def _array_causes(node: JSON, value: list[Any], path: str, name: str) -> list[Cause]:
    out: list[Cause] = []
    if "maxItems" in node and len(value) > node["maxItems"]:
        message = f"Too many: {len(value)}: must have at most {node['maxItems']} items"
        out.append(("FieldValueTooMany", path, message))
    if "minItems" in node and len(value) < node["minItems"]:
        least = node["minItems"]
        message = f"Invalid value: {len(value)}: {name} in body should have at least {least} items"
        out.append(("FieldValueInvalid", path, message))
    items = node.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            out += schema_causes(items, item, f"{path}[{i}]", f"{name}[{i}]")
    return out


def _object_causes(node: JSON, value: JSON, path: str, name: str) -> list[Cause]:
    out: list[Cause] = []
    if "maxProperties" in node and len(value) > node["maxProperties"]:
        message = f"Too many: {len(value)}: must have at most {node['maxProperties']} items"
        out.append(("FieldValueTooMany", path, message))
    if "minProperties" in node and len(value) < node["minProperties"]:
        least = node["minProperties"]
        message = (
            f"Invalid value: {len(value)}: {name} in body should have at least {least} properties"
        )
        out.append(("FieldValueInvalid", path, message))
    for key in node.get("required") or ():
        if key not in value:
            out.append(("FieldValueRequired", _join(path, key), "Required value"))
    properties = node.get("properties") or {}
    for key, child in properties.items():
        if key in value:
            out += schema_causes(child, value[key], _join(path, key), _join(name, key))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        for key, child in value.items():
            if key not in properties:
                out += schema_causes(extra, child, _join(path, key), _join(name, key))
    if node.get("x-kubernetes-embedded-resource"):
        for key in ("apiVersion", "kind"):
            if not value.get(key):
                out.append(
                    ("FieldValueRequired", _join(path, key), "Required value: must not be empty")
                )
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def list_type_causes(node: JSON, value: Any, path: str) -> list[Cause]:
    """Duplicates in ``x-kubernetes-list-type: set|map`` lists, anywhere below ``node``."""
    out: list[Cause] = []
    if isinstance(value, list):
        out += _duplicates(node, value, path)
        items = node.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                out += list_type_causes(items, item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, child in value.items():
            sub = property_schema(node, key)
            if isinstance(sub, dict):
                out += list_type_causes(sub, child, _join(path, key))
    return out


def _duplicates(node: JSON, value: list[Any], path: str) -> list[Cause]:
    kind = node.get("x-kubernetes-list-type")
    keys = node.get("x-kubernetes-list-map-keys") or []
    seen: list[Any] = []
    out: list[Cause] = []
    for i, item in enumerate(value):
        if kind == "set":
            ident = item
        elif kind == "map" and isinstance(item, dict):
            ident = {k: item[k] for k in keys if k in item}
        else:
            continue
        if ident in seen:
            out.append(
                ("FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {go_repr(ident)}")
            )
        else:
            seen.append(ident)
    return out


def default_causes(node: JSON, path: str) -> list[Cause]:
    """A CRD schema's ``default`` values checked against their own node, at ``<path>.default``
    (kube-apiserver reports them with an empty name: ``Invalid value: 3:  in body ...``)."""
    out: list[Cause] = []
    if "default" in node and node["default"] is not None:
        out += schema_causes(node, node["default"], f"{path}.default", "")
    for key, child in (node.get("properties") or {}).items():
        out += default_causes(child, f"{path}.properties[{key}]")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out += default_causes(node[key], f"{path}.{key}")
    return out
