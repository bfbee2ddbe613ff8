"""Admission webhooks: typed mutating and validating handlers served over HTTPS.

Routes and their Kubernetes registrations live in `routes`; model-level policies
(`@mutating`, `@validating`) in `decorators`. The WSGI `AdmissionWebhook` serves a
route table.
"""

from .decorators import Operation, mutating, validating
from .routes import AdmissionRoutes, Route, webhook_configurations

__all__ = [
    "AdmissionRoutes",
    "Operation",
    "Route",
    "mutating",
    "validating",
    "webhook_configurations",
]
