"""Applications: one definition that generates manifests, installs and runs an operator."""

from cloudcoil_sync.application._internal.application import Application
from cloudcoil_sync.application._internal.cli import build_cli
from cloudcoil_sync.application._internal.extras import Extras, NetworkPolicyOptions
from cloudcoil_sync.application._internal.lifecycle import LifecycleEvent, LifecycleType
from cloudcoil_sync.application._internal.settings import ConnectionLimits, RBACRule, WebhookServer

__all__ = [
    "Application",
    "ConnectionLimits",
    "Extras",
    "LifecycleEvent",
    "LifecycleType",
    "NetworkPolicyOptions",
    "RBACRule",
    "WebhookServer",
    "build_cli",
]
