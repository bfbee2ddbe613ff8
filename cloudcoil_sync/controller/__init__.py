"""Controllers: definitions (`Controller`, stages, cases) and the threaded runtime."""

from cloudcoil_sync.controller.context import Context, Request
from cloudcoil_sync.controller.definition import Controller
from cloudcoil_sync.controller.events import EventRecorder
from cloudcoil_sync.controller.health import HealthServer
from cloudcoil_sync.controller.leader import LeaderElection, LeadershipLost
from cloudcoil_sync.controller.manager import Manager
from cloudcoil_sync.controller.metrics import ControllerStatus
from cloudcoil_sync.controller.mutations import ensure_finalizer, mutate, remove_finalizer
from cloudcoil_sync.controller.queue import QueueClosed, WorkQueue
from cloudcoil_sync.controller.stages import Cases, Stage, Stages, StageScope
from cloudcoil_sync.controller.status import (
    ReconcileStatus,
    get_condition,
    set_condition,
    update_status,
)
from cloudcoil_sync.controller.types import ResourceKey, Result, TerminalError, Wait

__all__ = [
    "Cases",
    "Context",
    "Controller",
    "ControllerStatus",
    "EventRecorder",
    "HealthServer",
    "LeaderElection",
    "LeadershipLost",
    "Manager",
    "QueueClosed",
    "ReconcileStatus",
    "Request",
    "ResourceKey",
    "Result",
    "Stage",
    "StageScope",
    "Stages",
    "TerminalError",
    "Wait",
    "WorkQueue",
    "ensure_finalizer",
    "get_condition",
    "mutate",
    "remove_finalizer",
    "set_condition",
    "update_status",
]
