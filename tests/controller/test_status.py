from datetime import UTC, datetime
from typing import Literal

import pytest
from cloudcoil.apimachinery import ObjectMeta, Time
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field, ValidationError

from cloudcoil_sync.controller import (
    ReconcileStatus,
    get_condition,
    set_condition,
    update_status,
)


class WidgetStatus(ReconcileStatus):
    phase: str | None = None
    ready_replicas: int = Field(default=0, alias="readyReplicas")


class Widget(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Widget"] = "Widget"
    status: WidgetStatus | None = None


class PlainStatus(BaseModel):
    phase: str | None = None


class Plain(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Plain"] = "Plain"
    status: PlainStatus | None = None


class NoStatus(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["NoStatus"] = "NoStatus"


def widget(generation: int = 1) -> Widget:
    return Widget(metadata=ObjectMeta(name="w", namespace="ns", generation=generation))


def test_reconcile_status_wire_shape() -> None:
    status = ReconcileStatus.model_validate({"observedGeneration": 3})
    assert status.observed_generation == 3
    assert status.conditions == []
    assert status.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "conditions": [],
        "observedGeneration": 3,
    }


def test_update_status_creates_preserves_and_accepts_aliases() -> None:
    resource = widget()
    assert update_status(resource, phase="Pending") is resource
    assert resource.status is not None and resource.status.phase == "Pending"
    update_status(resource, readyReplicas=2)
    update_status(resource, ready_replicas=3)
    assert resource.status.phase == "Pending"
    assert resource.status.ready_replicas == 3


def test_update_status_rejects_unknown_and_invalid_values_without_change() -> None:
    resource = widget()
    update_status(resource, phase="Pending")
    with pytest.raises(ValueError, match="Unknown status field 'phse' on WidgetStatus"):
        update_status(resource, phse="x")
    with pytest.raises(ValidationError):
        update_status(resource, ready_replicas="many")
    assert resource.status is not None
    assert resource.status.phase == "Pending" and resource.status.ready_replicas == 0


class OpenStatus(BaseModel):
    model_config = {"extra": "allow"}
    phase: str | None = None


class Open(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Open"] = "Open"
    status: OpenStatus | None = None


def test_update_status_keeps_extra_fields_a_status_model_allows() -> None:
    resource = Open(metadata=ObjectMeta(name="o", namespace="default"))
    update_status(resource, phase="Up", free={"any": ["shape"]})
    update_status(resource, freeCount=3)
    assert resource.status is not None and resource.status.phase == "Up"
    assert resource.model_dump(by_alias=True)["status"] == {
        "phase": "Up",
        "free": {"any": ["shape"]},
        "freeCount": 3,
    }


def test_status_helpers_need_a_status_model() -> None:
    with pytest.raises(TypeError, match="NoStatus has none"):
        update_status(NoStatus(), phase="x")
    with pytest.raises(TypeError, match="PlainStatus declares no conditions field"):
        set_condition(Plain(), "Ready", True, reason="R")


def test_set_condition_timestamps_move_only_on_status_change() -> None:
    resource = widget(generation=4)
    set_condition(resource, "Ready", False, reason="Starting", message="first")
    first = get_condition(resource, "Ready")
    assert first is not None
    assert (first.status, first.reason, first.message) == ("False", "Starting", "first")
    assert first.observed_generation == 4
    old = Time(datetime(2020, 1, 1, tzinfo=UTC))
    resource.status.conditions[0].last_transition_time = old  # type: ignore[union-attr]

    resource.metadata.generation = 5  # type: ignore[union-attr]
    set_condition(resource, "Ready", "False", reason="StillStarting", message="second")
    same = get_condition(resource, "Ready")
    assert same is not None and same.last_transition_time == old
    assert (same.reason, same.message, same.observed_generation) == ("StillStarting", "second", 5)

    set_condition(resource, "Ready", True, reason="Reconciled")
    flipped = get_condition(resource, "Ready")
    assert flipped is not None and flipped.status == "True"
    assert flipped.last_transition_time != old


def test_set_condition_keeps_order_other_types_and_fields() -> None:
    resource = widget()
    update_status(resource, phase="Running", observedGeneration=1)
    set_condition(resource, "A", True, reason="R")
    set_condition(resource, "B", "Unknown", reason="R")
    set_condition(resource, "A", False, reason="Broken")
    assert resource.status is not None
    assert [c.type for c in resource.status.conditions] == ["A", "B"]
    assert resource.status.phase == "Running"
    assert resource.status.observed_generation == 1
    assert get_condition(resource, "missing") is None


def test_get_condition_returns_a_copy() -> None:
    resource = widget()
    set_condition(resource, "Ready", True, reason="R")
    copy = get_condition(resource, "Ready")
    assert copy is not None
    copy.reason = "Changed"
    assert get_condition(resource, "Ready").reason == "R"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"condition": "", "status": True, "reason": "R"}, "must not be empty"),
        ({"condition": "Ready", "status": True, "reason": ""}, "must not be empty"),
        ({"condition": "Ready", "status": "Yes", "reason": "R"}, "True, False, or Unknown"),
    ],
)
def test_set_condition_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        set_condition(widget(), **kwargs)  # type: ignore[arg-type]


def test_conditions_are_a_list_map_keyed_by_type_in_the_crd_schema() -> None:
    from cloudcoil_sync.crd import CRD

    schema = CRD(Widget, plural="widgets").manifest()["spec"]["versions"][0]["schema"]
    conditions = schema["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert conditions["type"] == "array"
