"""Admission webhooks: typed mutating and validating handlers served over HTTPS.

Model-level policies (`@mutating`, `@validating`), the request handlers receive
(`AdmissionRequest`, `UserInfo`, `ClientCertificate`, `Operation`), `AdmissionDenied`, and the WSGI
`AdmissionWebhook` that serves a route table. Everything else (routes, registrations, the
HTTPS server) lives in `_internal` and may change in any release.
"""

from cloudcoil_sync.admission._internal.decorators import Operation, mutating, validating
from cloudcoil_sync.admission._internal.request import (
    AdmissionDenied,
    AdmissionRequest,
    ClientCertificate,
    UserInfo,
)
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

__all__ = [
    "AdmissionDenied",
    "AdmissionRequest",
    "AdmissionWebhook",
    "ClientCertificate",
    "Operation",
    "UserInfo",
    "mutating",
    "validating",
]
