"""Operator definitions whose manifests are checked against golden files.

Each builder returns ``(app, options)``: the Application and its ``manifests`` keywords.
``ca`` is the PEM CA certificate for apps with webhooks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any

from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace, Secret, Service
from cloudcoil.resources import Resource
from pydantic import BaseModel, Field

from cloudcoil_sync.application import Application, RBACRule, WebhookServer
from cloudcoil_sync.controller import ReconcileStatus, ResourceKey
from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.health import HealthServer
from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.crd import PrinterColumn, custom_resource

Built = tuple[Application, dict[str, Any]]


class WidgetSpec(BaseModel):
    replicas: int = 1
    message: str = "hello"


class WidgetStatus(ReconcileStatus):
    phase: Annotated[str | None, PrinterColumn("Phase")] = None


@custom_resource(
    api_version="examples.cloudcoil.dev/v1alpha1", plural="widgets", short_names=("wd",)
)
class Widget(Resource):
    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: WidgetStatus | None = None


class TenantSpec(BaseModel):
    owner: str


@custom_resource(api_version="example.com/v1", plural="tenants", scope="Cluster")
class Tenant(Resource):
    spec: TenantSpec
    status: dict[str, str] | None = None


def keep(resource: Any) -> Any:
    return resource


def no_keys(resource: Any) -> Iterator[ResourceKey]:
    return iter(())


def settings(ca: bytes) -> Built:
    """The seed's controller-only ConfigMap example (namespace from CLOUDCOIL_NAMESPACE)."""
    app = Application("settings", leader_election=True)
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")
    configs.reconcile()(keep)
    return app, {"image": "example/widgets:v1"}


def policies(ca: bytes) -> Built:
    """Admission only: app-level routes on built-in kinds, no controllers."""
    app = Application(
        "policies",
        namespace="guard",
        webhook=WebhookServer(ca_bundle=ca, tls_secret="policies-tls"),
    )

    def require_owner_label(request: Any) -> None:
        return None

    def default_replicas(request: Any) -> Any:
        return request.resource

    def protect_namespaces(request: Any) -> None:
        return None

    app.validate(ConfigMap)(require_owner_label)
    app.mutate(Deployment, timeout_seconds=10, failure_policy="Ignore")(default_replicas)
    app.validate(Namespace, operations=("DELETE",))(protect_namespaces)
    return app, {"image": "example/policies:v2", "replicas": 2}


def tenants(ca: bytes) -> Built:
    """A cluster-scoped custom primary owning namespaced children (pruned) everywhere."""
    app = Application("tenants", namespace="platform")
    controller = app.controller(Tenant, owns=(Namespace,))
    controller.owns(ConfigMap, prune=True)
    controller.watch(Secret, mapper=no_keys)
    controller.reconcile()(keep)
    return app, {"image": "example/tenants:v1", "command": ["python", "-m", "tenants"]}


def watcher(ca: bytes) -> Built:
    """An all-namespaces controller with a health server for its probes."""
    app = Application("watcher", namespace="ops", health=HealthServer(host="0.0.0.0", port=8081))
    controller = app.controller(Deployment, all_namespaces=True, owns=(Service,))
    controller.watch(ConfigMap, mapper=no_keys)
    controller.reconcile()(keep)
    return app, {"image": "example/watcher:v1"}


def multi(ca: bytes) -> Built:
    """Several controllers in different namespaces, RBAC rules, a lease elsewhere."""
    team_a = Controller(ConfigMap, namespace="team-a", events=False)
    team_a.reconcile()(keep)
    team_b = Controller(Secret, namespace="team-b")
    team_b.owns(ConfigMap, prune=True)
    team_b.reconcile()(keep)
    app = Application(
        "fleet",
        team_a,
        team_b,
        namespace="fleet-system",
        leader_election=LeaderElection("fleet-leader", namespace="leases"),
        rules=(
            RBACRule(Deployment, ("get", "update"), all_namespaces=True, subresources=("scale",)),
            RBACRule(Namespace, ("get", "list")),
            RBACRule(ConfigMap, ("get",), namespace="team-b", resource_names=("fleet-config",)),
        ),
    )
    deployments = app.controller(Deployment)
    deployments.reconcile()(keep)
    return app, {}


def widgets(ca: bytes) -> Built:
    """The reference's widget definition (section 7), with its admission routes."""
    app = Application(
        "widgets",
        namespace="operators",
        leader_election=True,
        webhook=WebhookServer(ca_bundle=ca, tls_secret="widgets-tls"),
        rules=(
            RBACRule(
                ConfigMap,
                ("get",),
                plural="configmaps",
                scope="Namespaced",
                resource_names=("widget-policy",),
            ),
            RBACRule(Deployment, ("get",), plural="deployments", scope="Namespaced"),
            RBACRule(Service, ("get",), plural="services", scope="Namespaced"),
        ),
    )
    controller = app.controller(Widget, owns=(ConfigMap, Deployment, Service))
    controller.reconcile()(keep)

    def default_labels(request: Any) -> Any:
        return request.resource

    def validate_message(request: Any) -> None:
        return None

    controller.mutate()(default_labels)
    controller.validate()(validate_message)
    return app, {"image": "widgets:v1"}


APPS: dict[str, Callable[[bytes], Built]] = {
    "settings": settings,
    "policies": policies,
    "tenants": tenants,
    "watcher": watcher,
    "multi": multi,
    "widgets": widgets,
}
