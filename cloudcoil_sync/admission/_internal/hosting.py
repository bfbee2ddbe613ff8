"""An application's webhook host, assembled in one place: the admission app, instrumented,
behind `WebhookHost` (TLS, the operator endpoints) with, for secure metrics, who may read
`/metrics` (`MetricsAccess`). The application reaches the hosting parts through this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudcoil_sync._internal.endpoints import Check
from cloudcoil_sync.admission._internal.metrics import InstrumentedAdmission, WebhookCollectors
from cloudcoil_sync.admission._internal.metrics_access import MetricsAccess
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from cloudcoil_sync.client import Config

__all__ = ["webhook_host"]


def webhook_host(
    admission: AdmissionWebhook,
    settings: Any,
    *,
    config: Config,
    metrics: WebhookCollectors,
    registry: CollectorRegistry,
    healthy: Check,
    ready: Check,
    controllers_ready: Check,
) -> tuple[WebhookHost, MetricsAccess | None]:
    """The host serving `admission` as `settings` (a `WebhookServer`) say, and its metrics
    access (None unless `settings.secure_metrics`; its owner closes it)."""
    access = MetricsAccess(config) if settings.secure_metrics else None
    registry.register(admission.slots)  # per-route saturation
    host = WebhookHost.from_settings(
        InstrumentedAdmission(admission, admission.routes, metrics),
        settings,
        healthy=healthy,
        ready=ready,
        controllers_ready=controllers_ready,
        registry=registry,
        max_request_body_size=admission.max_body_bytes,
        metrics_access=None if access is None else access.decide,
    )
    return host, access
