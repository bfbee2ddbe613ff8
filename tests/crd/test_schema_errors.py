"""Every model feature a structural schema cannot express raises SchemaError naming where."""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.resources import Resource
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    computed_field,
    field_serializer,
    model_serializer,
)

from cloudcoil_sync.crd import CRD, ListType, PrinterColumn, SchemaError, custom_resource
from cloudcoil_sync.crd._internal.schema import structural_schema

from .models import resource_with, spec_schema


def fails(spec: Any, message: str, **fields: Any) -> SchemaError:
    with pytest.raises(SchemaError, match=re.escape(message)) as caught:
        spec_schema(spec, **fields)
    assert isinstance(caught.value, ValueError)
    return caught.value


def test_recursion_names_the_field_path() -> None:
    class Node(BaseModel):
        value: int = 0
        items: list[Node] = Field(default_factory=list)

    error = fails(Node, "recursive schema reference 'Node' is unsupported")
    assert str(error).startswith("Thing.spec.items[]: ")


def test_mutual_recursion() -> None:
    class Ping(BaseModel):
        pong: Pong | None = None

    class Pong(BaseModel):
        ping: Ping | None = None

    Ping.model_rebuild()
    fails(Ping, "Thing.spec.pong.ping: recursive schema reference 'Ping' is unsupported")


def test_extra_forbid() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        value: int = 0

    fails(Strict, "Thing.spec: additionalProperties=false is forbidden by Kubernetes")


def test_extra_allow_with_typed_extras() -> None:
    class Typed(BaseModel):
        model_config = ConfigDict(extra="allow")
        __pydantic_extra__: dict[str, int] = Field(init=False)
        value: int = 0

    fails(Typed, "Thing.spec: properties and additionalProperties cannot coexist in a CRD")


@pytest.mark.parametrize(
    "annotation",
    [
        int | float,
        str | bool,
        decimal.Decimal,
        Annotated[int, Field(ge=0)] | str,
        list[int] | dict[str, int],
    ],
)
def test_unions(annotation: Any) -> None:
    class Union(BaseModel):
        value: annotation | None = None

    fails(Union, "Thing.spec.value: unions must be T | None or unconstrained int | str")


def test_model_unions() -> None:
    class A(BaseModel):
        a: int = 0

    class B(BaseModel):
        b: int = 0

    class Either(BaseModel):
        value: A | B = Field(default_factory=A)

    fails(Either, "Thing.spec.value: unions must be T | None")


def test_discriminated_unions() -> None:
    class Cat(BaseModel):
        pet: Literal["cat"] = "cat"

    class Dog(BaseModel):
        pet: Literal["dog"] = "dog"

    class Owner(BaseModel):
        animal: Cat | Dog = Field(default_factory=Cat, discriminator="pet")

    fails(Owner, "Thing.spec.animal: unsupported schema keywords: discriminator, oneOf")


def test_sets_and_frozensets() -> None:
    class Sets(BaseModel):
        names: set[str] = Field(default_factory=set)

    class Frozen(BaseModel):
        names: frozenset[int] = frozenset()

    fails(Sets, "Thing.spec.names: uniqueItems/set types are unsupported")
    fails(Frozen, "use a list with x-kubernetes-list-type='set'")


def test_fixed_tuples() -> None:
    class Pair(BaseModel):
        pair: tuple[int, str] = (0, "")

    fails(Pair, "Thing.spec.pair: unsupported schema keywords: prefixItems")


def test_types_without_json_schema() -> None:
    class Hooks(BaseModel):
        callback: Callable[[], None] | None = None

    fails(Hooks, "Thing: Cannot generate a JsonSchema for core_schema.CallableSchema")


def test_null_only_fields() -> None:
    class Nothing(BaseModel):
        value: None = None

    fails(Nothing, "Thing.spec.value: null-only fields are unsupported")


def test_computed_fields() -> None:
    class Computed(BaseModel):
        value: int = 0

        @computed_field  # type: ignore[prop-decorator]
        @property
        def double(self) -> int:
            return self.value * 2

    fails(Computed, "Computed: computed fields are unsupported in stored resource models")


def test_excluded_fields() -> None:
    class Secretive(BaseModel):
        secret: str = Field(default="", exclude=True)

    fails(Secretive, "Secretive.secret: excluded fields are unsupported")


def test_field_and_model_serializers() -> None:
    class FieldSerialized(BaseModel):
        value: int = 0

        @field_serializer("value")
        def _value(self, value: int) -> str:
            return str(value)

    class ModelSerialized(BaseModel):
        value: int = 0

        @model_serializer
        def _dump(self) -> dict[str, Any]:
            return {"v": self.value}

    class Annotated_(BaseModel):
        value: Annotated[int, PlainSerializer(str)] = 0

    fails(FieldSerialized, "FieldSerialized: custom serializers require an explicit schema")
    fails(ModelSerialized, "ModelSerialized: custom serializers require an explicit schema")
    fails(Annotated_, "Annotated_.value: custom serializers require an explicit schema")


def test_mismatched_aliases() -> None:
    class Split(BaseModel):
        value: int = Field(default=0, validation_alias="in", serialization_alias="out")

    class Choices(BaseModel):
        value: int = Field(default=0, validation_alias=AliasChoices("a", "b"))

    fails(Split, "Split.value: validation and serialization aliases must match")
    fails(Choices, "Choices.value: validation and serialization aliases must match")


def test_conflicting_keywords_around_a_reference() -> None:
    class Inner(BaseModel):
        value: int = 0

    class Outer(BaseModel):
        inner: Annotated[Inner, Field(json_schema_extra={"type": "array"})] = Field(
            default_factory=Inner
        )

    fails(Outer, "Thing.spec.inner: conflicting 'type' constraints around a reference or union")


def test_constraints_without_a_type() -> None:
    class Untyped(BaseModel):
        value: Annotated[Any, Field(json_schema_extra={"minimum": 1})] = None

    fails(Untyped, "Thing.spec.value: constraints require an explicit structural type")


def test_malformed_kubernetes_extensions() -> None:
    def model(extra: dict[str, Any], annotation: Any = int) -> type[BaseModel]:
        class Extended(BaseModel):
            value: Annotated[annotation, Field(json_schema_extra=extra)] = None

        return Extended

    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"x-kubernetes-preserve-unknown-fields": False},
            "x-kubernetes-preserve-unknown-fields must be true",
        ),
        ({"x-kubernetes-int-or-string": 1}, "x-kubernetes-int-or-string must be true"),
        ({"x-kubernetes-embedded-resource": True}, "embedded resources require type object"),
        ({"x-kubernetes-int-or-string": True}, "int-or-string must not specify type"),
        ({"x-kubernetes-map-type": "atomic"}, "map-type requires an object"),
        ({"x-kubernetes-list-map-keys": ["a"]}, "list-map-keys requires list-type='map'"),
        ({"x-kubernetes-validations": [{"rule": " "}]}, "validations must be a list of nonempty"),
        ({"x-kubernetes-validations": "self > 0"}, "validations must be a list of nonempty"),
        ({"x-kubernetes-list-type": "set"}, "list-type requires an array"),
        ({"x-unknown": 1}, "unsupported schema keywords: x-unknown"),
    ]
    for extra, message in cases:
        fails(model(extra), f"Thing.spec.value: {message}")
    fails(
        model({"x-kubernetes-map-type": "bogus"}, dict[str, int]),
        "map-type requires an object and must be atomic or granular",
    )


def test_list_type_rules() -> None:
    class Keyed(BaseModel):
        name: str
        optional: str | None = None
        unset: str

    class Strings(BaseModel):
        values: Annotated[list[str], ListType("map", keys=("name",))] = Field(default_factory=list)

    class NullableKey(BaseModel):
        values: Annotated[list[Keyed], ListType("map", keys=("optional",))] = Field(
            default_factory=list
        )

    class MissingKey(BaseModel):
        values: Annotated[list[Keyed], ListType("map", keys=("other",))] = Field(
            default_factory=list
        )

    class ObjectSet(BaseModel):
        values: Annotated[list[Keyed], ListType("set")] = Field(default_factory=list)

    class NullableSet(BaseModel):
        values: Annotated[list[str | None], ListType("set")] = Field(default_factory=list)

    class NotAList(BaseModel):
        value: Annotated[int, ListType("atomic")] = 0

    fails(Strings, "Thing.spec.values: map lists need object items and nonempty list-map-keys")
    fails(NullableKey, "list map key 'optional' must be a nonnullable scalar property")
    fails(MissingKey, "list map key 'other' must be a nonnullable scalar property")
    fails(ObjectSet, "Thing.spec.values: set list object/array items must be atomic")
    fails(NullableSet, "Thing.spec.values: set/map list items cannot be nullable")
    fails(NotAList, "Thing.spec.value: list-type requires an array")


def test_list_map_key_must_be_required_or_defaulted() -> None:
    class Item(BaseModel):
        name: str = Field(default_factory=lambda: "generated")

    class Holder(BaseModel):
        items: Annotated[list[Item], ListType("map", keys=("name",))] = Field(default_factory=list)

    class Defaulted(BaseModel):
        label: str = "x"

    class Ok(BaseModel):
        items: Annotated[list[Defaulted], ListType("map", keys=("label",))] = Field(
            default_factory=list
        )

    assert spec_schema(Ok)["properties"]["items"]["x-kubernetes-list-type"] == "map"
    fails(Holder, "Thing.spec.items: list map key 'name' must be required or have a default")


def test_duplicate_markers() -> None:
    class TwoLists(BaseModel):
        values: Annotated[list[str], ListType("atomic"), ListType("set")] = Field(
            default_factory=list
        )

    class TwoColumns(BaseModel):
        value: Annotated[int, PrinterColumn("A"), PrinterColumn("B")] = 0

    fails(TwoLists, "A field can declare only one list type")
    fails(TwoColumns, "A field can declare only one PrinterColumn")


def test_printer_column_inference_limits() -> None:
    class Inner(BaseModel):
        value: int = 0

    class InList(BaseModel):
        values: list[Annotated[int, PrinterColumn("V")]] = Field(default_factory=list)

    class InMap(BaseModel):
        values: dict[str, Annotated[int, PrinterColumn("V")]] = Field(default_factory=dict)

    class NotScalar(BaseModel):
        inner: Annotated[Inner, PrinterColumn("Inner")] = Field(default_factory=Inner)

    fails(InList, "PrinterColumn inside a list/map needs an explicit json_path")
    fails(InMap, "PrinterColumn inside a list/map needs an explicit json_path")
    fails(NotScalar, ".spec.inner: PrinterColumn needs a scalar field or explicit type")


class Status(BaseModel):
    phase: str = ""


def test_required_status() -> None:
    with pytest.raises(SchemaError, match=r"status must be optional \(for example Status"):
        CRD(resource_with(int, status=(Status, ...)))


def test_status_must_be_an_object() -> None:
    with pytest.raises(SchemaError, match="status must be an object or optional object"):
        CRD(resource_with(int, status=(str | None, None)))
    assert CRD(resource_with(int, status=(str | None, None)), status=False).status is False


def test_status_true_needs_a_status_field() -> None:
    with pytest.raises(SchemaError, match="status=True requires a status field"):
        CRD(resource_with(int), status=True)


def test_api_version_needs_its_alias() -> None:
    class NoAlias(Resource):
        api_version: Literal["example.com/v1"] = "example.com/v1"
        kind: Literal["NoAlias"] = "NoAlias"

    with pytest.raises(
        SchemaError,
        match=re.escape("api_version must declare Field(default=..., alias='apiVersion')"),
    ):
        CRD(NoAlias, plural="noaliases")


def test_kind_and_metadata_keep_their_names() -> None:
    @custom_resource(api_version="example.com/v1", plural="renames")
    class Renamed(Resource):
        metadata: ObjectMeta | None = Field(default=None, alias="meta")

    with pytest.raises(
        SchemaError, match="kind and metadata must retain their Kubernetes field names"
    ):
        CRD(Renamed)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"properties": {"a": True}}, "Root.a: boolean schemas are unsupported"),
        ({"$ref": "http://x/y"}, "Root: only local $defs references are supported"),
        ({"$ref": "#/$defs/Missing"}, "Root: unresolved schema reference 'Missing'"),
        ({"anyOf": {"type": "string"}}, "Root: anyOf must be a list"),
        ({"type": ["string", "integer"]}, "Root: mixed-type enums/unions are unsupported"),
        ({"type": ["string"]}, "Root: mixed-type enums/unions are unsupported"),
        ({"type": "file"}, "Root: type must be a supported OpenAPI primitive"),
        ({"type": "array"}, "Root: arrays require an items schema"),
        ({"type": "string", "const": "a", "enum": ["b"]}, "Root: const conflicts with enum"),
    ],
)
def test_raw_json_schema_errors(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(message)):
        structural_schema(schema, "Root")


def test_json_schema_type_lists_with_null_are_nullable() -> None:
    converted = structural_schema({"type": ["string", "null"]}, "Root")
    assert converted == {"type": "string", "nullable": True}
    escaped = structural_schema(
        {"$defs": {"a/b": {"type": "integer"}}, "$ref": "#/$defs/a~1b"}, "Root"
    )
    assert escaped == {"type": "integer"}
