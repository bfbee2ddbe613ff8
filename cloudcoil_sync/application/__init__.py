"""Applications: one definition that generates manifests, installs and runs an operator."""

from .application import Application
from .lifecycle import LifecycleEvent, LifecycleType
from .script_errors import install_excepthook
from .settings import ConnectionLimits, RBACRule, WebhookServer

install_excepthook()  # definition mistakes in `python op.py ...` end as one line (see module)

__all__ = [
    "Application",
    "ConnectionLimits",
    "LifecycleEvent",
    "LifecycleType",
    "RBACRule",
    "WebhookServer",
]
