"""@custom_resource: stored metadata, type-field rewriting, inheritance and its errors."""

from __future__ import annotations

import re
from typing import Literal

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.resources import Resource
from pydantic import BaseModel, Field, ValidationError

import cloudcoil_sync.crd
from cloudcoil_sync.crd import CRD, PrinterColumn, custom_resource
from cloudcoil_sync.crd._internal.decorator import CustomResourceOptions, resource_options

from .widget import Widget


def test_public_names() -> None:
    assert sorted(cloudcoil_sync.crd.__all__) == [
        "CEL",
        "CRD",
        "ConversionError",
        "ListType",
        "PrinterColumn",
        "STASH_ANNOTATION",
        "SchemaError",
        "Version",
        "Versions",
        "convert",
        "custom_resource",
    ]
    assert issubclass(cloudcoil_sync.crd.SchemaError, ValueError)


def test_metadata_is_stored_for_the_client_rest_mapping() -> None:
    options = Widget.__cloudcoil_crd__  # type: ignore[attr-defined]
    assert isinstance(options, CustomResourceOptions)
    # status=None resolves to whether the model has a status field.
    assert (options.plural, options.scope, options.status) == ("widgets", "Namespaced", True)
    assert options.singular is None and options.short_names == ("wd",)
    assert options.categories == () and options.columns is None
    assert (options.group, options.version, options.kind) == (
        "examples.cloudcoil.dev",
        "v1alpha1",
        "Widget",
    )
    assert Widget.__cloudcoil_crd__ is resource_options(Widget)  # type: ignore[attr-defined]


def test_status_resolves_from_the_model() -> None:
    @custom_resource(api_version="example.com/v1", plural="bares")
    class Bare(Resource):
        pass

    @custom_resource(api_version="example.com/v1", plural="aliased")
    class Aliased(Resource):
        state: dict[str, str] | None = Field(default=None, alias="status")

    assert resource_options(Bare).status is False  # type: ignore[union-attr]
    assert resource_options(Aliased).status is True  # type: ignore[union-attr]
    assert CRD(Aliased).status is True


def test_every_option_is_kept() -> None:
    column = PrinterColumn("Size", json_path=".spec.size", type="integer")

    @custom_resource(
        plural="gadgets",
        api_version="example.com/v2",
        kind="Gizmo",
        scope="Cluster",
        singular="gizmo",
        short_names=["gz", "gzm"],
        categories=("all",),
        status=False,
        columns=[column],
    )
    class Gadget(Resource):
        pass

    options = resource_options(Gadget)
    assert options is not None
    assert options.scope == "Cluster" and options.singular == "gizmo"
    assert options.short_names == ("gz", "gzm") and options.categories == ("all",)
    assert options.status is False and options.columns == (column,)
    assert (options.group, options.version, options.kind) == ("example.com", "v2", "Gizmo")
    assert Gadget.gvk().kind == "Gizmo"
    gadget = Gadget.model_validate({})
    assert gadget.kind == "Gizmo" and gadget.api_version == "example.com/v2"


def test_api_version_rewrites_type_fields_to_literals() -> None:
    @custom_resource(api_version="example.com/v1", plural="parts")
    class Part(Resource):
        size: int = 0

    assert Part.model_validate({}).model_dump(by_alias=True, exclude_none=True) == {
        "apiVersion": "example.com/v1",
        "kind": "Part",
        "size": 0,
    }
    with pytest.raises(ValidationError):
        Part.model_validate({"apiVersion": "example.com/v2"})
    with pytest.raises(ValidationError):
        Part.model_validate({"kind": "Other"})
    # The base class is untouched.
    assert Resource.model_fields["kind"].default != "Part"
    assert ConfigMap.gvk().kind == "ConfigMap"


def test_explicit_literal_fields_work_without_api_version() -> None:
    @custom_resource(plural="explicits")
    class Explicit(Resource):
        api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
        kind: Literal["Explicit"] = "Explicit"

    crd = CRD(Explicit)
    assert crd.name == "explicits.example.com" and crd.kind == "Explicit"


def test_matching_explicit_fields_are_accepted() -> None:
    @custom_resource(api_version="example.com/v1", plural="explicits")
    class Explicit(Resource):
        api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")

    assert Explicit.gvk().api_version == "example.com/v1"


def test_conflicting_explicit_fields() -> None:
    with pytest.raises(ValueError, match=r"^api_version conflicts with the resource field$"):

        @custom_resource(api_version="example.com/v2", plural="explicits")
        class Explicit(Resource):
            api_version: Literal["example.com/v1"] = Field(
                default="example.com/v1", alias="apiVersion"
            )

    with pytest.raises(ValueError, match=r"^kind conflicts with the resource field$"):

        @custom_resource(api_version="example.com/v1", plural="explicits")
        class Named(Resource):
            kind: Literal["Other"] = "Other"


def test_kind_requires_api_version() -> None:
    with pytest.raises(ValueError, match=r"^kind requires api_version$"):

        @custom_resource(plural="things", kind="Thing")
        class Thing(Resource):
            pass


def test_double_declaration() -> None:
    decorate = custom_resource(plural="again")
    with pytest.raises(
        ValueError, match=r"^custom_resource metadata is already declared on this class$"
    ):
        decorate(Widget)


def test_non_resources_are_rejected() -> None:
    decorate = custom_resource(plural="plain")
    with pytest.raises(TypeError, match=r"^custom_resource requires a Resource subclass$"):
        decorate(BaseModel)  # type: ignore[type-var]
    with pytest.raises(TypeError, match=r"^custom_resource requires a Resource subclass$"):
        decorate("Widget")  # type: ignore[type-var]


@pytest.mark.parametrize("argument", ["short_names", "categories"])
def test_names_must_be_sequences(argument: str) -> None:
    with pytest.raises(
        ValueError, match=r"^short_names and categories must be sequences of names$"
    ):
        custom_resource(plural="things", **{argument: "wd"})  # type: ignore[arg-type]


def test_metadata_is_not_inherited() -> None:
    class Subclass(Widget):
        pass

    assert resource_options(Subclass) is None
    message = "Pass plural=... or declare @custom_resource(plural=...) on the model"
    with pytest.raises(ValueError, match=re.escape(message)):
        CRD(Subclass)
    assert CRD(Subclass, plural="subclasses").manifest()["spec"]["names"]["kind"] == "Widget"


def test_a_subclass_may_declare_its_own_kind() -> None:
    @custom_resource(api_version="examples.cloudcoil.dev/v1", plural="superwidgets")
    class SuperWidget(Widget):
        pass

    assert SuperWidget.gvk().kind == "SuperWidget"
    assert Widget.gvk().kind == "Widget"
    assert resource_options(Widget) is not resource_options(SuperWidget)
    manifest = CRD(SuperWidget).manifest()
    assert manifest["metadata"]["name"] == "superwidgets.examples.cloudcoil.dev"
    assert manifest["spec"]["names"].get("shortNames") is None
