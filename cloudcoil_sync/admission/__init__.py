"""Admission webhooks: typed mutating and validating handlers served over HTTPS.

Routes and their Kubernetes registrations live in `routes`; model-level policies
(`@mutating`, `@validating`) in `decorators`; the WSGI `AdmissionWebhook` (in
`webhook`) serves a route table. HTTPS hosting (`server`, which imports waitress)
is imported only by the runtime, never from here.
"""

from .decorators import Operation, mutating, validating
from .request import AdmissionDenied, AdmissionRequest, UserInfo
from .routes import AdmissionRoutes, Route, webhook_configurations
from .webhook import AdmissionWebhook

__all__ = [
    "AdmissionDenied",
    "AdmissionRequest",
    "AdmissionRoutes",
    "AdmissionWebhook",
    "Operation",
    "Route",
    "UserInfo",
    "mutating",
    "validating",
    "webhook_configurations",
]
