"""Admission routes: defaults, path rules, plural/scope lookup and webhook configurations."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.autoscaling.v1 import Scale
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace

from cloudcoil_sync.admission import mutating, validating
from cloudcoil_sync.admission._internal.routes import (
    AdmissionRoutes,
    build_route,
    webhook_configurations,
)
from cloudcoil_sync.application import Application, WebhookServer

from .models import PEM, Gadget, Unmapped, Widget


def allow(request):
    return None


def route(model=Deployment, **options):
    options.setdefault("path", "/validate/x")
    return build_route(model, allow, mutation=False, **options)


def test_route_defaults_from_builtin_table():
    r = route()
    assert (r.resource, r.scope, r.operations) == (
        "deployments",
        "Namespaced",
        ("CREATE", "UPDATE"),
    )
    assert (r.timeout_seconds, r.failure_policy, r.subresource) == (5, "Fail", "")
    assert r.namespace_selector is None and r.target is None
    assert r.model_gvk == r.target_gvk == ("apps", "v1", "Deployment")
    assert r.kind == "validate" and r.endpoint == "deployments"
    assert route(Namespace).scope == "Cluster"
    assert route(Widget).resource == "widgets" and route(Gadget).scope == "Cluster"


def test_route_for_subresource_target():
    r = route(Scale, target=Deployment, subresource="scale")
    assert r.model_gvk == ("autoscaling", "v1", "Scale")
    assert r.target_gvk == ("apps", "v1", "Deployment")
    assert r.endpoint == "deployments/scale"
    with pytest.raises(ValueError, match="A different admission target requires subresource"):
        route(Scale, target=Deployment)


def test_unknown_kinds_need_explicit_resource():
    with pytest.raises(ValueError, match=r"Supply resource=\.\.\. or use a model"):
        route(Unmapped)
    with pytest.raises(ValueError, match=r"Supply resource=\.\.\. or use a model"):
        route(Scale)  # Scale is only served as a subresource
    r = route(Unmapped, resource="unmappeds")
    assert (r.resource, r.scope) == ("unmappeds", "*")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"resource": "Deployments"}, "resource must be the exact lowercase Kubernetes"),
        ({"subresource": "Scale", "target": Deployment}, "subresource must be an exact lowercase"),
        ({"operations": ()}, "operations must contain unique CREATE, UPDATE, or DELETE"),
        ({"operations": ("CREATE", "CREATE")}, "operations must contain unique"),
        ({"operations": ("CONNECT",)}, "operations must contain unique"),
        ({"operations": "CREATE"}, "operations must contain unique"),
        ({"scope": "Global"}, "Invalid webhook scope or failure policy"),
        ({"failure_policy": "Maybe"}, "Invalid webhook scope or failure policy"),
        ({"timeout_seconds": 0}, "timeout_seconds must be an integer between 1 and 30"),
        ({"timeout_seconds": 31}, "timeout_seconds must be an integer between 1 and 30"),
        ({"timeout_seconds": 2.5}, "timeout_seconds must be an integer between 1 and 30"),
    ],
)
def test_route_settings_are_validated(options, message):
    with pytest.raises(ValueError, match=message):
        route(**options)


@pytest.mark.parametrize("path", ["validate", "/Validate", "/a?b=c", "/a%20b", "/a b", "/"])
def test_path_rules(path):
    with pytest.raises(ValueError, match="must be an absolute path of lower-case") as info:
        route(path=path)
    assert str(info.value).startswith(f"Webhook path {path!r} ")


def test_health_path_is_reserved():
    with pytest.raises(ValueError, match="Webhook path '/healthz' is the health endpoint"):
        route(path="/healthz")


@pytest.mark.parametrize(("path", "segment"), [("/a//b", ""), ("/a/-b", "-b"), ("/a/b.", "b.")])
def test_path_segments_are_dns_subdomains(path, segment):
    expected = f"Webhook path {path!r}: segment {segment!r} is not a DNS subdomain"
    with pytest.raises(ValueError, match=re.escape(expected)):
        route(path=path)


def test_paths_unique_within_a_table():
    table = AdmissionRoutes()
    table.validating(Deployment, path="/validate/deployments")(allow)
    with pytest.raises(ValueError, match="Webhook path '/validate/deployments' is already"):
        table.mutating(Deployment, path="/validate/deployments")(lambda request: request.resource)
    assert list(table.routes) == ["/validate/deployments"]


def test_default_path_is_kebab_name_and_stable_digest():
    app = Application("ops", webhook=WebhookServer())

    @app.validate(Deployment)
    def Check_Replica_Count(request):
        return None

    long_name = "a_very_long_admission_handler_name_that_goes_on_and_on_forever"

    def handler(request):
        return None

    handler.__name__ = long_name
    app.mutate(Scale, target=Deployment, subresource="scale")(handler)
    first, second = app.routes
    identity = (
        f"{__name__}.test_default_path_is_kebab_name_and_stable_digest.<locals>."
        f"Check_Replica_Count:{Deployment.gvk()}:"
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    assert first.path == f"/validate/check-replica-count-{digest}"
    prefix = "a-very-long-admission-handler-name-that-"[:40].strip("-")
    assert second.path.startswith(f"/mutate/{prefix}-") and len(second.path.split("-")[-1]) == 12


def test_admission_handler_signature_and_sync():
    app = Application("ops")

    async def check(request):
        return None

    with pytest.raises(TypeError, match="check: admission handlers must be synchronous; use def"):
        app.validate(Deployment)(check)
    with pytest.raises(TypeError, match="two: admission handlers must take one AdmissionRequest"):

        @app.mutate(Deployment)
        def two(request, extra):
            return None

    with pytest.raises(TypeError, match="admission handlers must take one AdmissionRequest"):
        AdmissionRoutes().validating(Deployment, path="/v")(lambda: None)


def test_max_body_bytes_validation():
    assert AdmissionRoutes().max_body_bytes == 4 * 1024 * 1024
    with pytest.raises(ValueError, match="max_body_bytes must be a positive integer"):
        AdmissionRoutes(max_body_bytes=0)


# Model-level @mutating / @validating.


def test_model_methods_register_with_default_paths():
    class Policies(Widget):
        pass

    from cloudcoil_sync.crd import custom_resource

    @custom_resource(api_version="example.com/v1", kind="Widget", plural="widgets")
    class Checked(Widget):
        @staticmethod
        @validating()
        def validate_admission(request):
            return None

        @classmethod
        @mutating(operations=("CREATE",), path="/custom/defaults")
        def defaults(cls, request, client):
            return None

    with pytest.raises(ValueError, match=r"Checked.defaults needs AdmissionWebhook\(config=...\)"):
        AdmissionRoutes().register(Checked)
    table = AdmissionRoutes().register_models([Checked], require_config=False)
    assert set(table.routes) == {
        "/validate/example/com/v1/widgets/validate-admission",
        "/custom/defaults",
    }
    assert table.routes["/custom/defaults"].operations == ("CREATE",)
    with pytest.raises(ValueError, match="Policies needs @custom_resource"):
        AdmissionRoutes().register(Policies)
    with pytest.raises(ValueError, match="Widget has no decorated admission methods"):
        AdmissionRoutes().register(Widget)


def test_model_decorator_errors():
    async def handler(request):
        return None

    with pytest.raises(TypeError, match="handler: admission handlers must be synchronous"):
        validating()(handler)
    with pytest.raises(TypeError, match="put @classmethod/@staticmethod outermost"):
        validating()(staticmethod(allow))

    def once(request):
        return None

    validating()(once)
    with pytest.raises(ValueError, match="An admission method can declare only one policy"):
        mutating()(once)


def test_application_registers_model_methods_of_its_crds():
    from cloudcoil_sync.crd import custom_resource

    @custom_resource(api_version="example.com/v1", kind="Thing", plural="things")
    class Thing(Widget):
        @staticmethod
        @validating()
        def check(request):
            return None

    app = Application("ops", resources=(Thing,), webhook=WebhookServer())
    ConfigMapController = app.controller(ConfigMap)
    ConfigMapController.reconcile()(allow)
    app.validate_definition()
    assert [r.path for r in app.routes] == ["/validate/example/com/v1/things/check"]


# Webhook configurations.


def configs(app: Application) -> dict[str, dict]:
    app.validate_definition()
    documents = app.webhook_configurations()
    return {hook["name"]: hook for doc in documents for hook in doc["webhooks"]}


def test_configuration_documents_match_the_reference():
    app = Application("widgets", namespace="operators", webhook=WebhookServer(ca_bundle=PEM))
    widgets = app.controller(Widget)
    widgets.reconcile()(allow)
    widgets.mutate()(lambda request: None)
    widgets.validate()(lambda request: None)
    app.validate_definition()
    mutating_doc, validating_doc = app.webhook_configurations()
    assert mutating_doc["kind"] == "MutatingWebhookConfiguration"
    assert validating_doc["kind"] == "ValidatingWebhookConfiguration"
    assert mutating_doc["metadata"] == {"name": "widgets.operators.cloudcoil.io"}
    (hook,) = mutating_doc["webhooks"]
    path = app.routes[0].path
    assert hook == {
        "name": "mutate-0.widgets.operators.cloudcoil.io",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "matchPolicy": "Exact",
        "timeoutSeconds": 5,
        "clientConfig": {
            "service": {"name": "widgets", "namespace": "operators", "path": path, "port": 443},
            "caBundle": base64.b64encode(PEM).decode(),
        },
        "rules": [
            {
                "apiGroups": ["examples.cloudcoil.dev"],
                "apiVersions": ["v1alpha1"],
                "resources": ["widgets"],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            }
        ],
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["operators"]}
            ]
        },
        "reinvocationPolicy": "Never",
    }
    (validate_hook,) = validating_doc["webhooks"]
    assert validate_hook["name"] == "validate-1.widgets.operators.cloudcoil.io"
    assert "reinvocationPolicy" not in validate_hook


def test_default_namespace_selectors():
    app = Application("ops", namespace="operators", webhook=WebhookServer(ca_bundle=PEM))
    for namespace in ("team-b", "team-a"):
        app.controller(Widget, namespace=namespace).reconcile()(allow)
    app.controller(Deployment, all_namespaces=True).reconcile()(allow)
    app.validate(Widget, path="/widgets")(allow)
    app.validate(Deployment, path="/deployments")(allow)
    app.validate(ConfigMap, path="/configmaps")(allow)
    app.validate(ConfigMap, path="/explicit", namespace_selector={"matchLabels": {"a": "b"}})(allow)
    app.validate(Gadget, path="/gadgets")(allow)
    app.validate(Scale, target=Deployment, subresource="scale", path="/scale")(allow)
    hooks = {hook["clientConfig"]["service"]["path"]: hook for hook in configs(app).values()}

    def values(path):
        return hooks[path]["namespaceSelector"]["matchExpressions"][0]["values"]

    assert values("/widgets") == ["team-a", "team-b"]  # controller namespaces
    assert values("/configmaps") == ["operators"]  # webhook-only: operator namespace
    assert "namespaceSelector" not in hooks["/deployments"]  # all-namespaces controller
    assert "namespaceSelector" not in hooks["/scale"]  # target Deployment, all namespaces
    assert "namespaceSelector" not in hooks["/gadgets"]  # cluster scope
    assert hooks["/explicit"]["namespaceSelector"] == {"matchLabels": {"a": "b"}}
    assert [name.split(".")[0] for name in configs(app)] == [f"validate-{i}" for i in range(6)]


def test_configuration_input_errors():
    routes = [route(path="/validate/x")]
    options = {"name": "ops.operators.cloudcoil.io", "service_name": "ops"}
    with pytest.raises(ValueError, match="ca_bundle must contain PEM certificate bytes"):
        webhook_configurations(routes, service_namespace="operators", ca_bundle=b"", **options)
    with pytest.raises(ValueError, match=r"The \.static\.k8s\.io suffix is reserved"):
        webhook_configurations(
            routes,
            name="a.static.k8s.io",
            service_name="ops",
            service_namespace="operators",
            ca_bundle=PEM,
        )
    with pytest.raises(ValueError, match="name must include a domain"):
        webhook_configurations(
            routes, name="ops", service_name="ops", service_namespace="operators", ca_bundle=PEM
        )
    with pytest.raises(ValueError, match="Invalid DNS label: 'Bad'"):
        webhook_configurations(routes, service_namespace="Bad", ca_bundle=PEM, **options)
    with pytest.raises(ValueError, match="service_port must be an integer between 1 and 65535"):
        webhook_configurations(
            routes, service_namespace="operators", ca_bundle=PEM, service_port=0, **options
        )
    assert webhook_configurations([], service_namespace="operators", ca_bundle=PEM, **options) == []


def test_model_api_version_needs_its_alias():
    from cloudcoil.resources import Resource

    class NoAlias(Resource):
        api_version: str = "example.com/v1"  # type: ignore[assignment]
        kind: str = "NoAlias"

    with pytest.raises(ValueError, match=r"needs Field\(alias='apiVersion'\)"):
        route(NoAlias, resource="noaliases")
