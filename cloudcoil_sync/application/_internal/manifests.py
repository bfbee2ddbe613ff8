"""Offline manifests: CRDs, ServiceAccount, RBAC, Service, Deployment, webhook registrations.

``assemble(definition, ...)`` returns plain dicts in install order (the reference's order and
shape, plus the Deployment's liveness probe, health-server probes and secure defaults). It
reads no kubeconfig, certificate or key file and opens no connection; only certificate blocks
of the CA bundle reach the output, so private keys never appear.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from cloudcoil_sync._internal.names import dns_label
from cloudcoil_sync.application._internal.conversion_config import crd_conversions
from cloudcoil_sync.application._internal.extras import Extras, extra_documents, inject_ca
from cloudcoil_sync.application._internal.options import (
    DEFAULT_LIMITS,
    DEFAULT_REQUESTS,
    ManifestOptions,
    certificates_only,
)
from cloudcoil_sync.application._internal.rbac import ControllerAccess, infer_permissions
from cloudcoil_sync.controller._internal.budgets import StopPlan

if TYPE_CHECKING:
    from cloudcoil.resources import Resource

    from cloudcoil_sync.admission._internal.route import GVKKey, Route
    from cloudcoil_sync.application._internal.settings import RBACRule, WebhookServer
    from cloudcoil_sync.controller._internal.health import HealthServer

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_REQUESTS",
    "INSTALLED_BY",
    "LIVENESS_PROBE",
    "READINESS_PROBE",
    "STARTUP_PROBE",
    "TMP_SIZE_LIMIT",
    "Definition",
    "assemble",
    "certificates_only",
    "installed_by",
]

NAME_LABEL = "app.kubernetes.io/name"
#: The annotation on every generated object: ``<namespace>/<name>`` of the operator. `install`
#: keeps it only on objects it created (or that carry it already) and `uninstall` deletes only
#: objects that carry it: the API server's managedFields cannot tell (an object applied with
#: only its name has none, and an adopted object lists the installer as a manager too).
INSTALLED_BY = "cloudcoil.io/installed-by"
#: The writable /tmp of the read-only root filesystem (node disk otherwise unbounded).
TMP_SIZE_LIMIT = "64Mi"
TLS_MOUNT = "webhook-tls"
#: Up to 120 s to start listening, checked every second.
STARTUP_PROBE = {"periodSeconds": 1, "failureThreshold": 120}
READINESS_PROBE = {"periodSeconds": 5, "timeoutSeconds": 2}
#: Restarted only after 6 failures 10 s apart, each allowed 5 s.
LIVENESS_PROBE = {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6}
#: Stands in for the CA of webhook configurations whose caBundle cert-manager injects.
_CA_INJECTED = b"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"


@dataclass(frozen=True)
class Definition:
    """What manifests, ``install`` and ``uninstall`` need of an Application
    (``Application.definition()`` builds it).

    ``crds`` pairs each CRD's model with its manifest; ``lease`` is (name, namespace or None);
    ``sharding`` the namespace of a sharded operator's shard and ring Leases;
    ``routes`` are the webhook server's admission routes; ``stop`` what the process stops after
    SIGTERM (the Deployment's grace period covers it). ``selector_namespaces``
    maps a primary (group, version, kind) to the namespaces its controllers watch (None: all),
    for default webhook namespace selectors.
    """

    name: str
    namespace: str
    controllers: Sequence[ControllerAccess] = ()
    crds: Sequence[tuple[type[Resource], dict[str, Any]]] = ()
    rules: Sequence[RBACRule] = ()
    lease: tuple[str, str | None] | None = None
    sharding: str | None = None  # the namespace of a sharded operator's Leases
    webhook: WebhookServer | None = None
    routes: Sequence[Route] = ()
    health: HealthServer | None = None
    stop: StopPlan = field(default_factory=StopPlan)
    selector_namespaces: Mapping[GVKKey, Iterable[str | None]] = field(default_factory=dict)


def assemble(
    definition: Definition, options: ManifestOptions | None = None
) -> list[dict[str, Any]]:
    """Manifests of a described definition, in install order, deployed as ``options`` say
    (`ManifestOptions`; cert-manager's extras before the Deployment, the others after it)."""
    options = options or ManifestOptions()
    name = dns_label(definition.name, "Application name")
    namespace = dns_label(definition.namespace, "Application namespace")
    _check_crd_names(definition)
    options.check(definition.webhook)
    webhook = definition.webhook if options.include_webhooks else None
    before, after = _extras(definition, options, webhook)
    documents = _identity_documents(
        definition, name, namespace, webhook, options.ca_bundle, options.extras
    )
    if webhook is not None:
        dns_label(webhook.tls_secret, "TLS Secret name")
        documents.append(service(name, namespace, webhook.service_port))
    documents.extend(before)
    if options.image is not None:
        documents.append(deployment(definition, options, webhook))
    documents.extend(after)
    if webhook is not None:
        if not options.cert_manager:
            documents.extend(_webhook_configurations(definition, webhook, options.ca_bundle))
        else:  # cert-manager's cainjector fills in the CA
            configurations = _webhook_configurations(definition, webhook, _CA_INJECTED)
            documents.extend(inject_ca(c, name, namespace) for c in configurations)
    owner = installed_by(name, namespace)
    return [mark(document, owner) for document in documents]


def _extras(
    definition: Definition, options: ManifestOptions, webhook: WebhookServer | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    health = definition.health
    metrics_port = webhook.port if webhook is not None else health.port if health else None
    return extra_documents(
        options.extras or Extras(),
        name=definition.name,
        namespace=definition.namespace,
        replicas=options.replicas,
        webhook_port=webhook.port if webhook is not None else None,
        tls_secret=webhook.tls_secret if webhook is not None else None,
        metrics_port=metrics_port or None,
        deployment=options.image is not None,
    )


def installed_by(name: str, namespace: str) -> str:
    """The `INSTALLED_BY` annotation's value for operator ``name`` in ``namespace``."""
    return f"{namespace}/{name}"


def mark(document: dict[str, Any], owner: str | None) -> dict[str, Any]:
    """``document`` with the `INSTALLED_BY` annotation set to ``owner`` (None: removed);
    the input is not changed."""
    meta = dict(document["metadata"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != INSTALLED_BY}
    if owner is not None:
        annotations[INSTALLED_BY] = owner
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**document, "metadata": meta}


def _check_crd_names(definition: Definition) -> None:
    crd_names = [manifest["metadata"]["name"] for _, manifest in definition.crds]
    if len(set(crd_names)) != len(crd_names):
        raise ValueError(
            "CRDs must have distinct metadata.name values; multi-version CRDs are not supported"
        )


def _identity_documents(
    definition: Definition,
    name: str,
    namespace: str,
    webhook: WebhookServer | None,
    ca_bundle: bytes | None = None,
    extras: Extras | None = None,
) -> list[dict[str, Any]]:
    """CRDs (multi-version ones calling the conversion webhook, see conversion_config),
    the ServiceAccount and its RBAC (with the metrics reader if metrics are secure)."""
    secure_metrics = webhook is not None and webhook.secure_metrics
    permissions = infer_permissions(
        namespace=namespace,
        controllers=definition.controllers,
        rules=[*definition.rules, *(_metrics_auth_rules() if secure_metrics else ())],
        crds=definition.crds,
        lease=definition.lease,
        shard_leases=definition.sharding,
    )
    documents = [manifest for _, manifest in sorted(definition.crds, key=_crd_name)]
    bundle = webhook.ca_bundle if webhook is not None and ca_bundle is None else ca_bundle
    injected = webhook is None or (extras is not None and extras.cert_manager)
    documents = crd_conversions(
        documents, name, namespace, webhook, None if injected else certificates_only(bundle or b"")
    )
    documents.append(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace)}
    )
    documents.extend(permissions.documents(name=name, namespace=namespace))
    if secure_metrics:
        documents.append(metrics_reader(name, namespace))
    return documents


def _metrics_auth_rules() -> list[RBACRule]:
    """What serving `/metrics` securely needs: creating TokenReviews and SubjectAccessReviews."""
    from cloudcoil.models.kubernetes.authentication.v1 import TokenReview
    from cloudcoil.models.kubernetes.authorization.v1 import SubjectAccessReview

    from cloudcoil_sync.application._internal.settings import RBACRule

    return [RBACRule(TokenReview, ("create",)), RBACRule(SubjectAccessReview, ("create",))]


def metrics_reader(name: str, namespace: str) -> dict[str, Any]:
    """The ClusterRole a scraper (e.g. Prometheus's ServiceAccount) is bound to, to read
    `/metrics` (kubebuilder's `metrics-reader`); not bound to anyone here."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"{name}.{namespace}-metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }


def _crd_name(item: tuple[type[Any], dict[str, Any]]) -> str:
    return str(item[1]["metadata"]["name"])


def _meta(name: str, namespace: str) -> dict[str, str]:
    return {"name": name, "namespace": namespace}


def service(name: str, namespace: str, port: int) -> dict[str, Any]:
    """The Service that fronts the webhook port of every replica."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, namespace),
        "spec": {
            "selector": {NAME_LABEL: name},
            "ports": [{"name": "webhook", "port": port, "targetPort": "webhook"}],
        },
    }


def _reachable(host: str, what: str) -> None:
    # The kubelet probes and the Service connect to the Pod IP, never to its loopback.
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        raise ValueError(
            f"The Deployment cannot reach {what} bound to {host}; "
            f'bind it to all interfaces (host="0.0.0.0") for in-cluster use'
        )


def _probes(port: str, scheme: str) -> dict[str, Any]:
    """Start-up checked every second (Ready about a second after listening, not a default
    10 s period later), readiness every 5 s, liveness lenient: only a replica that stays
    unanswering for a minute is restarted (the kubelet stops liveness once a Pod is deleted,
    so a draining replica is never killed by it)."""

    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": port, "scheme": scheme}}

    return {
        "startupProbe": {**get("/healthz"), **STARTUP_PROBE},
        "readinessProbe": {**get("/readyz"), **READINESS_PROBE},
        "livenessProbe": {**get("/healthz"), **LIVENESS_PROBE},
    }


def _tls_volume(webhook: WebhookServer) -> tuple[dict[str, Any], dict[str, Any]]:
    cert, key = PurePosixPath(webhook.certfile), PurePosixPath(webhook.keyfile)
    if (
        not cert.is_absolute()
        or not key.is_absolute()
        or cert.parent != key.parent
        or cert == key
        or cert.parent == PurePosixPath("/")
        or ".." in cert.parts
        or ".." in key.parts
    ):
        raise ValueError(
            "Deployment TLS files must be distinct absolute paths in the same non-root directory"
        )
    mount = {"name": TLS_MOUNT, "mountPath": str(cert.parent), "readOnly": True}
    items = [{"key": "tls.crt", "path": cert.name}, {"key": "tls.key", "path": key.name}]
    if webhook.client_ca_file is not None:
        ca = PurePosixPath(webhook.client_ca_file)
        if ca.parent != cert.parent or ca.name in (cert.name, key.name):
            raise ValueError(
                "WebhookServer.client_ca_file must be a third file beside certfile and keyfile "
                "(mounted from the TLS Secret's ca.crt key)"
            )
        items.append({"key": "ca.crt", "path": ca.name})
    volume = {"name": TLS_MOUNT, "secret": {"secretName": webhook.tls_secret, "items": items}}
    return mount, volume


def deployment(
    definition: Definition, options: ManifestOptions, webhook: WebhookServer | None
) -> dict[str, Any]:
    """The operator Deployment: one ``operator`` container running ``run``, given as long to
    stop as the process's stop budgets add up to (`budgets.StopPlan.termination_grace`).

    A sharded operator's Pods take their shard identity from their name.

    Probes use the webhook listener (HTTPS) or else a ``HealthServer`` (HTTP). The pod runs
    with ``runAsNonRoot``, so the image must declare a numeric non-root ``USER``.
    """
    name, namespace = definition.name, definition.namespace
    container, volumes = _container(
        options, webhook, definition.health, sharded=definition.sharding is not None
    )
    labels = {NAME_LABEL: name}
    pod_spec: dict[str, Any] = {
        "serviceAccountName": name,
        "terminationGracePeriodSeconds": definition.stop.termination_grace(),
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, namespace),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def _container(
    options: ManifestOptions,
    webhook: WebhookServer | None,
    health: HealthServer | None,
    *,
    sharded: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``operator`` container and the pod volumes it mounts."""
    container: dict[str, Any] = {
        "name": "operator",
        "image": options.image,
        "args": ["run"],
        "env": [
            {
                "name": "CLOUDCOIL_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            }
        ],
    }
    if sharded:
        container["env"].append(
            {
                "name": "CLOUDCOIL_SHARD_IDENTITY",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
            }
        )
    if options.command is not None:
        container["command"] = list(options.command)
    # A read-only root filesystem still needs a writable /tmp (tempfile, libraries).
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}}]
    if webhook is not None:
        _reachable(webhook.host, "the webhook server")
        mount, volume = _tls_volume(webhook)
        container["ports"] = [{"name": "webhook", "containerPort": webhook.port}]
        container.update(_probes("webhook", "HTTPS"))
        mounts.insert(0, mount)
        volumes.insert(0, volume)
    elif health is not None:
        _reachable(health.host, "the health server")
        if not health.port:
            raise ValueError("A Deployment needs a fixed HealthServer port (not 0) for its probes")
        container["ports"] = [{"name": "health", "containerPort": health.port}]
        container.update(_probes("health", "HTTP"))
    resources = options.resources()
    if resources:
        container["resources"] = resources
    container["volumeMounts"] = mounts
    container["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    return container, volumes


def _webhook_configurations(
    definition: Definition, webhook: WebhookServer, ca_bundle: bytes | None
) -> list[dict[str, Any]]:
    from cloudcoil_sync.admission._internal.configurations import webhook_configurations

    bundle = certificates_only(webhook.ca_bundle if ca_bundle is None else ca_bundle)
    return webhook_configurations(
        definition.routes,
        name=f"{definition.name}.{definition.namespace}.cloudcoil.io",
        service_name=definition.name,
        service_namespace=definition.namespace,
        ca_bundle=bundle,
        service_port=webhook.service_port,
        controller_namespaces=definition.selector_namespaces,
    )
