"""What the structural schema looks like for each supported pydantic construct."""

from __future__ import annotations

import datetime
import enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cloudcoil_sync.crd import CEL, ListType, PrinterColumn

from .models import spec_schema


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Port(BaseModel):
    name: str
    port: int = 80


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    known: int = 0


class Embedded(BaseModel):
    api_version: str = Field(default="v1", alias="apiVersion")
    kind: str = "ConfigMap"
    metadata: dict[str, Any] | None = None
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-embedded-resource": True})


class Spec(BaseModel):
    count: int = 0
    ratio: float | None = None
    flag: bool = False
    text: Annotated[str, Field(min_length=1, max_length=10, pattern="^[a-z]+$")] = "a"
    when: datetime.datetime | None = None
    port: int | str = 80
    maybe_port: int | str | None = None
    anything: Any = None
    mapping: dict[str, int] = Field(default_factory=dict)
    untyped: dict[str, Any] = Field(default_factory=dict)
    color: Color = Color.RED
    mode: Literal["fast", "slow"] = "fast"
    fixed: Literal["only"] = "only"
    positive: Annotated[int, Field(gt=0, le=9)] = 1
    described: str = Field(default="", description="Explained", examples=["x", "y"])
    ports: Annotated[list[Port], ListType("map", keys=("name",))] = Field(default_factory=list)
    tags: Annotated[list[str], ListType("set")] = Field(default_factory=list)
    loose: Loose | None = None
    embedded: Embedded | None = None
    pair: tuple[int, ...] = ()


def test_scalars_and_nullable() -> None:
    properties = spec_schema(Spec)["properties"]
    assert properties["count"]["type"] == "integer"
    assert properties["ratio"] == {
        "type": "number",
        "nullable": True,
        "default": None,
        "title": "Ratio",
    }
    assert properties["flag"]["type"] == "boolean"
    text = properties["text"]
    assert (text["minLength"], text["maxLength"], text["pattern"]) == (1, 10, "^[a-z]+$")
    assert properties["when"]["format"] == "date-time" and properties["when"]["nullable"]


def test_int_or_string() -> None:
    properties = spec_schema(Spec)["properties"]
    port = properties["port"]
    assert port["x-kubernetes-int-or-string"] is True
    assert port["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "type" not in port
    maybe = properties["maybe_port"]
    assert maybe["x-kubernetes-int-or-string"] is True and maybe["nullable"] is True


def test_any_and_open_objects_preserve_unknown_fields() -> None:
    properties = spec_schema(Spec)["properties"]
    anything = properties["anything"]
    assert anything["x-kubernetes-preserve-unknown-fields"] is True
    assert anything["nullable"] is True and "type" not in anything
    assert properties["mapping"]["additionalProperties"] == {"type": "integer"}
    untyped = properties["untyped"]
    assert untyped["type"] == "object"
    assert untyped["x-kubernetes-preserve-unknown-fields"] is True
    assert "additionalProperties" not in untyped
    loose = properties["loose"]
    assert loose["x-kubernetes-preserve-unknown-fields"] is True
    assert loose["properties"]["known"]["type"] == "integer"


def test_enums_literals_and_constants() -> None:
    properties = spec_schema(Spec)["properties"]
    assert properties["color"]["enum"] == ["red", "blue"]
    assert properties["color"]["type"] == "string"
    assert properties["color"]["default"] == "red"
    assert properties["mode"]["enum"] == ["fast", "slow"]
    assert properties["fixed"]["enum"] == ["only"]
    assert "const" not in repr(properties)


def test_bounds_become_openapi_v3_exclusive_flags() -> None:
    positive = spec_schema(Spec)["properties"]["positive"]
    assert positive["minimum"] == 0 and positive["exclusiveMinimum"] is True
    assert positive["maximum"] == 9 and "exclusiveMaximum" not in positive


def test_both_inclusive_and_exclusive_bounds_keep_the_stricter() -> None:
    class Bounds(BaseModel):
        value: Annotated[int, Field(ge=5, gt=1, lt=10, le=20)] = 6

    value = spec_schema(Bounds)["properties"]["value"]
    assert value["minimum"] == 5 and "exclusiveMinimum" not in value
    assert value["maximum"] == 10 and value["exclusiveMaximum"] is True


def test_descriptions_and_examples() -> None:
    described = spec_schema(Spec)["properties"]["described"]
    assert described["description"] == "Explained"
    assert described["example"] == "x"
    assert "examples" not in described


def test_list_types() -> None:
    properties = spec_schema(Spec)["properties"]
    ports = properties["ports"]
    assert ports["x-kubernetes-list-type"] == "map"
    assert ports["x-kubernetes-list-map-keys"] == ["name"]
    assert ports["items"]["required"] == ["name"]
    assert properties["tags"]["x-kubernetes-list-type"] == "set"
    assert properties["pair"] == {
        "type": "array",
        "items": {"type": "integer"},
        "default": [],
        "title": "Pair",
    }


def test_embedded_resources_keep_metadata_open() -> None:
    embedded = spec_schema(Spec)["properties"]["embedded"]
    assert embedded["x-kubernetes-embedded-resource"] is True
    assert embedded["properties"]["metadata"] == {"type": "object"}


def test_cel_rules_accumulate_on_fields_and_models() -> None:
    class Ranged(BaseModel):
        model_config = ConfigDict(
            json_schema_extra={"x-kubernetes-validations": [{"rule": "self.low <= self.high"}]}
        )
        low: Annotated[int, CEL("self >= 0"), CEL("self < 100", message="too big")] = 0
        high: int = 0

    schema = spec_schema(Ranged)
    assert schema["x-kubernetes-validations"] == [{"rule": "self.low <= self.high"}]
    assert schema["properties"]["low"]["x-kubernetes-validations"] == [
        {"rule": "self >= 0"},
        {"rule": "self < 100", "message": "too big"},
    ]


def test_nested_models_are_inlined_at_every_use() -> None:
    class Inner(BaseModel):
        value: int = 0

    class Outer(BaseModel):
        first: Inner = Field(default_factory=Inner)
        second: Inner | None = None
        many: list[Inner] = Field(default_factory=list)
        named: dict[str, Inner] = Field(default_factory=dict)

    properties = spec_schema(Outer)["properties"]
    assert properties["first"]["properties"]["value"]["type"] == "integer"
    assert properties["second"]["nullable"] is True
    assert properties["many"]["items"]["type"] == "object"
    assert properties["named"]["additionalProperties"]["properties"]["value"]["type"] == "integer"


def test_field_description_beside_a_reference_is_kept() -> None:
    class Inner(BaseModel):
        """Inner docs."""

        value: int = 0

    class Outer(BaseModel):
        inner: Inner = Field(default_factory=Inner, description="Field docs")

    assert spec_schema(Outer)["properties"]["inner"]["description"] == "Field docs"


def test_printer_column_markers_never_reach_the_schema() -> None:
    class Columns(BaseModel):
        size: Annotated[int, PrinterColumn("Size")] = 0

    assert "x-cloudcoil-printer-column" not in repr(spec_schema(Columns))
