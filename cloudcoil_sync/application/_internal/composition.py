"""Checks over a whole Application definition, the admission table it serves, and what its
manifests read of its controllers.

Kept apart from `application.py` so the class stays a thin, readable surface. Each function
takes the parts of the definition it needs, never the application.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil.resources import Resource

from cloudcoil_sync.admission._internal.decorators import admission_methods
from cloudcoil_sync.admission._internal.route import GVKKey, Route, gvk_key
from cloudcoil_sync.admission._internal.routes import (
    HEALTH_PATHS,
    AdmissionRoutes,
    RouteTable,
    webhook_configurations,
)
from cloudcoil_sync.application._internal.rbac import ControllerAccess
from cloudcoil_sync.application._internal.settings import WebhookServer
from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.overlap import check_overlap
from cloudcoil_sync.controller._internal.term import WRITE_GRACE
from cloudcoil_sync.crd import CRD
from cloudcoil_sync.crd._internal.decorator import resource_options

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = [
    "admission_table",
    "check_definition",
    "collect_crds",
    "configurations",
    "controller_access",
    "controller_namespaces",
    "drain_bound",
    "lease_release_bound",
    "max_body_bytes",
]


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
    models = [crd.resource for crd in crds if admission_methods(crd.resource)]
    merged.register_models(models, require_config=config is not None)
    shadowed = sorted(set(merged.routes) & HEALTH_PATHS)
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
    if webhook is not None and not table.routes:
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


def drain_bound(controllers: Iterable[Controller[Any]], webhook: WebhookServer | None) -> float:
    """Seconds a SIGTERM drain may take: passes in flight (each controller's bound), then
    the webhook server."""
    passes = max((float(c.shutdown_timeout) for c in controllers), default=0.0)
    hosting = float(webhook.shutdown_timeout) if webhook is not None else 0.0
    return passes + hosting


def write_grace(controllers: Sequence[Controller[Any]]) -> float:
    """Seconds the stop may wait, after the drain, for a write already on the wire
    (`controller.term`'s fence): only an operator with controllers writes."""
    return WRITE_GRACE if controllers else 0.0


def lease_release_bound(renew_deadline: float | None) -> float:
    """Seconds releasing a held Lease may take on stop: two tries of a GET and a PUT, each
    bounded by the elector's request timeout, max(1 s, renew_deadline / 2); 0 without one."""
    if renew_deadline is None:
        return 0.0
    return 4 * max(1.0, renew_deadline / 2)


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
