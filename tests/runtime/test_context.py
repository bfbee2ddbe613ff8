"""`Request`/`Context` staging rules and cached label selectors (no API calls)."""

from __future__ import annotations

from typing import Any

import pytest

from cloudcoil_sync.controller._internal.cache import LabelSelector
from cloudcoil_sync.controller._internal.context import MAX_EVENTS_PER_PASS, Context, Request
from cloudcoil_sync.controller._internal.status import get_condition, set_condition
from cloudcoil_sync.controller._internal.types import ResourceKey

from .conftest import Widget


class _NoServices:
    config: Any = None

    def cached(self, resource: type[Any], *, namespace: str | None = None) -> Any:
        raise AssertionError("not used")

    def informer_for(self, resource: type[Any]) -> Any:
        raise AssertionError("not used")


def widget(**status: Any) -> Widget:
    return Widget.model_validate(
        {
            "metadata": {
                "name": "w",
                "namespace": "default",
                "uid": "u1",
                "resourceVersion": "5",
                "generation": 3,
            },
            "spec": {"size": 1},
            "status": status or None,
        }
    )


def request_for(obj: Widget) -> Request[Widget]:
    return Request(ResourceKey("w", "default"), obj, _NoServices())


def test_staged_status_applies_to_the_original_not_to_handler_edits() -> None:
    request = request_for(widget())
    assert request.resource is not None and request.resource.spec is not None
    request.resource.spec.size = 99  # an in-place edit the handler did not return
    request.set_status(phase="Running", observedGeneration=3)
    request.condition("Synced", True, reason="Done", message="ok")
    assert request.staged
    original = request.original
    assert original is not None and original.spec is not None
    desired = request.apply_status(original)
    assert desired.spec is not None and desired.spec.size == 1
    assert desired.status is not None
    assert (desired.status.phase, desired.status.observed_generation) == ("Running", 3)
    synced = get_condition(desired, "Synced")
    assert synced is not None and synced.status == "True" and synced.observed_generation == 3


def test_invalid_status_edits_fail_at_once() -> None:
    request = request_for(widget())
    with pytest.raises(ValueError, match="Unknown status field 'colour'"):
        request.set_status(colour="red")
    assert not request.staged


def test_condition_events_only_on_transitions() -> None:
    obj = widget()
    set_condition(obj, "Synced", True, reason="Done")
    request = request_for(obj)
    request.condition("Synced", True, reason="Done", event=True)
    assert request.events == []
    request.condition("Synced", False, reason="Broken", message="m", event=True, warning=True)
    (event,) = request.events
    assert (event.reason, event.message, event.type) == ("Broken", "m", "Warning")


def test_context_guards_reserved_conditions_and_event_limits() -> None:
    request = request_for(widget())
    request.report.reserved = {"Ready", "ConfigurationReady"}
    ctx = Context(request)
    with pytest.raises(ValueError, match="Condition 'Ready' is managed by the controller"):
        ctx.condition("Ready", True, reason="Manual")
    ctx.condition("Custom", "Unknown", reason="Pending")
    with pytest.raises(ValueError, match="Event reason"):
        ctx.event("not valid!", "message")
    for i in range(MAX_EVENTS_PER_PASS + 5):
        ctx.event("Tick", str(i))
    assert len(request.events) == MAX_EVENTS_PER_PASS
    assert ctx.resource is request.object and ctx.namespace == "default"


def test_absent_objects_have_nothing_to_stage() -> None:
    request: Request[Widget] = Request(
        ResourceKey("gone", "default"),
        None,
        _NoServices(),
    )
    assert request.original is None and request.object is None
    with pytest.raises(RuntimeError, match="absent object"):
        request.set_status(phase="x")


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web,tier!=db", {"app": "web", "tier": "db"}, False),
        ("app in (web, api)", {"app": "api"}, True),
        ("app notin (web)", {}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("app in (a,b),env", {"app": "b", "env": "prod"}, True),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector(selector).matches(labels) is expected


def test_invalid_label_selectors_are_refused() -> None:
    with pytest.raises(ValueError, match="Invalid label selector"):
        LabelSelector("!app=web")
