"""A widget-like operator definition for install tests: CRD, controller, admission routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Service
from cloudcoil.resources import Resource
from pydantic import BaseModel, Field

from cloudcoil_sync.application import Application, RBACRule, WebhookServer
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.crd import custom_resource

NAMESPACE = "operators"


class GadgetSpec(BaseModel):
    size: int = 1


@custom_resource(api_version="install.cloudcoil.dev/v1", plural="gadgets")
class Gadget(Resource):
    spec: GadgetSpec = Field(default_factory=GadgetSpec)
    status: dict[str, Any] | None = None


def keep(resource: Any) -> Any:
    return resource


def gadgets(
    ca: bytes | None,
    *,
    name: str = "gadgets",
    config: Config | None = None,
    reconcile: Callable[[Any], Any] = keep,
    leader_election: LeaderElection | bool = True,
) -> Application:
    """Controller of Gadget owning ConfigMaps/Deployments/Services; two webhooks with ``ca``."""
    webhook = WebhookServer(ca_bundle=ca, tls_secret=f"{name}-tls") if ca is not None else None
    app = Application(
        name,
        namespace=NAMESPACE,
        config=config,
        leader_election=leader_election,
        webhook=webhook,
        rules=(RBACRule(ConfigMap, ("get",), plural="configmaps", scope="Namespaced"),),
    )
    controller = app.controller(Gadget)
    controller.owns(ConfigMap)
    controller.owns(Deployment)
    controller.owns(Service)
    controller.reconcile()(reconcile)
    if webhook is not None:
        controller.mutate()(keep)
        controller.validate()(keep)
    return app
