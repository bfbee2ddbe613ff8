"""Helpers to build throwaway custom resource models for schema tests."""

from __future__ import annotations

from typing import Any, Optional

from cloudcoil.resources import Resource
from pydantic import BaseModel, create_model

from cloudcoil_sync.crd import CRD, custom_resource


def resource_with(
    spec: type[BaseModel] | Any, *, name: str = "Thing", **fields: Any
) -> type[Resource]:
    """A decorated ``Resource`` with ``spec: <spec> | None = None`` and extra fields."""
    optional: Any = Optional[spec]  # noqa: UP045 (spec may be a runtime-built annotation)
    model = create_model(name, __base__=Resource, spec=(optional, None), **fields)
    return custom_resource(api_version="example.com/v1", plural="things")(model)


def spec_schema(spec: type[BaseModel] | Any, **fields: Any) -> dict[str, Any]:
    """The structural schema generated for the ``spec`` field."""
    crd = CRD(resource_with(spec, **fields))
    schema = crd.manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    result: dict[str, Any] = schema["properties"]["spec"]
    return result
