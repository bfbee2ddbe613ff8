"""Custom resources used by the definition tests."""

from __future__ import annotations

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.controller._internal.status import ReconcileStatus
from cloudcoil_sync.crd import custom_resource

PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


class WidgetSpec(BaseModel):
    message: str = "hello"


class WidgetStatus(ReconcileStatus):
    phase: str | None = None


@custom_resource(api_version="examples.cloudcoil.dev/v1alpha1", plural="widgets")
class Widget(Resource):
    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: WidgetStatus | None = None


class GadgetStatus(BaseModel):
    phase: str | None = None


@custom_resource(api_version="examples.cloudcoil.dev/v1", plural="gadgets", scope="Cluster")
class Gadget(Resource):
    """Cluster-scoped, with a status that is not a ReconcileStatus."""

    status: GadgetStatus | None = None


@custom_resource(api_version="examples.cloudcoil.dev/v1", kind="Widget", plural="widgets")
class WidgetV1(Resource):
    """Same CRD name as Widget (widgets.examples.cloudcoil.dev), another version."""

    status: WidgetStatus | None = None


class Unmapped(Resource):
    """A kind neither @custom_resource nor the built-in REST table knows."""

    api_version: str = Field(default="unknown.example.com/v1", alias="apiVersion")
    kind: str = "Unmapped"
