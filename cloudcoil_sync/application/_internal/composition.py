"""Checks over a whole Application definition, the admission table it serves, and what its
manifests read of its controllers.

Kept apart from `application.py` so the class stays a thin, readable surface. Each function
takes the parts of the definition it needs, never the application.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.endpoints import PATHS
from cloudcoil_sync.admission._internal.conversion import conversion_route
from cloudcoil_sync.admission._internal.decorators import admission_methods
from cloudcoil_sync.admission._internal.route import GVKKey, Route, gvk_key
from cloudcoil_sync.admission._internal.routes import (
    AdmissionRoutes,
    RouteTable,
    webhook_configurations,
)
from cloudcoil_sync.application._internal.rbac import ControllerAccess
from cloudcoil_sync.application._internal.settings import WebhookServer
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.budgets import StopPlan, lease_request_timeout
from cloudcoil_sync.controller._internal.overlap import check_overlap
from cloudcoil_sync.crd import CRD, Versions
from cloudcoil_sync.crd._internal.decorator import resource_options
from cloudcoil_sync.crd._internal.versions import versions_of

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import LeaderElection
    from cloudcoil_sync.controller._internal.health import HealthServer
    from cloudcoil_sync.sharding import Sharding

__all__ = [
    "admission_table",
    "check_definition",
    "collect_crds",
    "configurations",
    "controller_access",
    "controller_namespaces",
    "max_body_bytes",
    "stop_plan",
]


def collect_crds(
    resources: Iterable[type[Resource] | CRD | Versions],
    controllers: Sequence[Controller[Any]],
) -> tuple[CRD, ...]:
    """`resources=` entries plus every `@custom_resource` primary kind, each once; a model
    that is one of a `Versions` brings the multi-version CRD."""
    definitions: dict[type[Resource], CRD] = {}
    for item in resources:
        definition = item if isinstance(item, CRD) else CRD(_kind(item))
        if definition.resource in definitions:
            raise ValueError("A resource cannot be registered twice")
        definitions[definition.resource] = definition
    for controller in controllers:
        versions = versions_of(controller.resource)
        known = {m for crd in definitions.values() for m in _models(crd)}
        if controller.resource in known:
            continue
        if versions is not None:
            definitions[versions.storage.model] = CRD(versions)
        elif resource_options(controller.resource):
            definitions[controller.resource] = CRD(controller.resource)
    _check_names(definitions.values())
    return tuple(definitions.values())


def _kind(item: type[Resource] | Versions) -> type[Resource] | Versions:
    if isinstance(item, type):
        return versions_of(item) or item
    return item


def _models(crd: CRD) -> tuple[type[Resource], ...]:
    return crd.versions.models if crd.versions is not None else (crd.resource,)


def _check_names(crds: Iterable[CRD]) -> None:
    seen: dict[str, CRD] = {}
    for crd in crds:
        other = seen.setdefault(crd.name, crd)
        if other is not crd:
            raise ValueError(
                f"{other.resource.__name__} and {crd.resource.__name__} both define the CRD "
                f"{crd.name}; declare the versions of one kind with "
                "Versions(Version(...), ...) (docs/custom-resources.md, Versions and conversion)"
            )


def admission_table(
    tables: Iterable[dict[str, Route]],
    crds: Iterable[CRD],
    *,
    max_body_bytes: int,
    config: Config | None = None,
) -> AdmissionRoutes:
    """The routes of the app's and its controllers' `tables` and its CRD models, in one table."""
    merged = AdmissionRoutes(config=config, max_body_bytes=max_body_bytes)
    for table in tables:
        twice = sorted(set(merged.routes) & set(table))
        if twice:
            raise ValueError(
                "Admission paths must be unique across included groups: "
                f"{', '.join(twice)} registered twice"
            )
        merged.routes.update(table)
    crds = tuple(crds)
    for crd in crds:
        if crd.versions is not None and crd.versions.multiple:
            route = conversion_route(crd.versions)
            merged.conversions[route.path] = route
    models = [crd.resource for crd in crds if admission_methods(crd.resource)]
    merged.register_models(models, require_config=config is not None)
    shadowed = sorted(set(merged.routes) & set(merged.conversions))
    if shadowed:
        raise ValueError(f"Admission paths conflict with conversion webhooks: {shadowed}")
    shadowed = sorted(set(merged.routes) & PATHS)
    if shadowed:
        raise ValueError(
            "Admission paths conflict with operator health/metrics endpoints: "
            f"{', '.join(shadowed)}"
        )
    return merged


def max_body_bytes(admission: RouteTable | None) -> int:
    """The request body limit of the app's admission webhook (4 MiB without one)."""
    return admission.max_body_bytes if admission is not None else 4 << 20


def check_definition(
    table: AdmissionRoutes,
    *,
    controllers: Sequence[Controller[Any]],
    webhook: WebhookServer | None,
    leader_lifespan: bool,
    leader_election: bool,
    namespace: str,
) -> None:
    """The checks of a completed definition that span its parts (offline)."""
    check_overlap(controllers, namespace)
    if table.routes and webhook is None:
        raise ValueError("Admission routes require webhook=WebhookServer(...)")
    if table.conversions and webhook is None:
        kinds = ", ".join(route.versions.label for route in table.conversions.values())
        raise ValueError(
            f"{kinds}: several versions need their conversion webhook: "
            "pass webhook=WebhookServer(...)"
        )
    if webhook is not None and not table.routes and not table.conversions:
        raise ValueError("A webhook server needs admission routes")
    if not controllers and webhook is None:
        raise ValueError("An application needs controllers or webhooks")
    if leader_lifespan and (not leader_election or not controllers):
        raise ValueError("Leader lifespan requires leader election and controllers")


def controller_namespaces(
    controllers: Iterable[Controller[Any]], operator_namespace: str
) -> dict[GVKKey, set[str | None]]:
    """Primary GVK → namespaces its controllers watch (None: all namespaces)."""
    found: dict[GVKKey, set[str | None]] = {}
    for controller in controllers:
        key = gvk_key(controller.resource)
        found.setdefault(key, set()).add(controller.watched_namespace(operator_namespace))
    return found


def controller_access(controller: Controller[Any], namespace: str) -> ControllerAccess:
    """What RBAC inference needs of one controller of an operator in `namespace`."""
    recorder = controller.events
    return ControllerAccess(
        resource=controller.resource,
        namespace=controller.watched_namespace(namespace),
        owns=tuple((owned.resource, owned.prune) for owned in controller.owned),
        watches=(*(w.resource for w in controller.watches), *controller.dynamic_kinds),
        events=recorder is not False,
        events_namespace=None if isinstance(recorder, bool) else recorder.namespace,
        namespaces=controller.namespaces,
        namespace_selector=controller.namespace_selector,
    )


def stop_plan(
    controllers: Sequence[Controller[Any]],
    *,
    webhook: WebhookServer | None,
    health: HealthServer | None,
    leader_election: LeaderElection | None,
    sharding: Sharding | None,
) -> StopPlan:
    """What the operator's process stops after SIGTERM (`budgets.StopPlan`): the run's
    budgets and the Deployment's grace period both come from it."""
    if leader_election is not None:
        renew: float | None = leader_election.renew_deadline
    else:
        renew = sharding.renew_deadline if sharding is not None else None
    return StopPlan(
        shutdown_timeout=max((float(c.shutdown_timeout) for c in controllers), default=None),
        lease_timeout=None if renew is None or not controllers else lease_request_timeout(renew),
        health=health is not None and bool(controllers),
        webhook=None if webhook is None else float(webhook.shutdown_timeout),
        drain_delay=0.0 if webhook is None else float(webhook.drain_delay),
        sharded=sharding is not None,
    )


def configurations(
    routes: Iterable[Route],
    *,
    name: str,
    namespace: str,
    webhook: WebhookServer,
    controllers: Iterable[Controller[Any]],
    ca_bundle: bytes | None = None,
) -> list[dict[str, Any]]:
    """The Mutating/ValidatingWebhookConfigurations of operator `name` in `namespace`, with
    default namespace selectors from its controllers."""
    return webhook_configurations(
        routes,
        name=f"{name}.{namespace}.cloudcoil.io",
        service_name=name,
        service_namespace=namespace,
        ca_bundle=webhook.ca_bundle if ca_bundle is None else ca_bundle,
        service_port=webhook.service_port,
        controller_namespaces=controller_namespaces(controllers, namespace),
    )
