"""Objects the user's model rejects: a typed outcome instead of a pydantic traceback.

Informer stores keep what the API server sent; a model is built only when a handler, a
mapper or a cached read needs one. An object stored without the operator's webhooks, by an
older version, or under a looser CRD schema may not fit the model. Building it raises
`InvalidObject` (a `ValueError` naming the kind, namespace, name and failing field paths),
never `pydantic.ValidationError`, and the runtime treats it as the object's state, not as a
crash: the pass reports `Ready=False`/`InvalidObject` on the object (a raw JSON patch of
`status.conditions`, since no model can be built), a Warning Event and one log line, and
looks again only when the object changes; mappers and `cached().list()` skip it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cloudcoil_sync.client._internal.invalid import InvalidObject, build, identify

__all__ = [
    "INVALID_REASON",
    "READS",
    "TIMED_OUT",
    "InvalidObject",
    "InvalidReports",
    "Marks",
    "build",
    "condition_patch",
    "identify",
    "invalid_message",
    "mark",
    "timeout_message",
]

JSON = dict[str, Any]

INVALID_REASON = "InvalidObject"
TIMED_OUT = "ReconcileTimedOut"
_REMEMBERED = 4096

logger = logging.getLogger("cloudcoil_sync.controller.invalid")


class InvalidReports:
    """Says each object's rejection once: again only when its failing fields change."""

    def __init__(self, log: logging.Logger | None = None) -> None:
        self._log = log or logger
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[tuple[str, str], ...]]
        self._seen = OrderedDict()

    def first(self, error: InvalidObject, where: str) -> bool:
        """True the first time this object fails this way here."""
        key = (where, error.kind, error.namespace or "", error.name)
        with self._lock:
            if self._seen.get(key) == error.problems:
                return False
            self._seen[key] = error.problems
            self._seen.move_to_end(key)
            while len(self._seen) > _REMEMBERED:
                self._seen.popitem(last=False)
            return True

    def forget(self, kind: str, namespace: str | None, name: str) -> None:
        """The object fits again (or is gone): a later rejection is news."""
        with self._lock:
            if not self._seen:  # the common case: no listcomp call (once per pass)
                return
            for key in [k for k in self._seen if k[1:] == (kind, namespace or "", name)]:
                del self._seen[key]

    def report(self, error: InvalidObject, where: str, consequence: str) -> bool:
        """Log one WARNING line naming the object and its fields, once per failure."""
        if not self.first(error, where):
            return False
        self._log.warning("%s: %s; %s", where, error, consequence)
        return True


#: Reports of reads that have no controller of their own (cached lists, children).
READS = InvalidReports()


def condition_patch(
    raw: Mapping[str, Any], condition: str, status: str, reason: str, message: str
) -> list[JSON] | None:
    """JSON patch operations setting one condition in `raw`'s status (None: already so).

    Built from the raw object, never its model: it serves objects no model can be built
    from. The other conditions and status fields are kept; `lastTransitionTime` changes
    only with the status value. Guarded by the object's resourceVersion.
    """
    metadata = raw.get("metadata") or {}
    current = raw.get("status")
    existing = current.get("conditions") if isinstance(current, Mapping) else None
    conditions = (
        [c for c in existing if isinstance(c, Mapping)] if isinstance(existing, list) else []
    )
    generation = metadata.get("generation")
    previous = next((c for c in conditions if c.get("type") == condition), None)
    if (
        previous is not None
        and previous.get("status") == status
        and previous.get("reason") == reason
        and previous.get("message") == message
        and previous.get("observedGeneration") == generation
    ):
        return None
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if previous is not None and previous.get("status") == status:
        stamp = previous.get("lastTransitionTime") or stamp
    entry: JSON = {"type": condition, "status": status, "reason": reason, "message": message}
    entry["lastTransitionTime"] = stamp
    if generation is not None:
        entry["observedGeneration"] = generation
    index = next((i for i, c in enumerate(conditions) if c.get("type") == condition), None)
    updated = [dict(c) for c in conditions]
    if index is None:
        updated.append(entry)
    else:
        updated[index] = entry
    guard: JSON = {"op": "test", "path": "/metadata/resourceVersion"}
    guard["value"] = metadata.get("resourceVersion")
    if not isinstance(current, Mapping):
        return [guard, {"op": "add", "path": "/status", "value": {"conditions": updated}}]
    return [guard, {"op": "add", "path": "/status/conditions", "value": updated}]


def mark(
    client: Any,
    recorder: Any,
    raw: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    conditions: bool,
) -> None:
    """Put `Ready=False`/`reason` on `raw`'s status (with `conditions`) and a Warning Event.

    `client` is the kind's `ResourceClient`; the status patch goes to `/status` when the
    kind has that subresource. API errors of the patch propagate (the caller retries);
    the Event is best effort.
    """
    metadata = raw.get("metadata") or {}
    if conditions:
        operations = condition_patch(raw, "Ready", "False", reason, message)
        if operations is not None:
            subresource = "status" if "status" in client.mapping.subresources else None
            client.raw.json_patch(
                metadata.get("name"),
                operations,
                namespace=metadata.get("namespace"),
                subresource=subresource,
            )
    if recorder is not None:
        recorder.emit(raw, reason, message, type="Warning")


def invalid_message(model: str, error: InvalidObject) -> str:
    """The condition and Event message of an object that does not fit `model`."""
    return (
        f"The object does not fit the operator's {model} model: {error.summary}. "
        "Fix these fields; it is reconciled again when it changes"
    )


def timeout_message(limit: float) -> str:
    """The condition and Event message of a pass abandoned at reconcile_timeout."""
    return (
        f"The reconcile pass outlived reconcile_timeout ({limit:g}s) and was abandoned; "
        "retrying with backoff"
    )


class Marks:
    """What a controller says on objects it cannot reconcile: `Ready=False` with a reason
    (when it reports status), a Warning Event, and (rejected objects) one log line; through
    its primary kind's `client` and its Event `recorder` (None: no Events)."""

    def __init__(
        self, client: Any, recorder: Any, controller: Any, where: str, log: logging.Logger
    ) -> None:
        self.client = client
        self.recorder = recorder
        self._model = controller.resource.__name__
        self._conditions = bool(controller.report_status)
        self._where = where
        self.reports = InvalidReports(log)

    def invalid(self, raw: Mapping[str, Any], error: InvalidObject) -> None:
        self.reports.report(error, self._where, "not reconciled until it changes")
        message = invalid_message(self._model, error)
        mark(self.client, self.recorder, raw, INVALID_REASON, message, conditions=self._conditions)

    def timed_out(self, raw: Mapping[str, Any], limit: float) -> None:
        message = timeout_message(limit)
        mark(self.client, self.recorder, raw, TIMED_OUT, message, conditions=self._conditions)
