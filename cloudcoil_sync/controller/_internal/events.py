"""Kubernetes Events (events.k8s.io/v1), deduplicated and rate limited, best effort.

A repeat of the same (server, namespace, object UID, type, reason, action) within
`interval` seconds is suppressed, whatever its message, unless `by_message=True` (then only a
repeat with the same message is); `interval=0` suppresses no repeat. The memory of recent
keys is an LRU of `max_keys`. A token bucket (burst 20, 5 per second) bounds traffic per recorder.
Delivery has its own timeout and never raises API or transport errors to a reconciler:
`emit` returns False instead (and logs). Invalid reasons, types or actions raise.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from cloudcoil.resources import Resource

from cloudcoil_sync.client import ClientError
from cloudcoil_sync.controller._internal.context import QueuedEvent

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["EVENTS", "EventRecorder", "EventType", "recorder_for"]

EventType = Literal["Normal", "Warning"]
EVENTS = ("events.k8s.io", "v1", "events")
BURST = 20.0
REFILL_PER_SECOND = 5.0
NOTE_LIMIT = 1024
_REASON = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

logger = logging.getLogger("cloudcoil_sync.controller.events")


class EventRecorder:
    """Emit Events about objects on behalf of `reporting_controller`.

    Cluster-scoped objects get their Events in `namespace` (or the Config's namespace).
    The Config is the one passed to `emit`, else the one bound with `bind` (controllers bind
    the operator's Config when they start).
    """

    def __init__(
        self,
        reporting_controller: str = "cloudcoil",
        *,
        interval: float = 60,
        by_message: bool = False,
        max_keys: int = 1024,
        timeout: float = 2,
        namespace: str | None = None,
        config: Config | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not reporting_controller or len(reporting_controller) > 128:
            raise ValueError("reporting_controller must contain 1-128 characters")
        if not (math.isfinite(interval) and interval >= 0):
            raise ValueError("Event interval must be finite and not negative (0: no dedup)")
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("Event timeout must be finite and positive")
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError("max_keys must be a positive integer")
        self.reporting_controller = reporting_controller
        self.interval, self.max_keys = interval, max_keys  # the dedup window and its LRU
        self.by_message = bool(by_message)
        self.timeout = timeout
        self.namespace = namespace
        self.config = config
        self.instance = str(uuid.uuid4())
        self._clock = clock
        self._lock = threading.Lock()
        self._recent: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._tokens = BURST
        self._refilled = clock()

    def bind(self, config: Config) -> None:
        """Use `config` when `emit` is not given one."""
        self.config = config

    def flush(
        self,
        regarding: Resource,
        events: Sequence[QueuedEvent],
        *,
        timeout: float,
        key: object,
    ) -> None:
        """Emit a pass's queued Events in order within `timeout`; the rest are dropped."""
        give_up = time.monotonic() + timeout
        for event in events:
            if time.monotonic() >= give_up:
                logger.warning("Dropping Events for %s: event_flush_timeout reached", key)
                return
            try:
                self.emit(
                    regarding, event.reason, event.message, type=event.type, action=event.action
                )
            except Exception as error:
                logger.warning("Could not record Event %s for %s: %s", event.reason, key, error)

    def emit(
        self,
        resource: Resource | Mapping[str, Any],
        reason: str,
        message: str,
        *,
        type: EventType = "Normal",
        action: str | None = None,
        config: Config | None = None,
    ) -> bool:
        """Post an Event regarding `resource`; True if the API server accepted it.

        False means suppressed (repeat or rate limit), skipped (object without UID) or
        failed (logged). `action` defaults to `reason`.
        """
        if not _REASON.fullmatch(reason or "") or len(reason) > 128:
            raise ValueError("Event reason must be a nonempty identifier of at most 128 characters")
        if type not in ("Normal", "Warning"):
            raise ValueError("Event type must be Normal or Warning")
        action = reason if action is None else action
        if not action or len(action) > 128:
            raise ValueError("Event action must contain 1-128 characters")
        regarding = _reference(resource)
        if regarding is None:
            return False
        config = config or self.config
        if config is None:
            raise RuntimeError("EventRecorder has no Config: pass config= or bind() one")
        namespace = regarding.get("namespace") or self.namespace or config.namespace
        key = (config.server, namespace, regarding["uid"], type, reason, action, *self._by(message))
        if not self._reserve(key):
            return False
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"cloudcoil-{uuid.uuid4().hex}", "namespace": namespace},
            "eventTime": _micro_time(datetime.now(UTC)),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.instance,
            "regarding": regarding,
            "reason": reason,
            "action": action,
            "note": message[:NOTE_LIMIT],
            "type": type,
        }
        try:
            path = config.client(EVENTS).mapping.path(namespace)
            config.transport.request_json("POST", path, body=body, read_timeout=self.timeout)
        except ClientError as error:
            # The reservation stays: a denied or failing API is not hammered with repeats.
            logger.warning(
                "Could not record Event %s for %s/%s: %s",
                reason,
                regarding.get("kind"),
                regarding.get("name"),
                error,
            )
            return False
        return True

    def _by(self, message: str) -> tuple[str, ...]:
        return (message,) if self.by_message else ()

    def _reserve(self, key: tuple[str, ...]) -> bool:
        with self._lock:
            now = self._clock()
            previous = self._recent.get(key)
            # Compare deadlines: a subtraction can round an elapsed interval below it.
            if previous is not None and now < previous + self.interval:
                return False  # never true for interval 0: now >= previous
            self._tokens = min(BURST, self._tokens + (now - self._refilled) * REFILL_PER_SECOND)
            self._refilled = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            self._recent[key] = now
            self._recent.move_to_end(key)
            while len(self._recent) > self.max_keys:
                self._recent.popitem(last=False)
            return True


def _reference(resource: Resource | Mapping[str, Any]) -> dict[str, str] | None:
    """The `regarding` ObjectReference, or None for an object without name or UID."""
    if isinstance(resource, Mapping):
        metadata = resource.get("metadata") or {}
        api_version, kind = resource.get("apiVersion"), resource.get("kind")
        name, namespace, uid = (metadata.get(k) for k in ("name", "namespace", "uid"))
    else:
        meta = resource.metadata
        api_version = getattr(resource, "api_version", None)
        kind = getattr(resource, "kind", None)
        name = meta.name if meta is not None else None
        namespace = meta.namespace if meta is not None else None
        uid = meta.uid if meta is not None else None
    if not name or not uid:
        return None
    reference = {"apiVersion": str(api_version or ""), "kind": str(kind or ""), "name": name}
    reference["uid"] = uid
    if namespace:
        reference["namespace"] = namespace
    return reference


def _micro_time(moment: datetime) -> str:
    """metav1.MicroTime: RFC 3339 with exactly six fractional digits, UTC as Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def recorder_for(
    events: bool | EventRecorder, reporting_controller: str, config: Config
) -> EventRecorder | None:
    """A controller's recorder (its own, or one for `reporting_controller`), bound to `config`
    unless it has one; None when the controller records no Events."""
    if events is False:
        return None
    recorder = events if isinstance(events, EventRecorder) else EventRecorder(reporting_controller)
    if recorder.config is None:
        recorder.bind(config)
    return recorder
