"""kube-apiserver's estimated cost of a CEL rule, for the limits checked when a CRD is written.

kube-apiserver estimates each rule's worst-case cost with cel-go's estimator (sizes from the
schema: ``maxItems``/``maxProperties``/``maxLength``, or, where absent, as many as fit in a
3 MiB request), multiplies it by how many times the rule's node can occur (the sizes of the
lists and maps above it), and refuses a CRD where one rule exceeds 10,000,000 or all of them
together 100,000,000. This module computes that estimate on the checked expression that
cel-expr-python serializes (a ``cel.expr.CheckedExpr``), with cel-go's costs: 1 per identifier,
selection and function call, 0 per constant, 10 per list and 30 per map literal, a
comprehension's range size times its loop's cost, and the size-dependent costs of string and
list equality and ordering, ``contains``, ``startsWith``/``endsWith``, ``matches`` and ``in``.

Approximated: sizes are known only for values read from ``self``/``oldSelf`` (through fields,
indexes and comprehension variables) and for literals; any other value (a function's result)
counts as size 1 where cel-go and Kubernetes' libraries estimate more, so the emulator may
accept a rule kube-apiserver refuses, never the reverse for the shapes above. The minimum
serialized sizes that bound unbounded lists and maps follow kube-apiserver's for scalars,
``date``/``date-time``/``duration`` strings and objects' required fields only.
"""

from __future__ import annotations

import math
from typing import Any

from cloudcoil_sync.testing._internal.schema_validation import property_schema

__all__ = ["PER_RULE_LIMIT", "TOTAL_LIMIT", "cost_message", "estimate", "max_size"]

JSON = dict[str, Any]
PER_RULE_LIMIT = 10_000_000
TOTAL_LIMIT = 100_000_000
_REQUEST = 3 * 1024 * 1024  # kube-apiserver's maximum request size
_STRING_SIZE = {"duration": 32, "date": 12, "date-time": 37}  # kube's JSON size limits
_FORMAT_MIN_SIZE = {"duration": 4, "date": 12, "date-time": 22}
_MIN_SIZE = {"integer": 1, "number": 1, "boolean": 4, "string": 2}
_SIZED = {"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"}


def cost_message(description: str, cost: int, budget: int) -> str:
    """kube-apiserver's words for a cost over its budget."""
    factor = cost / budget
    if factor > 100:
        text = f"{description} exceeds budget by factor of more than 100x"
    elif factor > 1:
        text = f"{description} exceeds budget by factor of {factor:.1f}x"
    else:
        text = f"{description} exceeds budget"
    return (
        f"{text} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength "
        "where arrays, maps, and strings are declared)"
    )


def _min_size(node: JSON) -> int:
    kind = node.get("type")
    if kind == "object":
        size = 2
        for name in node.get("required") or []:
            child = (node.get("properties") or {}).get(name)
            size += len(name) + 4 + (_min_size(child) if isinstance(child, dict) else 1)
        return size
    if kind == "string" and node.get("format") in _FORMAT_MIN_SIZE:
        return _FORMAT_MIN_SIZE[node["format"]]
    return 2 if kind == "array" else _MIN_SIZE.get(str(kind), 1)


def max_size(node: JSON) -> int:
    """The most elements (list, map) or characters (string) ``node`` can hold in a request."""
    kind = node.get("type")
    limit = {"array": "maxItems", "object": "maxProperties"}.get(str(kind), "maxLength")
    bound = node.get(limit)
    if isinstance(bound, int):
        return max(bound, 0)
    if kind == "array":
        items = node.get("items")
        return (_REQUEST - 2) // (_min_size(items if isinstance(items, dict) else {}) + 1)
    if kind == "object":
        extra = node.get("additionalProperties")
        value = _min_size(extra) if isinstance(extra, dict) else 1
        return (_REQUEST - 2) // (value + 6)
    if kind == "string" and node.get("format") in _STRING_SIZE:
        return _STRING_SIZE[node["format"]]
    return _REQUEST - 2


def _fields(buf: bytes) -> list[tuple[int, Any]]:
    """The (field number, value) pairs of a protobuf message (varints and byte strings)."""
    out: list[tuple[int, Any]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            byte = buf[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while i < len(buf):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 2:
            size = varint()
            out.append((number, buf[i : i + size]))
            i += size
        else:  # fixed 64 / 32 bits (double and float constants)
            width = 8 if wire == 1 else 4
            out.append((number, buf[i : i + width]))
            i += width
    return out


def _first(buf: bytes, number: int) -> Any:
    return next((value for n, value in _fields(buf) if n == number), None)


def _all(buf: bytes, number: int) -> list[Any]:
    return [value for n, value in _fields(buf) if n == number]


class _Estimator:
    """cel-go's estimate over a ``cel.expr.Expr``; ``scope`` maps identifiers to schemas."""

    def __init__(self, node: JSON, root: bool) -> None:
        self.scope: dict[str, JSON | None] = {"self": node, "oldSelf": node}
        self.root = root

    def cost(self, expr: bytes) -> tuple[int, JSON | None, int]:
        """(cost, schema of the value or None, size of the value)."""
        for number, value in _fields(expr):
            if number == 3:  # constant
                text = _first(value, 6) or _first(value, 7)
                return 0, None, len(text) if isinstance(text, bytes) else 1
            if number == 4:  # identifier
                schema = self.scope.get(_first(value, 1).decode())
                return 1, schema, max_size(schema) if schema else 1
            if number == 5:
                return self._select(value)
            if number == 6:
                return self._call(value)
            if number == 7:  # list literal
                elements = [self.cost(e)[0] for e in _all(value, 1)]
                return 10 + sum(elements), None, len(elements)
            if number == 8:  # map or message literal
                entries = _all(value, 2)
                parts = [
                    self.cost(e)[0] for entry in entries for e in _all(entry, 3) + _all(entry, 4)
                ]
                return 30 + sum(parts), None, len(entries)
            if number == 9:
                return self._comprehension(value)
        return 0, None, 1

    def _select(self, select: bytes) -> tuple[int, JSON | None, int]:
        cost, schema, _ = self.cost(_first(select, 1) or b"")
        child = _child(schema, _first(select, 2).decode()) if schema else None
        if _first(select, 3):  # has(): a presence test
            return cost + 1, None, 1
        return cost + 1, child, max_size(child) if child else 1

    def _call(self, call: bytes) -> tuple[int, JSON | None, int]:
        function = (_first(call, 2) or b"").decode()
        target = _first(call, 1)
        parts = ([self.cost(target)] if target else []) + [self.cost(a) for a in _all(call, 3)]
        total = sum(part[0] for part in parts)
        sizes = [part[2] for part in parts]
        if function in ("_&&_", "_||_"):
            return total, None, 1
        if function == "_?_:_" and len(parts) == 3:
            return parts[0][0] + max(parts[1][0], parts[2][0]), None, max(sizes[1:])
        if function == "_[_]" and len(parts) == 2:
            schema = parts[0][1]
            child = _element(schema) if schema else None
            return total + 1, child, max_size(child) if child else 1
        if function in _SIZED and len(sizes) == 2:
            return total + _factor(min(sizes), 0.1), None, 1
        if function in ("startsWith", "endsWith") and len(sizes) == 2:
            return total + _factor(sizes[1], 0.1), None, 1
        if function == "contains" and len(sizes) == 2:
            return total + _factor(sizes[0], 0.1) * _factor(sizes[1], 0.1), None, 1
        if function == "matches" and len(sizes) == 2:
            return total + _factor(sizes[0] + 1, 0.1) * _factor(sizes[1], 0.25), None, 1
        if function == "@in" and len(sizes) == 2:
            return total + sizes[1], None, 1
        return total + 1, None, 1

    def _comprehension(self, comp: bytes) -> tuple[int, JSON | None, int]:
        range_cost, schema, count = self.cost(_first(comp, 2) or b"")
        variable = (_first(comp, 1) or b"").decode()
        saved = self.scope.get(variable)
        self.scope[variable] = _element(schema, keys=True) if schema else None
        loop = self.cost(_first(comp, 5) or b"")[0] + self.cost(_first(comp, 6) or b"")[0]
        self.scope[variable] = saved
        init = _first(comp, 4) or b""
        init_cost = self.cost(init)[0]
        result = self.cost(_first(comp, 7) or b"")[0]
        builds_list = _first(init, 7) is not None  # map() and filter() accumulate a list
        return range_cost + init_cost + count * loop + result, None, count if builds_list else 1


def _factor(size: int, factor: float) -> int:
    return math.ceil(size * factor)


def _child(schema: JSON, name: str) -> JSON | None:
    child = property_schema(schema, name)
    if child is None and name == "metadata":
        return {"type": "object", "properties": {"name": {"type": "string"}}}
    return child if isinstance(child, dict) else None


def _element(schema: JSON, keys: bool = False) -> JSON | None:
    """A list's items, a map's values (or, ``keys``, its keys: strings)."""
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        return dict(schema["items"])
    if schema.get("type") == "object":
        if keys:
            return {"type": "string"}
        extra = schema.get("additionalProperties")
        return extra if isinstance(extra, dict) else None
    return None


def estimate(serialized: bytes, node: JSON, root: bool) -> int:
    """The estimated worst-case cost of a compiled rule (``Expression.serialize()``) whose
    ``self`` is ``node``."""
    checked = _first(serialized, 2) or b""  # google.protobuf.Any's value: a CheckedExpr
    expr = _first(checked, 4)
    if expr is None:
        return 0
    return _Estimator(node, root).cost(expr)[0]
