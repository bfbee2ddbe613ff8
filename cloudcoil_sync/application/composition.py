"""Checks over a whole Application definition, and the admission table it serves.

Kept apart from `application.py` so the class stays a thin, readable surface.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil.resources import Resource

from cloudcoil_sync.admission.decorators import admission_methods
from cloudcoil_sync.admission.route import GVKKey, Route, gvk_key
from cloudcoil_sync.admission.routes import HEALTH_PATHS, AdmissionRoutes, webhook_configurations
from cloudcoil_sync.controller.definition import Controller
from cloudcoil_sync.crd import CRD
from cloudcoil_sync.crd.decorator import resource_options

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

    from .application import Application

__all__ = ["admission_table", "collect_crds", "configurations", "validate"]


def collect_crds(
    resources: Iterable[type[Resource] | CRD], controllers: Sequence[Controller[Any]]
) -> tuple[CRD, ...]:
    """`resources=` entries plus every `@custom_resource` primary kind, each once."""
    definitions: dict[type[Resource], CRD] = {}
    for item in resources:
        definition = item if isinstance(item, CRD) else CRD(item)
        if definition.resource in definitions:
            raise ValueError("A resource cannot be registered twice")
        definitions[definition.resource] = definition
    for controller in controllers:
        if controller.resource not in definitions and resource_options(controller.resource):
            definitions[controller.resource] = CRD(controller.resource)
    names = [crd.name for crd in definitions.values()]
    if len(set(names)) != len(names):
        raise ValueError(
            "CRDs must have distinct metadata.name values; multi-version CRDs are not supported"
        )
    return tuple(definitions.values())


def admission_table(app: Application, config: Config | None = None) -> AdmissionRoutes:
    """Every route of the app, its admission webhook, its controllers and its CRD models."""
    merged = AdmissionRoutes(
        config=config,
        max_body_bytes=app.admission.max_body_bytes if app.admission is not None else 4 << 20,
    )
    for table in (app.admission_registry.routes, *(c.admission.routes for c in app.controllers)):
        twice = sorted(set(merged.routes) & set(table))
        if twice:
            raise ValueError(
                "Admission paths must be unique across included groups: "
                f"{', '.join(twice)} registered twice"
            )
        merged.routes.update(table)
    models = [crd.resource for crd in app.crds if admission_methods(crd.resource)]
    merged.register_models(models, require_config=config is not None)
    shadowed = sorted(set(merged.routes) & HEALTH_PATHS)
    if shadowed:
        raise ValueError(
            "Admission paths conflict with operator health/metrics endpoints: "
            f"{', '.join(shadowed)}"
        )
    return merged


def validate(app: Application) -> AdmissionRoutes:
    """Check the completed definition (offline); return its admission table."""
    for controller in app.controllers:
        controller.validate_definition()
    app.crds = collect_crds(app.resources, app.controllers)
    table = admission_table(app)
    if table.routes and app.webhook is None:
        raise ValueError("Admission routes require webhook=WebhookServer(...)")
    if app.webhook is not None and not table.routes:
        raise ValueError("A webhook server needs admission routes")
    if not app.controllers and app.webhook is None:
        raise ValueError("An application needs controllers or webhooks")
    if "leader" in app.lifespans and (app.leader_election is None or not app.controllers):
        raise ValueError("Leader lifespan requires leader election and controllers")
    return table


def controller_namespaces(
    controllers: Iterable[Controller[Any]], operator_namespace: str
) -> dict[GVKKey, set[str | None]]:
    """Primary GVK → namespaces its controllers watch (None: all namespaces)."""
    found: dict[GVKKey, set[str | None]] = {}
    for controller in controllers:
        key = gvk_key(controller.resource)
        found.setdefault(key, set()).add(controller.watched_namespace(operator_namespace))
    return found


def configurations(
    app: Application, routes: Iterable[Route], ca_bundle: bytes | None = None
) -> list[dict[str, Any]]:
    """The app's Mutating/ValidatingWebhookConfigurations with default namespace selectors."""
    if app.webhook is None:
        raise ValueError("Webhook configurations need webhook=WebhookServer(...)")
    return webhook_configurations(
        routes,
        name=f"{app.name}.{app.namespace}.cloudcoil.io",
        service_name=app.name,
        service_namespace=app.namespace,
        ca_bundle=app.webhook.ca_bundle if ca_bundle is None else ca_bundle,
        service_port=app.webhook.service_port,
        controller_namespaces=controller_namespaces(app.controllers, app.namespace),
    )
