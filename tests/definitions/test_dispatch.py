"""Running a definition: stage order, conditions, Events, waits, cases and failures.

`Request` below is a minimal real implementation of `PassRequest` over the status helpers;
the runtime's request adds clients, caches and persistence around the same calls.
"""

from __future__ import annotations

from typing import Any

import pytest
from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.controller import Cases, Controller, Result, Stage, Stages, TerminalError, Wait
from cloudcoil_sync.controller._internal.reporting import PassReport, report_failure
from cloudcoil_sync.controller._internal.status import get_condition, set_condition, update_status

from .models import Widget


class Request:
    def __init__(self, resource: Any) -> None:
        self.resource = resource
        self.current = resource
        self.report = PassReport()
        self.events: list[tuple[str, str, str, str | None]] = []
        self.contexts = 0

    @property
    def object(self) -> Any:
        return self.current

    def context(self) -> str:
        self.contexts += 1
        return "ctx"

    def use(self, resource: Any) -> None:
        self.current = resource

    def set_status(self, **changes: Any) -> None:
        update_status(self.current, **changes)

    def condition(
        self, condition, status, *, reason, message="", event=False, warning=False, action=None
    ):
        before = get_condition(self.current, condition)
        set_condition(self.current, condition, status, reason=reason, message=message)
        after = get_condition(self.current, condition)
        if event and (
            before is None or (before.status, before.reason) != (after.status, after.reason)
        ):
            self.record_event(
                reason, message, type="Warning" if warning else "Normal", action=action or condition
            )

    def record_event(self, reason, message, *, type="Normal", action=None):
        self.events.append((type, reason, message, action))

    def state(self, condition: str) -> tuple[str, str, str]:
        found = get_condition(self.current, condition)
        assert found is not None, condition
        return found.status, found.reason, found.message


def widget(**metadata: Any) -> Widget:
    return Widget(
        metadata=ObjectMeta(name="w", namespace="default", uid="u1", generation=3, **metadata)
    )


def staged() -> tuple[Controller[Widget], list[str]]:
    calls: list[str] = []
    controller = Controller(Widget)

    @controller.stage(condition="ConfigReady")
    def configure(resource, ctx):
        calls.append(f"configure:{ctx}")

    scope = controller.stage("Rollout", condition="Available", depends=configure)

    @scope.case(when=lambda w: w.spec.message == "wait")
    def rolling(resource):
        calls.append("rolling")
        raise Wait("RollingOut", "2 of 3 replicas", after=7)

    @scope.case(when=lambda w: w.spec.message == "fail", after=rolling)
    def failing(resource):
        calls.append("failing")
        raise RuntimeError("secret token abc")

    @scope.otherwise()
    def steady(resource):
        calls.append("steady")

    return controller, calls


def test_stages_in_order_report_conditions_events_and_generation():
    controller, calls = staged()
    request = Request(widget())
    assert controller.registry.run(request) is None
    assert calls == ["configure:ctx", "steady"]
    assert request.state("ConfigReady") == ("True", "Reconciled", "configure is up to date")
    assert request.state("Available") == ("True", "steady", "steady is up to date")
    assert request.state("Ready") == ("True", "Reconciled", "steady is up to date")
    assert request.object.status.observed_generation == 3
    assert [event[1] for event in request.events] == ["Reconciled", "steady", "Reconciled"]
    assert request.report.reserved == {"Ready", "ConfigReady", "Available"}


def test_wait_stops_the_pass_and_marks_later_stages_unknown():
    controller = Controller(Widget)

    @controller.stage(condition="First")
    def first(resource):
        return Wait("Pending", "not yet", after=5)

    @controller.stage(condition="Second", depends=first)
    def second(resource):
        raise AssertionError("must not run")

    request = Request(widget())
    result = controller.registry.run(request)
    assert result == Result(requeue_after=5)
    assert request.state("First") == ("False", "Pending", "not yet")
    assert request.state("Second")[:2] == ("Unknown", "DependencyNotReady")
    assert request.state("Ready") == ("False", "Pending", "not yet")


def test_case_wait_and_failure_reporting():
    controller, _ = staged()
    waiting = widget()
    waiting.spec.message = "wait"
    request = Request(waiting)
    assert controller.registry.run(request) == Result(requeue_after=7)
    assert request.state("Available") == ("False", "RollingOut", "2 of 3 replicas")

    failing = widget()
    failing.spec.message = "fail"
    request = Request(failing)
    with pytest.raises(RuntimeError) as raised:
        controller.registry.run(request)
    report_failure(request, raised.value)
    message = "Available failed (RuntimeError); see controller logs"
    assert request.state("Available") == ("False", "ReconcileFailed", message)
    assert request.state("Ready") == ("False", "ReconcileFailed", message)
    assert "secret" not in str(request.object.status)
    assert request.events[-1][0] == "Warning"


def test_terminal_failure_reason():
    controller = Controller(Widget)

    @controller.reconcile()
    def reconcile(resource):
        raise TerminalError("bad spec")

    request = Request(widget())
    with pytest.raises(TerminalError) as raised:
        controller.registry.run(request)
    report_failure(request, raised.value)
    assert request.state("Ready")[:2] == ("False", "TerminalError")


def test_single_reconcile_return_values_and_every():
    controller = Controller(ConfigMap)

    @controller.reconcile(every=60)
    def reconcile(config):
        config.data = {"a": "b"}
        return config

    request = Request(ConfigMap(metadata=ObjectMeta(name="c", namespace="d")))
    result = controller.registry.run(request)
    assert isinstance(result, Result) and result.requeue_after == 60
    assert result.resource is not None and result.resource.data == {"a": "b"}
    assert request.object is result.resource  # adopted as the current object
    assert request.events == [("Normal", "Reconciled", "reconcile is up to date", "reconcile")]

    bad = Controller(ConfigMap)
    bad.reconcile()(lambda config: "done")
    with pytest.raises(
        TypeError, match="Reconcile handlers return their resource, Result, or None"
    ):
        bad.registry.run(Request(ConfigMap(metadata=ObjectMeta(name="c"))))

    stage = Controller(ConfigMap)
    stage.stage(condition="A")(lambda config: 1)
    with pytest.raises(TypeError, match="Stage handlers return None, or raise Wait"):
        stage.registry.run(Request(ConfigMap(metadata=ObjectMeta(name="c"))))


def test_absent_and_deleting_objects_are_skipped():
    controller, calls = staged()
    assert controller.registry.run(Request(None)) is None
    deleting = widget(deletion_timestamp="2026-01-01T00:00:00Z", finalizers=["x/y"])
    assert controller.registry.run(Request(deleting)) is None
    assert calls == []


def test_low_level_stages():
    seen: list[str] = []

    def apply(request):
        seen.append("apply")

    def wait(request):
        seen.append("wait")
        raise Wait("Scaling", "waiting", after=3)

    stages = Stages(Stage("Applied", apply), Stage("Scaled", wait), Stage("Never", apply))
    request = Request(widget())
    result = stages(request)
    assert seen == ["apply", "wait"]
    assert result == Result(resource=request.object, requeue_after=3)
    assert request.state("Applied") == ("True", "Reconciled", "Applied is up to date")
    assert request.state("Scaled") == ("False", "Scaling", "waiting")
    assert request.state("Never")[:2] == ("Unknown", "DependencyNotReady")
    assert request.state("Ready")[:2] == ("False", "Scaling")

    done = Stages(Stage("Applied", apply))
    request = Request(widget())
    assert done(request) == Result(resource=request.object)
    assert request.state("Ready") == ("True", "Reconciled", "All required work is current")
    with pytest.raises(TypeError, match="A stage must return None"):
        Stages(Stage("Bad", lambda request: 5))(Request(widget()))


def test_low_level_cases_first_match_on_ready():
    cases: Cases[Widget] = Cases()
    cases.case("Large", when=lambda request: request.object.spec.message == "large")(
        lambda request: None
    )
    cases.otherwise("Default")(lambda request: None)
    request = Request(widget())
    cases(request)
    assert request.state("Ready") == ("True", "Default", "Default is up to date")

    strict: Cases[Widget] = Cases()
    strict.case("Never", when=lambda request: False)(lambda request: None)
    with pytest.raises(TerminalError, match="No case matched"):
        strict(Request(widget()))
    odd: Cases[Widget] = Cases()
    odd.case("Odd", when=lambda request: 1)(lambda request: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="Case predicates must return bool"):
        odd(Request(widget()))


def test_controller_run_pass_uses_constructor_or_decorated_handlers():
    low_level = Controller(Widget, Stages(Stage("Applied", lambda request: None)))
    request = Request(widget())
    assert low_level.run_pass(request) == Result(resource=request.object)
    assert low_level.frozen

    def reconcile(request):
        return Result(requeue_after=1)

    assert Controller(Widget, reconcile).run_pass(Request(widget())) == Result(requeue_after=1)
    decorated = Controller(ConfigMap)
    decorated.reconcile()(lambda config: None)
    assert decorated.run_pass(Request(ConfigMap(metadata=ObjectMeta(name="c")))) is None
