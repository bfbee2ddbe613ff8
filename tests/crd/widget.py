"""The Widget custom resource of the reference's golden example (section 7)."""

from __future__ import annotations

from typing import Annotated

from cloudcoil.apimachinery import Condition
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.crd import CEL, ListType, PrinterColumn, custom_resource


class ReconcileStatus(BaseModel):
    """Equivalent of 0.8's ReconcileStatus: conditions as a list-map keyed by type.

    (cloudcoil_sync.controller.status.ReconcileStatus does not yet declare the ListType.)
    """

    conditions: Annotated[list[Condition], ListType("map", keys=("type",))] = Field(
        default_factory=list
    )
    observed_generation: int | None = Field(default=None, alias="observedGeneration")


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
