"""The Widget custom resource of the reference's golden example (section 7)."""

from __future__ import annotations

from typing import Annotated

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.controller._internal.status import ReconcileStatus
from cloudcoil_sync.crd import CEL, PrinterColumn, custom_resource


class WidgetSpec(BaseModel):
    message: str = "Hello from cloudcoil"
    replicas: Annotated[int, CEL("self >= 0 && self <= 10", "replicas must be 0..10")] = 1


class WidgetStatus(ReconcileStatus):
    phase: Annotated[str | None, PrinterColumn("Phase")] = None


@custom_resource(
    api_version="examples.cloudcoil.dev/v1alpha1", plural="widgets", short_names=("wd",)
)
class Widget(Resource):
    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: WidgetStatus | None = None
