"""CRD(...): option precedence, columns, status, names and their error messages."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.resources import Resource
from pydantic import BaseModel, Field, create_model

from cloudcoil_sync.crd import CEL, CRD, ListType, PrinterColumn, custom_resource

from .widget import Widget


def version(crd: CRD) -> dict[str, Any]:
    result: dict[str, Any] = crd.manifest()["spec"]["versions"][0]
    return result


def test_explicit_arguments_override_the_declaration() -> None:
    crd = CRD(
        Widget,
        plural="gadgets",
        scope="Cluster",
        singular="gadget",
        short_names=["gd"],
        categories=["all", "toys"],
        status=False,
        columns=[PrinterColumn("Message", json_path=".spec.message")],
    )
    manifest = crd.manifest()
    assert manifest["metadata"]["name"] == "gadgets.examples.cloudcoil.dev"
    assert manifest["spec"]["scope"] == "Cluster" and crd.scope == "Cluster"
    assert manifest["spec"]["names"] == {
        "plural": "gadgets",
        "singular": "gadget",
        "kind": "Widget",
        "listKind": "WidgetList",
        "shortNames": ["gd"],
        "categories": ["all", "toys"],
    }
    assert "subresources" not in manifest["spec"]["versions"][0]
    assert manifest["spec"]["versions"][0]["additionalPrinterColumns"] == [
        {"name": "Message", "type": "string", "priority": 0, "jsonPath": ".spec.message"}
    ]


def test_empty_columns_disable_the_default_age_column() -> None:
    assert "additionalPrinterColumns" not in version(CRD(Widget, columns=[]))


def test_declared_columns_replace_annotated_ones() -> None:
    @custom_resource(
        api_version="example.com/v1",
        plural="boxes",
        columns=[PrinterColumn("Size", json_path=".spec.size", type="integer", priority=1)],
    )
    class Box(Resource):
        spec: dict[str, int] | None = None

    assert version(CRD(Box))["additionalPrinterColumns"] == [
        {"name": "Size", "type": "integer", "priority": 1, "jsonPath": ".spec.size"}
    ]


def test_annotated_columns_infer_path_type_and_keep_details() -> None:
    class Spec(BaseModel):
        size: Annotated[int, PrinterColumn("Size", priority=1)] = 0
        ratio: Annotated[float | None, PrinterColumn("Ratio", description="Fill")] = None
        ready: Annotated[bool, PrinterColumn("Ready")] = False
        when: Annotated[
            str | None, Field(json_schema_extra={"format": "date-time"}), PrinterColumn("When")
        ] = None
        custom: Annotated[
            list[str], PrinterColumn("First", json_path=".spec.custom[0]", type="string")
        ] = Field(default_factory=list)
        dotted: Annotated[str, Field(alias="app.io/name"), PrinterColumn("App", format="name")] = ""

    @custom_resource(api_version="example.com/v1", plural="crates")
    class Crate(Resource):
        spec: Spec | None = None

    assert version(CRD(Crate))["additionalPrinterColumns"] == [
        {"name": "Size", "type": "integer", "priority": 1, "jsonPath": ".spec.size"},
        {
            "name": "Ratio",
            "type": "number",
            "description": "Fill",
            "priority": 0,
            "jsonPath": ".spec.ratio",
        },
        {"name": "Ready", "type": "boolean", "priority": 0, "jsonPath": ".spec.ready"},
        {"name": "When", "type": "date", "priority": 0, "jsonPath": ".spec.when"},
        {"name": "First", "type": "string", "priority": 0, "jsonPath": ".spec.custom[0]"},
        {
            "name": "App",
            "type": "string",
            "format": "name",
            "priority": 0,
            "jsonPath": r".spec.app\.io\/name",
        },
        {"name": "Age", "type": "date", "priority": 0, "jsonPath": ".metadata.creationTimestamp"},
    ]


def test_status_subresource_follows_the_status_field() -> None:
    @custom_resource(api_version="example.com/v1", plural="plains")
    class Plain(Resource):
        spec: dict[str, str] | None = None

    assert "subresources" not in version(CRD(Plain))
    assert CRD(Plain).status is False
    assert version(CRD(Widget))["subresources"] == {"status": {}}
    assert "subresources" not in version(CRD(Widget, status=False))


def test_status_declared_false_on_the_decorator() -> None:
    class Status(BaseModel):
        phase: str = ""

    @custom_resource(api_version="example.com/v1", plural="quiets", status=False)
    class Quiet(Resource):
        status: Status | None = None

    assert "subresources" not in version(CRD(Quiet))
    assert "subresources" in version(CRD(Quiet, status=True))


def test_cluster_scope_from_the_decorator() -> None:
    @custom_resource(api_version="example.com/v1", plural="regions", scope="Cluster")
    class Region(Resource):
        pass

    crd = CRD(Region)
    assert crd.scope == "Cluster" and crd.manifest()["spec"]["scope"] == "Cluster"


def test_a_resource_without_spec_is_fine() -> None:
    @custom_resource(api_version="example.com/v1", plural="markers")
    class Marker(Resource):
        pass

    schema = version(CRD(Marker))["schema"]["openAPIV3Schema"]
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata"}


def _kind(api_version: str, kind: str = "Thing") -> type[Resource]:
    return create_model(
        "Thing",
        __base__=Resource,
        api_version=(Any, Field(default=api_version, alias="apiVersion")),
        kind=(Any, kind),
    )


@pytest.mark.parametrize(
    ("resource", "arguments", "message"),
    [
        (_kind("v1"), {}, "api_version must have exactly one group/version separator"),
        (_kind("a/b/c"), {}, "api_version must have exactly one group/version separator"),
        (_kind("/v1"), {}, "CRDs require an api_version with a valid DNS group and version"),
        (_kind("Example.com/v1"), {}, "CRDs require an api_version with a valid DNS group"),
        (_kind(f"{'a' * 64}.com/v1"), {}, "CRDs require an api_version with a valid DNS group"),
        (_kind("example.com/1v"), {}, "CRD version must be a DNS label starting with a letter"),
        (_kind("example.com/v1", "my-kind"), {}, "CRD kind must be an alphanumeric identifier"),
        (_kind("example.com/v1"), {"plural": "Things"}, "plural must be a DNS label starting"),
        (_kind("example.com/v1"), {"singular": "1thing"}, "singular must be a DNS label starting"),
        (_kind("example.com/v1"), {"scope": "Global"}, "scope must be Namespaced or Cluster"),
        (_kind("example.com/v1"), {"scope": ""}, "scope must be Namespaced or Cluster"),
        (_kind("example.com/v1"), {"short_names": ["Bad"]}, "short_names must contain DNS label"),
        (_kind("example.com/v1"), {"short_names": "th"}, "short_names must contain DNS label"),
        (_kind("example.com/v1"), {"categories": ["a b"]}, "categories must contain DNS label"),
        (
            _kind("example.com/v1"),
            {"columns": [PrinterColumn("Bare")]},
            "json_path is required outside an Annotated field",
        ),
    ],
)
def test_invalid_definitions(
    resource: type[Resource], arguments: dict[str, Any], message: str
) -> None:
    arguments = {"plural": "things", **arguments}
    with pytest.raises(ValueError, match=re.escape(message)):
        CRD(resource, **arguments)


def test_overlong_crd_name() -> None:
    group = ".".join(["a" * 60] * 4)  # 243 characters, a valid DNS name
    with pytest.raises(ValueError, match=r"^CRD metadata.name exceeds 253 characters$"):
        CRD(_kind(f"{group}/v1"), plural="p" * 20)


def test_missing_type_defaults_are_reported() -> None:
    class Bare(Resource):
        pass

    with pytest.raises(ValueError, match="Bare needs string api_version and kind defaults"):
        CRD(Bare, plural="bares")


def test_resource_argument_must_be_a_resource_class() -> None:
    with pytest.raises(TypeError, match=r"^resource must be a Resource subclass, got "):
        CRD(BaseModel, plural="models")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^resource must be a Resource subclass, got "):
        CRD(ConfigMap(), plural="models")  # type: ignore[arg-type]


BAD: Any = "text"  # deliberately outside the declared types


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: PrinterColumn(""), "PrinterColumn name must not be empty"),
        (lambda: PrinterColumn("A", json_path="spec"), "json_path must start with '.'"),
        (lambda: PrinterColumn("A", json_path=".a\nb"), "and contain no newline"),
        (lambda: PrinterColumn("A", type=BAD), "PrinterColumn type must be string, integer"),
        (lambda: PrinterColumn("A", priority=-1), "priority must be a nonnegative integer"),
        (lambda: PrinterColumn("A", priority=True), "priority must be a nonnegative integer"),
        (lambda: CEL(""), "CEL rule must not be empty"),
        (lambda: CEL("  "), "CEL rule must not be empty"),
        (lambda: ListType(BAD), "ListType must be atomic, set, or map"),
        (lambda: ListType("map", keys=BAD), "ListType keys must be nonempty field names"),
        (lambda: ListType("map", keys=("",)), "ListType keys must be nonempty field names"),
        (lambda: ListType("set", keys=("a",)), "Only map lists accept keys"),
        (lambda: ListType("map"), "Map lists require nonempty, unique keys"),
        (lambda: ListType("map", keys=("a", "a")), "Map lists require nonempty, unique keys"),
    ],
)
def test_marker_validation(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


def test_list_type_keys_become_a_tuple() -> None:
    marker = ListType("map", keys=["a", "b"])  # type: ignore[arg-type]
    assert marker.keys == ("a", "b")
    literal: Literal["map"] = "map"
    assert ListType(literal, keys=("a",)) == ListType("map", ("a",))
