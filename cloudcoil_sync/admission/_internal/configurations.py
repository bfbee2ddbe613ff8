"""Mutating/ValidatingWebhookConfiguration documents for a set of admission routes."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from copy import deepcopy
from typing import TYPE_CHECKING, Any

from cloudcoil_sync._internal.names import is_dns_label, is_dns_subdomain

if TYPE_CHECKING:
    from cloudcoil_sync.admission._internal.route import GVKKey, Route

__all__ = ["namespace_selector", "webhook_configurations"]


def namespace_selector(namespaces: Iterable[str]) -> dict[str, Any]:
    return {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": sorted(set(namespaces)),
            }
        ]
    }


def webhook_configurations(
    routes: Iterable[Route],
    *,
    name: str,
    service_name: str,
    service_namespace: str,
    ca_bundle: bytes,
    service_port: int = 443,
    controller_namespaces: Mapping[GVKKey, Iterable[str | None]] | None = None,
) -> list[dict[str, Any]]:
    """Mutating then Validating webhook configurations (each only when it has routes).

    `ca_bundle` is PEM bytes (base64-encoded here). Webhook names are
    `{mutate|validate}-{i}.{name}` with `i` counting all routes in order.
    With `controller_namespaces` (primary GVK → watched namespaces, None meaning all
    namespaces), a Namespaced route without an explicit selector gets the default
    namespaceSelector: the namespaces of controllers of its target kind, else the
    operator namespace (`service_namespace`); none when any such controller watches
    all namespaces. Cluster and "*" routes never get a default selector.
    """
    _check_registration(name, service_name, service_namespace, ca_bundle, service_port)
    routes = list(routes)
    encoded = base64.b64encode(ca_bundle).decode("ascii")
    documents: list[dict[str, Any]] = []
    for mutation, kind in (
        (True, "MutatingWebhookConfiguration"),
        (False, "ValidatingWebhookConfiguration"),
    ):
        webhooks = [
            _webhook(
                route,
                index,
                name=name,
                service=(service_name, service_namespace, service_port),
                ca=encoded,
                controller_namespaces=controller_namespaces,
            )
            for index, route in enumerate(routes)
            if route.mutation == mutation
        ]
        if webhooks:
            documents.append(
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": kind,
                    "metadata": {"name": name},
                    "webhooks": webhooks,
                }
            )
    return documents


def _check_registration(
    name: str, service_name: str, service_namespace: str, ca_bundle: bytes, service_port: int
) -> None:
    _require(is_dns_subdomain(name), "subdomain", name)
    _require(is_dns_label(service_name), "label", service_name)
    _require(is_dns_label(service_namespace), "label", service_namespace)
    if name.endswith(".static.k8s.io"):
        raise ValueError("The .static.k8s.io suffix is reserved by Kubernetes")
    if not isinstance(ca_bundle, bytes) or b"-----BEGIN CERTIFICATE-----" not in ca_bundle:
        raise ValueError("ca_bundle must contain PEM certificate bytes")
    if (
        isinstance(service_port, bool)
        or not isinstance(service_port, int)
        or not 1 <= service_port <= 65535
    ):
        raise ValueError("service_port must be an integer between 1 and 65535")


def _default_selector(
    route: Route,
    operator_namespace: str,
    controller_namespaces: Mapping[GVKKey, Iterable[str | None]] | None,
) -> dict[str, Any] | None:
    if route.namespace_selector is not None:
        return deepcopy(route.namespace_selector)
    if controller_namespaces is None or route.scope != "Namespaced":
        return None
    targets = set(controller_namespaces.get(route.target_gvk, ())) or {operator_namespace}
    if None in targets:
        return None
    return namespace_selector(target for target in targets if target is not None)


def _require(valid: bool, rule: str, value: object) -> None:
    if not valid:
        raise ValueError(f"Invalid DNS {rule}: {value!r}")


def _webhook(
    route: Route,
    index: int,
    *,
    name: str,
    service: tuple[str, str, int],
    ca: str,
    controller_namespaces: Mapping[GVKKey, Iterable[str | None]] | None,
) -> dict[str, Any]:
    webhook_name = f"{route.kind}-{index}.{name}"
    _require(is_dns_subdomain(webhook_name), "subdomain", webhook_name)
    if webhook_name.count(".") < 2:
        raise ValueError("name must include a domain, such as widgets.example.com")
    group, version, _ = route.target_gvk
    service_name, service_namespace, service_port = service
    webhook: dict[str, Any] = {
        "name": webhook_name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": route.failure_policy,
        "matchPolicy": "Exact",
        "timeoutSeconds": route.timeout_seconds,
        "clientConfig": {
            "service": {
                "name": service_name,
                "namespace": service_namespace,
                "path": route.path,
                "port": service_port,
            },
            "caBundle": ca,
        },
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": [version],
                "resources": [route.endpoint],
                "operations": list(route.operations),
                "scope": route.scope,
            }
        ],
    }
    selector = _default_selector(route, service_namespace, controller_namespaces)
    if selector is not None:
        webhook["namespaceSelector"] = selector
    if route.object_selector is not None:
        webhook["objectSelector"] = deepcopy(route.object_selector)
    if route.mutation:
        webhook["reinvocationPolicy"] = "Never"
    return webhook
