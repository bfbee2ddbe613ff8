"""Controllers: definitions (`Controller`, stages, cases) and the threaded runtime."""

from cloudcoil_sync._internal.logfields import ContextFilter as LogContextFilter
from cloudcoil_sync._internal.tracing import enable as enable_tracing
from cloudcoil_sync.controller._internal.cache import InformerNotSynced
from cloudcoil_sync.controller._internal.causes import Cause
from cloudcoil_sync.controller._internal.changes import Change
from cloudcoil_sync.controller._internal.context import Context, Request
from cloudcoil_sync.controller._internal.daemons import DaemonStop
from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.events import EventRecorder
from cloudcoil_sync.controller._internal.handler_calls import TemporaryError
from cloudcoil_sync.controller._internal.health import HealthServer
from cloudcoil_sync.controller._internal.invalid import InvalidObject
from cloudcoil_sync.controller._internal.leader import LeaderElection, LeadershipLost
from cloudcoil_sync.controller._internal.manager import Manager
from cloudcoil_sync.controller._internal.metrics import ControllerStatus
from cloudcoil_sync.controller._internal.mutations import ensure_finalizer, mutate, remove_finalizer
from cloudcoil_sync.controller._internal.queue import QueueClosed, WorkQueue
from cloudcoil_sync.controller._internal.raw_events import RawEvent
from cloudcoil_sync.controller._internal.stages import Cases, Stage, Stages, StageScope
from cloudcoil_sync.controller._internal.status import (
    ReconcileStatus,
    get_condition,
    set_condition,
    update_status,
)
from cloudcoil_sync.controller._internal.types import ResourceKey, Result, TerminalError, Wait

__all__ = [
    "Cases",
    "Cause",
    "Change",
    "Context",
    "Controller",
    "ControllerStatus",
    "DaemonStop",
    "EventRecorder",
    "HealthServer",
    "InformerNotSynced",
    "InvalidObject",
    "LeaderElection",
    "LeadershipLost",
    "LogContextFilter",
    "Manager",
    "QueueClosed",
    "RawEvent",
    "ReconcileStatus",
    "Request",
    "ResourceKey",
    "Result",
    "Stage",
    "StageScope",
    "Stages",
    "TemporaryError",
    "TerminalError",
    "Wait",
    "WorkQueue",
    "enable_tracing",
    "ensure_finalizer",
    "get_condition",
    "mutate",
    "remove_finalizer",
    "set_condition",
    "update_status",
]
