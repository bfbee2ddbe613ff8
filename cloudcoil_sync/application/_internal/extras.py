"""Optional objects beyond the reference's manifests, each off by default and generated offline.

- a PodDisruptionBudget (``maxUnavailable: 1``) for two or more replicas, so a node drain
  never takes every replica (and admission) at once;
- a NetworkPolicy admitting the webhook port from the API server's address ranges and the
  metrics port from a named namespace (the kubelet's probes come from the node itself);
- cert-manager: a self-signed ``Issuer`` and a ``Certificate`` whose Secret is the webhook's
  TLS Secret, and the ``cert-manager.io/inject-ca-from`` annotation on the webhook
  configurations instead of a ``caBundle`` (cert-manager's cainjector fills it in), as
  kubebuilder projects wire it.

Plain dicts: no cert-manager models are needed to write them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync._internal.names import dns_label

__all__ = [
    "CERT_MANAGER_API",
    "INJECT_CA",
    "Extras",
    "NetworkPolicyOptions",
    "extra_documents",
    "inject_ca",
    "removal_identities",
]

CERT_MANAGER_API = "cert-manager.io/v1"
INJECT_CA = "cert-manager.io/inject-ca-from"
NAME_LABEL = "app.kubernetes.io/name"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class NetworkPolicyOptions:
    """Who may connect: ``api_server_cidrs`` to the webhook port (required with webhooks),
    ``metrics_namespace``'s Pods to the metrics port (none if None)."""

    api_server_cidrs: Sequence[str] = ()
    metrics_namespace: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.api_server_cidrs, str):
            raise ValueError("api_server_cidrs must be a sequence of CIDRs, not one string")
        for cidr in self.api_server_cidrs:
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                raise ValueError(f"API server range {cidr!r} is not a CIDR: {exc}") from None
        if self.metrics_namespace is not None:
            dns_label(self.metrics_namespace, "metrics namespace")


@dataclass(frozen=True)
class Extras:
    """Which optional objects to generate (all off by default)."""

    pod_disruption_budget: bool = False
    network_policy: NetworkPolicyOptions | None = None
    cert_manager: bool = False

    @property
    def any(self) -> bool:
        return self.pod_disruption_budget or self.network_policy is not None or self.cert_manager


def extra_documents(
    extras: Extras,
    *,
    name: str,
    namespace: str,
    replicas: int,
    webhook_port: int | None,
    tls_secret: str | None,
    metrics_port: int | None,
    deployment: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(before the Deployment, after it): cert-manager's Issuer and Certificate first (the
    Pod mounts the Secret they make), then the PodDisruptionBudget and NetworkPolicy."""
    before: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    if extras.cert_manager:
        if tls_secret is None:
            raise ValueError("cert-manager issues the webhook's certificate: it needs a webhook")
        before.extend(certificate_documents(name, namespace, tls_secret))
    if extras.pod_disruption_budget:
        if not deployment or replicas < 2:
            raise ValueError(
                "A PodDisruptionBudget needs a Deployment of 2 or more replicas "
                "(with 1, maxUnavailable: 1 protects nothing and minAvailable: 1 blocks drains)"
            )
        after.append(pod_disruption_budget(name, namespace))
    if extras.network_policy is not None:
        policy = network_policy(name, namespace, extras.network_policy, webhook_port, metrics_port)
        after.append(policy)
    return before, after


def _meta(name: str, namespace: str) -> dict[str, str]:
    return {"name": name, "namespace": namespace}


def pod_disruption_budget(name: str, namespace: str) -> dict[str, Any]:
    """At most one replica voluntarily evicted at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(name, namespace),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {NAME_LABEL: name}}},
    }


def network_policy(
    name: str,
    namespace: str,
    options: NetworkPolicyOptions,
    webhook_port: int | None,
    metrics_port: int | None,
) -> dict[str, Any]:
    """Ingress to the operator's Pods: the webhook port from the API server's ranges, the
    metrics port from ``metrics_namespace``; nothing else (egress is not restricted: the
    operator talks to the API server)."""
    rules: list[dict[str, Any]] = []
    if webhook_port is not None:
        if not options.api_server_cidrs:
            raise ValueError(
                "The NetworkPolicy admits admission requests from the API server: "
                "give its address ranges (--api-server-cidr)"
            )
        rules.append(
            {
                "from": [{"ipBlock": {"cidr": cidr}} for cidr in options.api_server_cidrs],
                "ports": [{"protocol": "TCP", "port": webhook_port}],
            }
        )
    if options.metrics_namespace is not None:
        if metrics_port is None:
            raise ValueError("--metrics-namespace needs a metrics port (a webhook or HealthServer)")
        selector = {"matchLabels": {NAMESPACE_LABEL: options.metrics_namespace}}
        rules.append(
            {
                "from": [{"namespaceSelector": selector}],
                "ports": [{"protocol": "TCP", "port": metrics_port}],
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(name, namespace),
        "spec": {
            "podSelector": {"matchLabels": {NAME_LABEL: name}},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }


def issuer_name(name: str) -> str:
    return f"{name}-selfsigned"


def certificate_name(name: str) -> str:
    return f"{name}-serving-cert"


def certificate_documents(name: str, namespace: str, tls_secret: str) -> list[dict[str, Any]]:
    """A self-signed Issuer and the serving Certificate for ``<name>.<namespace>.svc``,
    stored in ``tls_secret`` (kubebuilder's ``config/certmanager``)."""
    service = f"{name}.{namespace}.svc"
    return [
        {
            "apiVersion": CERT_MANAGER_API,
            "kind": "Issuer",
            "metadata": _meta(issuer_name(name), namespace),
            "spec": {"selfSigned": {}},
        },
        {
            "apiVersion": CERT_MANAGER_API,
            "kind": "Certificate",
            "metadata": _meta(certificate_name(name), namespace),
            "spec": {
                "dnsNames": [service, f"{service}.cluster.local"],
                "issuerRef": {"kind": "Issuer", "name": issuer_name(name)},
                "secretName": tls_secret,
            },
        },
    ]


def inject_ca(configuration: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    """A webhook configuration whose CA cert-manager's cainjector fills in: the annotation
    instead of a ``caBundle`` (the input is not changed)."""
    meta = dict(configuration["metadata"])
    annotations = dict(meta.get("annotations") or {})
    annotations[INJECT_CA] = f"{namespace}/{certificate_name(name)}"
    meta["annotations"] = annotations
    webhooks = []
    for webhook in configuration.get("webhooks") or []:
        client = {k: v for k, v in webhook["clientConfig"].items() if k != "caBundle"}
        webhooks.append({**webhook, "clientConfig": client})
    return {**configuration, "metadata": meta, "webhooks": webhooks}


def removal_identities(name: str, namespace: str) -> list[dict[str, Any]]:
    """Every optional object `install` may have created, by identity only (uninstall tries
    each; an absent one, or one of a kind the cluster does not serve, is skipped quietly)."""
    identities = [
        ("policy/v1", "PodDisruptionBudget", name),
        ("networking.k8s.io/v1", "NetworkPolicy", name),
        (CERT_MANAGER_API, "Certificate", certificate_name(name)),
        (CERT_MANAGER_API, "Issuer", issuer_name(name)),
    ]
    return [
        {"apiVersion": api, "kind": kind, "metadata": _meta(object_name, namespace)}
        for api, kind, object_name in identities
    ]
