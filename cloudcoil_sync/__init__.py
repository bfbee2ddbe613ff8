"""cloudcoil_sync: a synchronous, threaded Kubernetes operator framework.

The everyday names are re-exported here; each lives in the module named for its concept.
They are resolved lazily so that `import cloudcoil_sync` (and `manifests`) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cloudcoil_sync._internal.models import defer_model_builds

__version__ = "0.1.0"

defer_model_builds()  # before the user's models import, if they come after us

_EXPORTS = {
    "cloudcoil_sync.application": (
        "Application",
        "LifecycleEvent",
        "LifecycleType",
        "RBACRule",
        "WebhookServer",
    ),
    "cloudcoil_sync.controller": (
        "Cause",
        "Change",
        "Context",
        "Controller",
        "HealthServer",
        "LeaderElection",
        "LeadershipLost",
        "ReconcileStatus",
        "Request",
        "ResourceKey",
        "Result",
        "TerminalError",
        "Wait",
        "enable_tracing",
        "get_condition",
        "set_condition",
        "update_status",
    ),
    "cloudcoil_sync.admission": (
        "AdmissionDenied",
        "AdmissionRequest",
        "AdmissionWebhook",
        "mutating",
        "validating",
    ),
    "cloudcoil_sync.crd": ("CEL", "CRD", "ListType", "PrinterColumn", "custom_resource"),
    "cloudcoil_sync.client": ("Config",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "CEL",
    "CRD",
    "AdmissionDenied",
    "AdmissionRequest",
    "AdmissionWebhook",
    "Application",
    "Cause",
    "Change",
    "Config",
    "Context",
    "Controller",
    "HealthServer",
    "LeaderElection",
    "LeadershipLost",
    "LifecycleEvent",
    "LifecycleType",
    "ListType",
    "PrinterColumn",
    "RBACRule",
    "ReconcileStatus",
    "Request",
    "ResourceKey",
    "Result",
    "TerminalError",
    "Wait",
    "WebhookServer",
    "__version__",
    "custom_resource",
    "enable_tracing",
    "get_condition",
    "mutating",
    "set_condition",
    "update_status",
    "validating",
]

if TYPE_CHECKING:
    from cloudcoil_sync.admission import (
        AdmissionDenied,
        AdmissionRequest,
        AdmissionWebhook,
        mutating,
        validating,
    )
    from cloudcoil_sync.application import (
        Application,
        LifecycleEvent,
        LifecycleType,
        RBACRule,
        WebhookServer,
    )
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import (
        Cause,
        Change,
        Context,
        Controller,
        HealthServer,
        LeaderElection,
        LeadershipLost,
        ReconcileStatus,
        Request,
        ResourceKey,
        Result,
        TerminalError,
        Wait,
        enable_tracing,
        get_condition,
        set_condition,
        update_status,
    )
    from cloudcoil_sync.crd import CEL, CRD, ListType, PrinterColumn, custom_resource


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'cloudcoil_sync' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
