"""Applications: one definition that generates manifests, installs and runs an operator."""

from .application import Application
from .lifecycle import LifecycleEvent, LifecycleType
from .settings import ConnectionLimits, RBACRule, WebhookServer

__all__ = [
    "Application",
    "ConnectionLimits",
    "LifecycleEvent",
    "LifecycleType",
    "RBACRule",
    "WebhookServer",
]
