"""Controller definitions: settings, registration and the definition errors of 0.8 §4."""

from __future__ import annotations

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret

from cloudcoil_sync.controller import Cases, Controller, ResourceKey, Stage, Stages
from cloudcoil_sync.controller._internal.definition import Owned

from .models import Gadget, Widget


def noop(resource):
    return None


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"workers": 0}, ValueError, "workers must be a positive integer"),
        ({"workers": True}, ValueError, "workers must be a positive integer"),
        ({"workers": 1.5}, ValueError, "workers must be a positive integer"),
        ({"sync_timeout": 0}, ValueError, "sync_timeout must be finite and positive"),
        ({"shutdown_timeout": float("inf")}, ValueError, "shutdown_timeout must be finite"),
        ({"reconcile_timeout": -1}, ValueError, "reconcile_timeout must be finite and positive"),
        ({"event_flush_timeout": float("nan")}, ValueError, "event_flush_timeout must be"),
        ({"resync_period": 10}, ValueError, "resync_period must be between 30 and 86400"),
        ({"name": "  "}, ValueError, "Controller name must not be empty"),
        ({"name": "x" * 119}, ValueError, "Controller name must have at most 118 characters"),
        ({"status_updates": 1}, TypeError, "status_updates must be a bool"),
        (
            {"namespace": "Bad_NS"},
            ValueError,
            "Controller namespace must be a Kubernetes DNS label",
        ),
        (
            {"namespace": "a", "all_namespaces": True},
            ValueError,
            "Controller namespace and all_namespaces are mutually exclusive",
        ),
        ({"label_selector": 3}, TypeError, "label_selector must be a string"),
    ],
)
def test_settings_are_validated(options, error, message):
    with pytest.raises(error, match=message):
        Controller(ConfigMap, **options)


def test_events_must_be_bool_or_recorder():
    with pytest.raises(TypeError, match="events must be a bool or EventRecorder"):
        Controller(ConfigMap, events="yes")  # type: ignore[arg-type]
    assert Controller(ConfigMap, events=False).events is False


def test_defaults_and_public_attributes():
    controller = Controller(ConfigMap, label_selector="example.com/manage=true")
    assert controller.resource is ConfigMap
    assert controller.name is None
    assert controller.namespace is None and controller.all_namespaces is False
    assert controller.label_selector == "example.com/manage=true"
    assert (controller.workers, controller.resync_period, controller.sync_timeout) == (8, 300, 30)
    assert (controller.shutdown_timeout, controller.reconcile_timeout) == (10, None)
    assert (controller.events, controller.event_flush_timeout) == (True, 2)
    assert controller.report_status is False and controller.status_updates is True
    assert controller.reporting_controller == "cloudcoil/configmap"
    assert Controller(ConfigMap, name="mirror").reporting_controller == "cloudcoil/mirror"
    assert controller.watched_namespace("operators") == "operators"
    assert Controller(ConfigMap, namespace="a").watched_namespace("operators") == "a"
    assert Controller(ConfigMap, all_namespaces=True).watched_namespace("operators") is None


def test_report_status_and_status_updates_defaults():
    widgets = Controller(Widget)
    assert widgets.report_status is True
    assert widgets.status_updates is False  # decorated + reporting ignores status-only events
    assert Controller(Gadget).report_status is False
    assert Controller(Widget, lambda request: None).status_updates is True
    assert Controller(Widget, Stages(Stage("Applied", noop))).status_updates is False
    assert Controller(Widget, status_updates=True).status_updates is True


def test_registration_returns_functions_and_runs_no_handler_code():
    calls = []
    controller = Controller(Widget)

    def predicate(widget):
        calls.append("predicate")
        return True

    @controller.stage(condition="ConfigReady")
    def configure(widget, ctx):
        calls.append("configure")

    scope = controller.stage("Deploy", condition="Deployed", depends=configure)

    @scope.case(when=predicate)
    def roll(widget):
        calls.append("roll")

    @scope.otherwise()
    def keep(widget):
        calls.append("keep")

    @controller.finalize("example.com/cleanup")
    def cleanup(widget):
        calls.append("cleanup")

    controller.validate_definition(freeze=True)
    assert calls == []
    assert configure.__name__ == "configure" and roll.__name__ == "roll"
    assert [stage.condition for stage in controller.registry.order] == ["ConfigReady", "Deployed"]
    assert controller.registry.finalizer is not None
    assert controller.registry.finalizer.key == "example.com/cleanup"
    assert controller.frozen


def test_stage_order_is_the_unique_topological_order():
    controller = Controller(Widget)

    @controller.stage(condition="C", depends=None)
    def c(widget):
        return None

    first = controller.stage(condition="A")

    @controller.stage(condition="B", depends=(c, first))
    def b(widget):
        return None

    first(lambda widget: None)
    # A has no dependency relation with C: ambiguous.
    with pytest.raises(ValueError, match="Ambiguous stage order: C, A; declare dependencies"):
        controller.validate_definition()


def test_stage_depends_by_scope_and_by_function():
    controller = Controller(Widget)
    a = controller.stage(condition="A")

    @a
    def handle_a(widget):
        return None

    @controller.stage(condition="B", depends=a)
    def handle_b(widget):
        return None

    @controller.stage(condition="C", depends=handle_b)
    def handle_c(widget):
        return None

    controller.validate_definition()
    assert [s.name for s in controller.registry.validate()] == ["A", "B", "C"]


def test_stage_dependency_errors():
    def unknown(widget):
        return None

    controller = Controller(Widget)
    controller.stage(condition="A", depends=unknown)(noop)
    with pytest.raises(ValueError, match="Unknown stage dependency for A"):
        controller.validate_definition()

    cyclic = Controller(Widget)
    a = cyclic.stage(condition="A")
    b = cyclic.stage(condition="B", depends=a)
    a.dependencies = (b,)
    a(lambda w: None)
    b(lambda w: None)
    with pytest.raises(ValueError, match="Cycle in stage dependencies"):
        cyclic.validate_definition()

    duplicate = Controller(Widget)
    duplicate.stage(condition="A")(noop)
    duplicate.stage(condition="B")(noop)
    with pytest.raises(ValueError, match="Duplicate stage handler"):
        duplicate.validate_definition()


@pytest.mark.parametrize("condition", ["Ready", "1abc", "has-dash", "", "x" * 129])
def test_stage_condition_must_be_identifier_other_than_ready(condition):
    with pytest.raises(ValueError, match="Stage condition must be an identifier other than Ready"):
        Controller(Widget).stage(condition=condition)


def test_stage_conditions_and_names_unique():
    controller = Controller(Widget)
    controller.stage(condition="A")(lambda w: None)
    controller.stage(condition="A")(lambda w: None)
    with pytest.raises(ValueError, match="Stage conditions must be unique"):
        controller.validate_definition()
    named = Controller(Widget)
    named.stage("same", condition="A")(lambda w: None)
    named.stage("same", condition="B")(lambda w: None)
    with pytest.raises(ValueError, match="Stage names must be unique"):
        named.validate_definition()


def test_stage_has_handler_or_cases_not_both():
    controller = Controller(Widget)
    scope = controller.stage(condition="A")
    scope(noop)
    with pytest.raises(ValueError, match="A stage has one handler or cases, not both"):
        scope.case(when=lambda w: True)(lambda w: None)
    other = controller.stage(condition="B")
    other.otherwise()(lambda w: None)
    with pytest.raises(ValueError, match="A stage has one handler or cases, not both"):
        other(noop)


def test_stage_cases_need_otherwise_and_unique_order():
    controller = Controller(Widget)
    scope = controller.stage(condition="A")

    @scope.case(when=lambda w: True)
    def first(widget):
        return None

    @scope.case(when=lambda w: False)
    def second(widget):
        return None

    with pytest.raises(ValueError, match="Cases require an otherwise handler"):
        controller.validate_definition()
    scope.otherwise()(noop)
    with pytest.raises(ValueError, match="Ambiguous case order: first, second"):
        controller.validate_definition()

    ordered = Controller(Widget)
    scope = ordered.stage(condition="A")
    scope.case(when=lambda w: True)(first)
    scope.case(when=lambda w: False, after=first)(second)
    scope.otherwise()(noop)
    ordered.validate_definition()


@pytest.mark.parametrize(
    ("register", "message"),
    [
        ("none", "Register exactly one entrypoint: reconcile, stages, or cases"),
        ("mixed", "Register exactly one entrypoint: reconcile, stages, or cases"),
        ("cases-only-otherwise-missing", "Cases require an otherwise handler"),
    ],
)
def test_entrypoint_errors(register, message):
    controller = Controller(ConfigMap)
    if register == "mixed":
        controller.reconcile()(noop)
        controller.stage(condition="A")(noop)
    if register == "cases-only-otherwise-missing":
        controller.case(when=lambda c: True)(noop)
    with pytest.raises(ValueError, match=message):
        controller.validate_definition()


def test_root_cases_select_lazily_and_require_bool():
    controller = Controller(ConfigMap)
    seen = []

    def is_large(config):
        seen.append("large")
        return True

    def never(config):
        seen.append("never")
        return False

    @controller.case(when=is_large)
    def shrink(config):
        return None

    @controller.case(when=never, after=shrink)
    def other(config):
        return None

    @controller.otherwise()
    def fallback(config):
        return None

    controller.validate_definition(freeze=True)
    handler = controller.registry.branches.select(ConfigMap(), lambda: None)
    assert handler.function is shrink and seen == ["large"]

    bad = Controller(ConfigMap)
    bad.case(when=lambda c: "yes")(noop)
    bad.otherwise()(lambda c: None)
    with pytest.raises(TypeError, match="Case predicates must return bool"):
        bad.registry.branches.select(ConfigMap(), lambda: None)


def test_one_otherwise_reconcile_and_finalizer():
    controller = Controller(ConfigMap)
    controller.otherwise()(noop)
    with pytest.raises(ValueError, match="Only one otherwise handler may be registered"):
        controller.otherwise()(lambda c: None)
    controller.reconcile()(noop)
    with pytest.raises(ValueError, match="Only one reconcile handler may be registered"):
        controller.reconcile()(lambda c: None)
    controller.finalize("example.com/a")(noop)
    with pytest.raises(ValueError, match="Use one finalizer handler and compose cleanup"):
        controller.finalize("example.com/b")(lambda c: None)


def test_reconcile_every_and_finalizer_key():
    controller = Controller(ConfigMap)
    for every in (0, -1, float("inf"), float("nan"), True):
        with pytest.raises(ValueError, match="every must be finite and positive"):
            controller.reconcile(every=every)
    controller.reconcile(every=60)(noop)
    assert controller.registry.every == 60.0
    for key in ("cleanup", ""):
        with pytest.raises(ValueError, match="Use a qualified finalizer name such as"):
            controller.finalize(key)


def test_constructor_reconciler_rules():
    controller = Controller(ConfigMap, lambda request: None)
    with pytest.raises(ValueError, match="A constructor reconciler is already registered"):
        controller.reconcile()
    controller.finalize("example.com/x")(noop)
    with pytest.raises(
        ValueError, match="Constructor reconciliation cannot be combined with decorated handlers"
    ):
        controller.validate_definition()
    Controller(ConfigMap, lambda request: None).validate_definition(freeze=True)


def test_async_callables_are_rejected_naming_the_function():
    controller = Controller(ConfigMap)

    async def handler(config):
        return None

    async def predicate(config):
        return True

    with pytest.raises(TypeError, match="handler: handlers must be synchronous; use def"):
        controller.reconcile()(handler)
    with pytest.raises(TypeError, match="handler: handlers must be synchronous; use def"):
        controller.stage(condition="A")(handler)
    with pytest.raises(TypeError, match="handler: handlers must be synchronous; use def"):
        controller.finalize("example.com/x")(handler)
    with pytest.raises(TypeError, match="handler: handlers must be synchronous; use def"):
        controller.otherwise()(handler)
    with pytest.raises(TypeError, match="predicate: predicates must be synchronous; use def"):
        controller.case(when=predicate)
    with pytest.raises(TypeError, match="handler: watch mappers must be synchronous; use def"):
        controller.watch(Secret, mapper=handler)
    with pytest.raises(TypeError, match="handler: watch mappers must be synchronous; use def"):
        controller.watch(Secret)(handler)
    with pytest.raises(TypeError, match="handler: reconcilers must be synchronous; use def"):
        Controller(ConfigMap, handler)
    with pytest.raises(TypeError, match="handler: admission handlers must be synchronous"):
        controller.validate()(handler)

    class AsyncCallable:
        async def __call__(self, config):
            return None

    with pytest.raises(TypeError, match="handlers must be synchronous"):
        controller.reconcile()(AsyncCallable())


def test_handler_signatures():
    controller = Controller(ConfigMap)
    with pytest.raises(TypeError, match="three: use \\(resource\\) or \\(resource, ctx\\)"):

        @controller.reconcile()
        def three(a, b, c):
            return None

    with pytest.raises(TypeError, match="use \\(resource\\) or \\(resource, ctx\\)"):
        controller.reconcile()(lambda *args: None)
    with pytest.raises(TypeError, match="use \\(resource\\) or \\(resource, ctx\\)"):
        controller.case(when=lambda: True)


def test_report_status_requires_reconcile_status():
    controller = Controller(Gadget, report_status=True)
    controller.reconcile()(noop)
    with pytest.raises(TypeError, match="Automatic reporting requires a ReconcileStatus subclass"):
        controller.validate_definition()
    cfg = Controller(ConfigMap, report_status=True)
    cfg.reconcile()(noop)
    with pytest.raises(TypeError, match="Automatic reporting requires a ReconcileStatus subclass"):
        cfg.validate_definition()


def test_owns_with_prune_and_watches():
    controller = Controller(Widget, owns=(ConfigMap,))
    controller.owns(Deployment, prune=True).owns(ConfigMap, prune=True).owns(ConfigMap)
    assert controller.owned == (Owned(ConfigMap, True), Owned(Deployment, True))
    assert controller.pruned == (ConfigMap, Deployment)

    def by_name(secret):
        return [ResourceKey(secret.name, secret.namespace)]

    assert controller.watch(Secret, mapper=by_name) is controller

    @controller.watch(Deployment)
    def by_owner(deployment):
        return []

    assert [(w.resource, w.mapper) for w in controller.watches] == [
        (Secret, by_name),
        (Deployment, by_owner),
    ]
    assert controller.kinds == (Widget, ConfigMap, Deployment, Secret)
    with pytest.raises(TypeError, match="owns expects Resource classes"):
        controller.owns("ConfigMap")  # type: ignore[arg-type]


def test_frozen_controller_refuses_registration():
    controller = Controller(ConfigMap)
    controller.reconcile()(noop)
    controller.validate_definition(freeze=True)
    with pytest.raises(RuntimeError, match="Register handlers before running the controller"):
        controller.stage(condition="A")
    with pytest.raises(RuntimeError, match="Register handlers before running the controller"):
        controller.finalize("example.com/x")(noop)
    with pytest.raises(RuntimeError, match="Register handlers before running the controller"):
        controller.validate()(lambda request: None)
    with pytest.raises(RuntimeError, match="Configure watches before running the controller"):
        controller.owns(Secret)
    with pytest.raises(RuntimeError, match="Configure watches before running the controller"):
        controller.watch(Secret, mapper=lambda s: [])


class FakeRuntime:
    ready = True

    def __init__(self) -> None:
        self.keys: list[ResourceKey] = []

    def enqueue(self, key: ResourceKey) -> None:
        self.keys.append(key)

    def cached(self, resource):
        return ("cache", resource)


def test_enqueue_and_cached_need_a_running_controller():
    controller = Controller(ConfigMap, owns=(Secret,))
    controller.reconcile()(noop)
    with pytest.raises(TypeError, match="enqueue expects a ResourceKey"):
        controller.enqueue("default/x")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="enqueue needs a running controller"):
        controller.enqueue(ResourceKey("x", "default"))
    with pytest.raises(ValueError, match="Deployment is not initialized; declare a watch first"):
        controller.cached(Deployment)
    with pytest.raises(RuntimeError, match="cached reads need a running controller"):
        controller.cached(Secret)
    assert controller.ready is False
    runtime = FakeRuntime()
    controller.attach(runtime)
    assert controller.frozen and controller.ready and controller.runtime is runtime
    controller.enqueue(ResourceKey("x", "default"))
    assert runtime.keys == [ResourceKey("x", "default")]
    assert controller.cached(Secret) == ("cache", Secret)
    with pytest.raises(RuntimeError, match="Controller instances can only run once"):
        controller.attach(FakeRuntime())


def test_controller_scoped_admission_routes():
    controller = Controller(Widget)

    @controller.mutate()
    def default_labels(request):
        return None

    @controller.validate(operations=("CREATE", "UPDATE", "DELETE"))
    def validate_message(request):
        return None

    mutate, validate = controller.routes
    assert mutate.mutation and mutate.model is Widget and mutate.resource == "widgets"
    assert mutate.path.startswith("/mutate/default-labels-")
    assert validate.path.startswith("/validate/validate-message-")
    assert validate.operations == ("CREATE", "UPDATE", "DELETE")


# Low-level Stages / Cases.


def test_low_level_stage_validation():
    with pytest.raises(ValueError, match="Ready is reserved for the aggregate condition"):
        Stage("Ready", noop)
    with pytest.raises(ValueError, match="Stage name must be an identifier"):
        Stage("not valid", noop)
    with pytest.raises(TypeError, match="Stage run must be a callable"):
        Stage("A", "nope")  # type: ignore[arg-type]

    async def step(request):
        return None

    with pytest.raises(TypeError, match="step: stage steps must be synchronous; use def"):
        Stage("A", step)
    with pytest.raises(ValueError, match="Stages requires one or more Stage values"):
        Stages()
    with pytest.raises(ValueError, match="Stage names must be unique"):
        Stages(Stage("A", noop), Stage("A", noop))
    with pytest.raises(TypeError, match="Stages need a ReconcileStatus subclass"):
        Controller(Gadget, Stages(Stage("A", noop))).validate_definition()
    Controller(Gadget, Stages(Stage("A", noop), report_status=False)).validate_definition()
    Controller(Widget, Stages(Stage("A", noop))).validate_definition()


def test_low_level_cases():
    cases: Cases[Widget] = Cases()
    with pytest.raises(ValueError, match="Register at least one case"):
        Controller(Widget, cases).validate_definition()
    cases.case("Small", when=lambda r: False, priority=1)(noop)
    with pytest.raises(ValueError, match="Case priorities must be unique"):
        cases.case("Other", when=lambda r: True, priority=1)(noop)
    with pytest.raises(ValueError, match="Case names must be unique"):
        cases.case("Small", when=lambda r: True, priority=2)(noop)
    cases.case("Large", when=lambda r: True, priority=5)(noop)
    cases.otherwise("Default")(noop)
    with pytest.raises(ValueError, match="Only one otherwise case may be registered"):
        cases.otherwise("Again")(noop)
    Controller(Widget, cases).validate_definition(freeze=True)
    assert [case.stage.name for case in cases.cases] == ["Large", "Small"]
    selected = cases.select(object())
    assert selected is not None and selected.name == "Large"
    with pytest.raises(RuntimeError, match="Register cases before running the controller"):
        cases.case("Late", when=lambda r: True)(noop)

    mixed: Cases[Widget] = Cases()
    mixed.case("A", when=lambda r: True, priority=1)(noop)
    mixed.case("B", when=lambda r: True)(noop)
    with pytest.raises(ValueError, match="Give every case a priority"):
        Controller(Widget, mixed).validate_definition()

    async def predicate(request):
        return True

    with pytest.raises(TypeError, match="predicate: predicates must be synchronous"):
        Cases().case("A", when=predicate)


def test_decorators_used_without_parentheses_explain_themselves():
    controller = Controller(ConfigMap)
    with pytest.raises(TypeError, match=r"Use @controller.reconcile\(\) with parentheses"):
        controller.reconcile(noop)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"Use @controller.otherwise\(\) with parentheses"):
        controller.otherwise(noop)  # type: ignore[call-arg]
