"""The Widget custom resource the controller and runtime tests reconcile (example.com/v1)."""

from __future__ import annotations

from typing import Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.controller import ReconcileStatus
from cloudcoil_sync.crd import custom_resource

__all__ = ["Widget", "WidgetSpec", "WidgetStatus"]


class WidgetSpec(BaseModel):
    size: int = 1


class WidgetStatus(ReconcileStatus):
    phase: str | None = None


@custom_resource(api_version="example.com/v1", plural="widgets")
class Widget(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Widget"] = "Widget"
    spec: WidgetSpec | None = None
    status: WidgetStatus | None = None
