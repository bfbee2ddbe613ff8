"""Annotated markers that shape a generated CRD: printer columns, CEL rules, list types.

Each marker is a frozen dataclass usable inside ``typing.Annotated``; pydantic calls its
``__get_pydantic_json_schema__`` hook, which records the marker in the field's JSON Schema.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = ["CEL", "COLUMN_KEY", "ListType", "PrinterColumn", "SchemaError"]

# Private extension carrying an Annotated PrinterColumn until the CRD builder collects it.
COLUMN_KEY = "x-cloudcoil-printer-column"
_COLUMN_TYPES = ("string", "integer", "number", "boolean", "date")


class SchemaError(ValueError):
    """A model cannot be represented faithfully as a structural CRD schema."""


@dataclass(frozen=True)
class PrinterColumn:
    """A ``kubectl get`` column.

    Inside ``Annotated[...]`` the JSON path and scalar type are inferred from the field;
    in ``CRD(columns=[...])`` supply ``json_path`` (the type then defaults to string).
    """

    name: str
    json_path: str | None = None
    type: Literal["string", "integer", "number", "boolean", "date"] | None = None
    description: str | None = None
    format: str | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("PrinterColumn name must not be empty")
        path = self.json_path
        if path is not None and (
            not isinstance(path, str) or not path.startswith(".") or "\n" in path or "\r" in path
        ):
            raise ValueError("json_path must start with '.' and contain no newline")
        if self.type is not None and self.type not in _COLUMN_TYPES:
            raise ValueError("PrinterColumn type must be string, integer, number, boolean, or date")
        if type(self.priority) is not int or self.priority < 0:
            raise ValueError("PrinterColumn priority must be a nonnegative integer")

    def declared(self) -> dict[str, Any]:
        """The explicitly given attributes, in declaration order."""
        values = ((item.name, getattr(self, item.name)) for item in fields(self))
        return {key: value for key, value in values if value is not None}

    def manifest(self) -> dict[str, Any]:
        """The ``additionalPrinterColumns`` entry (name, type, ..., priority, jsonPath)."""
        if self.json_path is None:
            raise ValueError("json_path is required outside an Annotated field")
        entry = self.declared()
        json_path = entry.pop("json_path")
        entry.setdefault("type", "string")
        entry = {"name": entry.pop("name"), "type": entry.pop("type"), **entry}
        entry["jsonPath"] = json_path
        return entry

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        result = dict(handler(schema))
        if COLUMN_KEY in result:
            raise SchemaError("A field can declare only one PrinterColumn")
        result[COLUMN_KEY] = self.declared()
        return result


@dataclass(frozen=True)
class CEL:
    """A CEL rule enforced by the API server (``x-kubernetes-validations``).

    Pydantic validators are Python code the API server never runs; CEL is how a constraint
    reaches objects written by kubectl or other clients.
    """

    rule: str
    message: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rule, str) or not self.rule.strip():
            raise ValueError("CEL rule must not be empty")

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        result = dict(handler(schema))
        rule: dict[str, str] = {"rule": self.rule}
        if self.message is not None:
            rule["message"] = self.message
        result["x-kubernetes-validations"] = [*result.get("x-kubernetes-validations", []), rule]
        return result


@dataclass(frozen=True)
class ListType:
    """Kubernetes list semantics (``x-kubernetes-list-type``) for an Annotated list field.

    Map keys name serialized (wire) field names, as in manifests.
    """

    type: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.type not in ("atomic", "set", "map"):
            raise ValueError("ListType must be atomic, set, or map")
        keys = self.keys
        if isinstance(keys, str) or any(not isinstance(key, str) or not key for key in keys):
            raise ValueError("ListType keys must be nonempty field names")
        object.__setattr__(self, "keys", tuple(keys))
        if self.type != "map":
            if self.keys:
                raise ValueError("Only map lists accept keys")
        elif not self.keys or len(set(self.keys)) != len(self.keys):
            raise ValueError("Map lists require nonempty, unique keys")

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        result = dict(handler(schema))
        if "x-kubernetes-list-type" in result:
            raise SchemaError("A field can declare only one list type")
        result["x-kubernetes-list-type"] = self.type
        if self.keys:
            result["x-kubernetes-list-map-keys"] = list(self.keys)
        return result
