"""Application definitions: namespace resolution, composition and the errors of 0.8 §4."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace

from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook
from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.crd import CRD

from .models import PEM, Gadget, Widget, WidgetV1


def noop(resource):
    return None


@pytest.fixture
def config() -> Iterator[Config]:
    config = Config("https://127.0.0.1:6443", namespace="operators")
    yield config
    config.close()


def reconciled(app: Application, resource=ConfigMap, **options) -> Controller:
    controller = app.controller(resource, **options)
    controller.reconcile()(noop)
    return controller


# Namespace resolution.


def test_namespace_defaults_to_default(monkeypatch):
    monkeypatch.delenv("CLOUDCOIL_NAMESPACE", raising=False)
    assert Application("ops").namespace == "default"


def test_namespace_from_environment_is_read_at_construction(monkeypatch):
    monkeypatch.setenv("CLOUDCOIL_NAMESPACE", "from-env")
    app = Application("ops")
    monkeypatch.setenv("CLOUDCOIL_NAMESPACE", "later")
    assert app.namespace == "from-env"


def test_config_namespace_beats_environment(monkeypatch, config):
    monkeypatch.setenv("CLOUDCOIL_NAMESPACE", "from-env")
    app = Application("ops", config=config)
    assert app.namespace == "operators" and app.config is config


def test_explicit_namespace_wins_and_must_match_config(monkeypatch, config):
    monkeypatch.setenv("CLOUDCOIL_NAMESPACE", "from-env")
    assert Application("ops", namespace="explicit").namespace == "explicit"
    assert Application("ops", namespace="operators", config=config).namespace == "operators"
    with pytest.raises(ValueError, match=r"Config\.namespace must match Application\.namespace"):
        Application("ops", namespace="other", config=config)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "Bad_Name"}, "Application name must be a Kubernetes DNS label"),
        (
            {"name": "ops", "namespace": "a.b"},
            "Application namespace must be a Kubernetes DNS label",
        ),
    ],
)
def test_names_are_dns_labels(options, message):
    with pytest.raises(ValueError, match=message):
        Application(**options)


# Composition.


def test_attributes_and_leader_election_shorthand():
    app = Application("settings", namespace="ops", leader_election=True)
    assert isinstance(app.leader_election, LeaderElection)
    assert app.leader_election.name == "settings"
    assert Application("settings", leader_election=False).leader_election is None
    assert app.controllers == () and app.crds == () and app.rules == ()
    assert app.webhook is None and app.health is None and app.admission is None
    assert app.config is None and app.manager is None


def test_include_and_controller(config):
    app = Application("ops")
    group = Controller(ConfigMap)
    assert app.include(group) is app
    with pytest.raises(ValueError, match="A controller cannot be registered twice"):
        app.include(group)
    with pytest.raises(ValueError, match="Application controllers must share the operator Config"):
        app.include(Controller(ConfigMap, config=config))
    created = app.controller(Deployment, workers=3, name="deploys")
    assert app.controllers == (group, created)
    assert (created.workers, created.name) == (3, "deploys")
    shared = Application("ops", Controller(ConfigMap, config=config), config=config)
    assert len(shared.controllers) == 1


def test_shared_config_checks(config):
    other = Config("https://127.0.0.1:6443", namespace="operators")
    try:
        with pytest.raises(
            ValueError, match="Application leader election must share the operator Config"
        ):
            Application("ops", config=config, leader_election=LeaderElection("ops", config=other))
        from cloudcoil_sync.admission._internal.routes import AdmissionRoutes

        with pytest.raises(ValueError, match="AdmissionWebhook must share the operator Config"):
            Application("ops", config=config, admission=AdmissionRoutes(config=other))
    finally:
        other.close()


def test_registration_after_freeze_is_refused():
    app = Application("ops")
    reconciled(app)
    app.validate_definition(freeze=True)
    assert app.frozen
    message = "Register application components before running"
    with pytest.raises(RuntimeError, match=message):
        app.include(Controller(Deployment))
    with pytest.raises(RuntimeError, match=message):
        app.controller(Deployment)
    with pytest.raises(RuntimeError, match=message):
        app.validate(ConfigMap)(lambda request: None)
    with pytest.raises(RuntimeError, match=message):
        app.lifespan()(_process_lifespan)
    assert app.controllers[0].frozen


def _process_lifespan():
    yield


def test_empty_application_is_valid_until_validated():
    app = Application("ops")
    with pytest.raises(ValueError, match="An application needs controllers or webhooks"):
        app.validate_definition()
    reconciled(app)
    app.validate_definition()


def test_controller_errors_surface_from_application():
    app = Application("ops")
    app.controller(ConfigMap)
    with pytest.raises(ValueError, match="Register exactly one entrypoint"):
        app.validate_definition()


def test_crds_from_resources_and_custom_resource_primaries():
    app = Application("widgets", resources=(Gadget,))
    reconciled(app, Widget)
    reconciled(app, ConfigMap)
    app.validate_definition()
    assert [crd.resource for crd in app.crds] == [Gadget, Widget]
    assert all(isinstance(crd, CRD) for crd in app.crds)


def test_resource_registered_twice():
    app = Application("widgets", resources=(Gadget, CRD(Gadget)))
    reconciled(app)
    with pytest.raises(ValueError, match="A resource cannot be registered twice"):
        app.validate_definition()


def test_crd_names_must_be_distinct():
    app = Application("widgets", resources=(WidgetV1,))
    reconciled(app, Widget)
    with pytest.raises(ValueError, match=r"both define the CRD widgets"):
        app.validate_definition()


def test_admission_routes_require_webhook_server_and_vice_versa():
    app = Application("ops")
    app.validate(Deployment)(lambda request: None)
    with pytest.raises(ValueError, match=r"Admission routes require webhook=WebhookServer\(...\)"):
        app.validate_definition()
    lonely = Application("ops", webhook=WebhookServer())
    reconciled(lonely)
    with pytest.raises(ValueError, match="A webhook server needs admission routes"):
        lonely.validate_definition()
    admission_only = Application("ops", webhook=WebhookServer())
    admission_only.validate(Deployment)(lambda request: None)
    admission_only.validate_definition()
    assert admission_only.crds == ()


def test_admission_paths_unique_across_groups():
    app = Application("ops", webhook=WebhookServer())
    app.validate(ConfigMap, path="/validate/configmaps")(lambda request: None)
    controller = reconciled(app)
    controller.validate(path="/validate/configmaps")(lambda request: None)
    with pytest.raises(
        ValueError,
        match="Admission paths must be unique across included groups: "
        "/validate/configmaps registered twice",
    ):
        app.validate_definition()


def test_admission_paths_must_not_shadow_health_endpoints():
    app = Application("ops", webhook=WebhookServer())
    app.validate(ConfigMap, path="/readyz")(lambda request: None)
    with pytest.raises(
        ValueError, match="Admission paths conflict with operator health/metrics endpoints: /readyz"
    ):
        app.validate_definition()


def test_routes_order_app_first_then_controllers():
    app = Application("ops", namespace="operators", webhook=WebhookServer(ca_bundle=PEM))
    controller = reconciled(app, Widget)

    @controller.mutate()
    def default_labels(request):
        return None

    @app.validate(Deployment)
    def check_deployment(request):
        return None

    app.validate_definition()
    assert [route.handler for route in app.routes] == [check_deployment, default_labels]


def test_leader_lifespan_requires_leader_election_and_controllers():
    app = Application("ops", webhook=WebhookServer())
    app.validate(Deployment)(lambda request: None)

    @app.lifespan(scope="leader")
    def leader():
        yield

    with pytest.raises(
        ValueError, match="Leader lifespan requires leader election and controllers"
    ):
        app.validate_definition()
    elected = Application("ops", leader_election=True)
    reconciled(elected)
    elected.lifespan(scope="leader")(leader)
    elected.validate_definition()


def test_settings_types_are_checked():
    with pytest.raises(TypeError, match="rules must contain RBACRule values"):
        Application("ops", rules=("get",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="webhook must be a WebhookServer or None"):
        Application("ops", webhook=True)  # type: ignore[arg-type]


def test_admission_table_passed_to_the_application():
    from cloudcoil_sync.admission._internal.routes import AdmissionRoutes

    table = AdmissionRoutes(max_body_bytes=1024)
    table.validating(Deployment, path="/validate/deployments")(noop)
    app = Application("ops", admission=table, webhook=WebhookServer())

    @app.mutate(Deployment)
    def defaults(request):
        return None

    app.validate_definition()
    assert next(r.path for r in app.routes) == "/validate/deployments"
    assert len(table.routes) == 2  # decorators add to the passed table, as in 0.8
    assert app.admission_routes().max_body_bytes == 1024
    with pytest.raises(ValueError, match="Webhook path '/validate/deployments' is already"):
        app.validate(Deployment, path="/validate/deployments")(noop)
    with pytest.raises(TypeError, match="admission must be an AdmissionWebhook or AdmissionRoutes"):
        Application("ops", admission=object())  # type: ignore[arg-type]


def test_serving_webhook_can_be_passed_as_admission():
    from cloudcoil_sync.admission._internal.routes import AdmissionRoutes

    table = AdmissionRoutes()
    table.validating(Deployment, path="/validate/deployments")(noop)
    served = AdmissionWebhook(table)
    try:
        app = Application("ops", admission=served, webhook=WebhookServer())
        app.validate(ConfigMap, path="/validate/configmaps")(noop)
        app.validate_definition()
        assert [r.path for r in app.routes] == ["/validate/deployments", "/validate/configmaps"]
    finally:
        served.close()


def test_two_controllers_for_one_kind_are_refused_naming_both():
    app = Application("widgets", namespace="ops")
    first = app.controller(Widget, name="sizes")
    second = app.controller(Widget, name="labels")
    for controller in (first, second):
        controller.reconcile()(lambda widget: None)
    with pytest.raises(
        ValueError, match="'sizes' \\(Widget\\) and controller 'labels' \\(Widget\\)"
    ):
        app.validate_definition()
    with pytest.raises(ValueError, match="Two controllers reconcile the same Widget objects"):
        app.manifests()


def test_controllers_of_one_kind_with_disjoint_scopes_are_accepted():
    app = Application("widgets", namespace="ops")
    scoped = (
        {"label_selector": "tier=a"},
        {"label_selector": "tier in (b, c)"},
        {"label_selector": "tier notin (a, b, c)", "namespace": "ops"},
        {"namespace": "elsewhere"},
    )
    for options in scoped:
        app.controller(Widget, **options).reconcile()(lambda widget: None)
    app.validate_definition()
    # Explicitly the operator's namespace is the default one: the same objects.
    clash = Application("clash", namespace="ops")
    clash.controller(Widget).reconcile()(lambda widget: None)
    clash.controller(Widget, namespace="ops").reconcile()(lambda widget: None)
    with pytest.raises(ValueError, match="Two controllers"):
        clash.validate_definition()


def test_overlap_follows_namespace_lists_selectors_and_cluster_scope():
    def check(*scopes: dict[str, object]) -> None:
        app = Application("scopes", namespace="ops")
        for options in scopes:
            kind = options.pop("kind", Widget)
            listed, selector = options.pop("listed", ()), options.pop("selector", None)
            controller = app.controller(kind, **options)
            if listed or selector:
                controller.watch_namespaces(*listed, selector=selector)
            controller.reconcile()(lambda obj: None)
        app.validate_definition()

    check({"listed": ("a", "b")}, {"listed": ("c",)})  # refused before: both "the operator's"
    check({"listed": ("a",)}, {"namespace": "b"}, {})  # "ops" is the third's
    check({"selector": "team=a"}, {"selector": "team=b"})
    refused = (
        ({"listed": ("a", "b")}, {"namespace": "b"}),  # accepted before: "ops" != "b"
        ({"listed": ("ops",)}, {}),
        ({"selector": "team=a"}, {"listed": ("a",)}),  # what it selects is known only running
        ({"selector": "team=a"}, {"selector": "tier=x"}),
        ({"all_namespaces": True}, {"listed": ("a",)}),
        ({"kind": Namespace, "namespace": "a"}, {"kind": Namespace, "namespace": "b"}),
    )
    for scopes in refused:
        with pytest.raises(ValueError, match="Two controllers reconcile the same"):
            check(*(dict(s) for s in scopes))
