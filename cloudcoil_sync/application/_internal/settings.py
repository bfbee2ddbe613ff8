"""Settings an Application is built from: extra RBAC grants and webhook hosting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.names import dns_label
from cloudcoil_sync._internal.numbers import is_number
from cloudcoil_sync.admission._internal.limits import ConnectionLimits

__all__ = ["ConnectionLimits", "RBACRule", "WebhookServer"]

Scope = Literal["Namespaced", "Cluster"]


@dataclass(frozen=True)
class RBACRule:
    """Extra access for API calls made by handlers, which cannot be inferred.

    Namespaced grants default to the operator namespace; `namespace=` names another
    and `all_namespaces=True` grants cluster-wide. `subresources` grants those
    endpoints instead of the main one; `resource_names` restricts by object name.
    `plural`/`scope` describe kinds the offline REST table does not know.
    """

    resource: type[Resource]
    verbs: tuple[str, ...]
    plural: str | None = None
    scope: Scope | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    subresources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.resource, type) or not issubclass(self.resource, Resource):
            raise TypeError(f"RBACRule.resource must be a Resource class, got {self.resource!r}")
        for name in ("verbs", "subresources", "resource_names"):
            values = getattr(self, name)
            if isinstance(values, str | bytes) or any(
                not isinstance(value, str) or not value for value in values
            ):
                raise ValueError(f"RBACRule.{name} must contain nonempty strings, got {values!r}")
            object.__setattr__(self, name, tuple(sorted(set(values))))
        if not self.verbs:
            raise ValueError("RBACRule.verbs must not be empty")
        if self.plural is not None:
            dns_label(self.plural, "Resource plural")
        if self.scope not in (None, "Namespaced", "Cluster"):
            raise ValueError(f"RBACRule.scope must be Namespaced or Cluster, got {self.scope!r}")
        if self.namespace is not None:
            dns_label(self.namespace, "RBAC namespace")
        if self.namespace is not None and self.all_namespaces:
            raise ValueError("RBACRule.namespace and all_namespaces are mutually exclusive")
        if self.scope == "Cluster" and self.namespace is not None:
            raise ValueError("Cluster resources cannot have a namespaced RBACRule")
        if self.resource_names and set(self.verbs) & {"create", "deletecollection"}:
            raise ValueError("Kubernetes cannot restrict create/deletecollection by resource_names")
        for subresource in self.subresources:
            dns_label(subresource, "Subresource")


@dataclass(frozen=True)
class WebhookServer:
    """HTTPS hosting of admission (and health/metrics) on every replica.

    The certificate (mounted from Secret `tls_secret`) must cover
    `<app name>.<namespace>.svc`. `ca_bundle` holds public PEM certificates only,
    for the webhook configurations; private keys never enter manifests. `limits`
    (`ConnectionLimits`) bound what any one client can hold of the listener: connections
    per address and in all, handshake, header, body-rate and keep-alive deadlines.
    `secure_metrics` serves `/metrics` only to bearer tokens the API server authenticates
    and authorizes for `get` on it (TokenReview + SubjectAccessReview, cached; the
    generated RBAC grants both reviews and a `<name>.<namespace>-metrics-reader` ClusterRole).
    `client_ca_file` (controller-runtime's ClientCAName) verifies the API server's calls: a
    client certificate that does not chain to those CAs fails the handshake and admission
    paths need one that does (403); probes and `/metrics` do not. It must sit beside
    `certfile`: the Deployment mounts it from the Secret's `ca.crt` key.
    `drain_delay` (seconds, 0 turns it off): from SIGTERM on, the server keeps serving but
    answers `Connection: close` (and `/readyz` 503), and it stops listening only once the
    rest of the stop is done and this long has passed since SIGTERM, so the API server,
    whose Endpoints learn of a terminating Pod late, reaches another replica instead of a
    closed port or a pooled connection we close. It applies once a client outside loopback
    (a Service's caller) has connected; `shutdown_timeout` follows it.
    """

    ca_bundle: bytes = b""
    tls_secret: str = "operator-tls"
    certfile: str = "/var/run/cloudcoil/tls/tls.crt"
    keyfile: str = "/var/run/cloudcoil/tls/tls.key"
    host: str = "0.0.0.0"
    port: int = 9443
    service_port: int = 443
    startup_timeout: float = 30
    shutdown_timeout: float = 10
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    secure_metrics: bool = True
    client_ca_file: str | None = None
    drain_delay: float = 5

    def __post_init__(self) -> None:
        for port in (self.port, self.service_port):
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
                raise ValueError(
                    f"Webhook ports must be integers between 1 and 65535, got {port!r}"
                )
        for timeout in (self.startup_timeout, self.shutdown_timeout):
            if not (is_number(timeout) and timeout > 0):
                raise ValueError(f"Webhook timeouts must be finite and positive, got {timeout!r}")
        if not (is_number(self.drain_delay) and self.drain_delay >= 0):
            raise ValueError(
                f"WebhookServer.drain_delay must be a finite number of seconds >= 0, "
                f"got {self.drain_delay!r}"
            )
        if not isinstance(self.secure_metrics, bool):
            raise TypeError("WebhookServer.secure_metrics must be True or False")
        if not isinstance(self.limits, ConnectionLimits):
            raise TypeError("WebhookServer.limits must be a ConnectionLimits")
        if not isinstance(self.ca_bundle, bytes):
            raise TypeError("WebhookServer.ca_bundle must be PEM bytes")
        if self.client_ca_file is not None and (
            not isinstance(self.client_ca_file, str) or not self.client_ca_file
        ):
            raise TypeError("WebhookServer.client_ca_file must be a file path or None")
