"""Local, validated edits of a resource's status; persistence belongs to the worker pass."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar, get_args

from cloudcoil.apimachinery import Condition, Time
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import BaseModel as PydanticModel
from pydantic import Field, TypeAdapter

from cloudcoil_sync.crd import ListType

__all__ = ["ReconcileStatus", "get_condition", "set_condition", "update_status"]

R = TypeVar("R", bound=Resource)

ConditionStatus = Literal["True", "False", "Unknown"]


class ReconcileStatus(BaseModel):
    """Base for custom-resource status models that want `Ready` and stage conditions reported."""

    conditions: Annotated[list[Condition], ListType("map", keys=("type",))] = Field(
        default_factory=list
    )
    observed_generation: int | None = Field(default=None, alias="observedGeneration")


def _status_model(resource: Resource) -> type[PydanticModel]:
    field = type(resource).model_fields.get("status")
    if field is not None:
        for candidate in (field.annotation, *get_args(field.annotation)):
            if isinstance(candidate, type) and issubclass(candidate, PydanticModel):
                return candidate
    raise TypeError(
        f"Status helpers need a resource with a pydantic status model; "
        f"{type(resource).__name__} has none"
    )


def update_status(resource: R, **changes: Any) -> R:
    """Set the given status fields (python names or wire aliases), keep the others.

    Creates an absent status, validates the result before assigning it (a failure leaves
    the resource untouched) and rejects unknown fields unless the status model allows extra
    fields (``extra="allow"``), whose names are kept as given. No API call: return the resource
    from the reconciler to persist it.
    """
    model = _status_model(resource)
    current = getattr(resource, "status", None)
    values = current.model_dump(mode="python", by_alias=True) if current is not None else {}
    extra_allowed = model.model_config.get("extra") == "allow"
    for name, value in changes.items():
        field_name = next(
            (key for key, info in model.model_fields.items() if name in (key, info.alias)),
            None,
        )
        if field_name is not None:
            info = model.model_fields[field_name]
            values[info.alias or field_name] = value
        elif extra_allowed:
            values[name] = value  # kept as given, as reading it back does
        else:
            raise ValueError(f"Unknown status field {name!r} on {model.__name__}")
    resource.status = model.model_validate(values)  # type: ignore[attr-defined]
    return resource


def get_condition(resource: Resource, condition: str) -> Condition | None:
    """A copy of the condition of that type, or None."""
    status = getattr(resource, "status", None)
    for value in getattr(status, "conditions", None) or []:
        if value.type == condition:
            return Condition.model_validate(value.model_dump(by_alias=True))
    return None


def set_condition(
    resource: R,
    condition: str,
    status: bool | ConditionStatus,
    *,
    reason: str,
    message: str = "",
) -> R:
    """Insert or update a metav1 Condition in place of any earlier one of that type.

    `lastTransitionTime` changes only when the status value changes; `observedGeneration`
    comes from `metadata.generation`. Other conditions and status fields are preserved.
    """
    if not condition or not reason:
        raise ValueError("Condition type and reason must not be empty")
    value = str(status) if isinstance(status, bool) else status
    if value not in ("True", "False", "Unknown"):
        raise ValueError("Condition status must be True, False, or Unknown")
    model = _status_model(resource)
    if "conditions" not in model.model_fields:
        raise TypeError(f"{model.__name__} declares no conditions field")
    previous = get_condition(resource, condition)
    if previous is not None and previous.status == value:
        transition = previous.last_transition_time
    else:
        transition = Time(datetime.now(UTC).replace(microsecond=0))
    metadata = resource.metadata
    updated = Condition(
        type=condition,
        status=value,
        reason=reason,
        message=message,
        observed_generation=metadata.generation if metadata is not None else None,
        last_transition_time=transition,
    )
    current = getattr(resource, "status", None)
    conditions = list(getattr(current, "conditions", None) or [])
    index = next((i for i, c in enumerate(conditions) if c.type == condition), len(conditions))
    conditions = [c for c in conditions if c.type != condition]
    conditions.insert(index, updated)
    annotation: Any = model.model_fields["conditions"].annotation
    dumped = [c.model_dump(by_alias=True) for c in conditions]
    return update_status(resource, conditions=TypeAdapter(annotation).validate_python(dumped))
