"""The definitions of SPEC §0 and the Widget operator (reference §5) are valid as written."""

from __future__ import annotations

from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Service

from cloudcoil_sync.application import Application, RBACRule, WebhookServer
from cloudcoil_sync.controller import Wait

from .models import PEM, Widget


def test_spec_settings_example():
    app = Application("settings", leader_election=True)
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
        return config

    app.validate_definition(freeze=True)
    assert app.controllers == (configs,) and app.crds == ()
    assert configs.registry.handler is not None and configs.registry.handler.function is reconcile
    assert app.leader_election is not None and app.leader_election.name == "settings"


def test_widget_operator_definition():
    app = Application(
        "widgets",
        namespace="operators",
        rules=(RBACRule(ConfigMap, ("get",), resource_names=("widget-policy",)),),
        webhook=WebhookServer(tls_secret="widgets-tls", ca_bundle=PEM),
        leader_election=True,
    )
    widgets = app.controller(Widget, owns=(ConfigMap, Deployment, Service))

    @widgets.mutate()
    def default_labels(request):
        return request.resource

    @widgets.validate()
    def validate_message(request):
        return None

    @widgets.stage(condition="ConfigurationReady")
    def configuration(widget, ctx):
        return None

    @widgets.stage(condition="DeploymentApplied", depends=configuration)
    def deployment(widget, ctx):
        return None

    @widgets.stage(condition="ServiceReady", depends=deployment)
    def service(widget, ctx):
        return None

    @widgets.stage(condition="WorkloadAvailable", depends=service)
    def available(widget, ctx):
        raise Wait("RollingOut", "waiting for replicas", after=10)

    app.validate_definition(freeze=True)
    assert [crd.name for crd in app.crds] == ["widgets.examples.cloudcoil.dev"]
    assert [stage.condition for stage in widgets.registry.order] == [
        "ConfigurationReady",
        "DeploymentApplied",
        "ServiceReady",
        "WorkloadAvailable",
    ]
    assert widgets.report_status and not widgets.status_updates
    assert [o.resource for o in widgets.owned] == [ConfigMap, Deployment, Service]
    mutating, validating = app.webhook_configurations()
    assert mutating["webhooks"][0]["name"] == "mutate-0.widgets.operators.cloudcoil.io"
    assert validating["webhooks"][0]["name"] == "validate-1.widgets.operators.cloudcoil.io"
    assert mutating["webhooks"][0]["clientConfig"]["service"]["path"].startswith(
        "/mutate/default-labels-"
    )
