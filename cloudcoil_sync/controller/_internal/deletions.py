"""Deletion notices without a finalizer (`@controller.deleted()`).

When the primary informer sees an object go (a DELETED event, or its absence from a
relist), the controller's `deleted` handler is called with the last object the cache knew,
as a model, on the notices thread (one per controller: notices run one at a time, in order).

At most once, as kopf's optional `on.delete` and controller-runtime's NotFound pass: a
notice is lost if the operator is down or not the leader when the object goes (no
finalizer holds the object for it), if the handler raises (logged, not retried), if more
than `capacity` notices wait, or if the operator stops before it runs. Work that must
happen belongs in a finalizer (`controller.finalize`); both may be declared: the notice
then comes once the finalizer is removed and the object is gone.

Notices are leader work: they run only while the controller's workers run and its term
admits passes, their writes go through a fence under the term's (refused once leadership
is lost or the operator stops), and a sharded replica only sees its own share's objects.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name
from cloudcoil_sync._internal.service import joined
from cloudcoil_sync.client import fenced
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.invalid import InvalidObject, build
from cloudcoil_sync.controller._internal.term import Term

__all__ = ["DeletionNotices"]

JSON = dict[str, Any]
DEFAULT_CAPACITY = 10_000


class DeletionNotices:
    """The `deleted` handler of one controller, on its own thread."""

    def __init__(
        self,
        resource: type[Resource],
        handler: Callable[[Any], Any],
        *,
        term: Term,
        log: logging.Logger,
        name: str,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self._resource, self._handler, self._term = resource, handler, term
        self._log, self._name, self._capacity = log, name, capacity
        self._label = function_name(handler)
        self._cond = threading.Condition()
        self._pending: collections.deque[JSON] = collections.deque()
        self._running = self._stopping = False
        self._thread: threading.Thread | None = None
        self.delivered = self.dropped = 0

    def deleted(self, obj: JSON) -> None:
        """The informer's on_delete handler: queue a notice (quick, never blocks)."""
        with self._cond:
            if not self._running or self._stopping or len(self._pending) >= self._capacity:
                self.dropped += 1
                return
            self._pending.append(obj)
            self._cond.notify()

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._running = True
            self._thread = threading.Thread(
                target=self._run, name=f"deleted-{self._name}", daemon=True
            )
        self._thread.start()

    def stop(self, timeout: float | None) -> bool:
        """Drop the notices not yet started; wait for the one running (within timeout)."""
        with self._cond:
            self._stopping = True
            self.dropped += len(self._pending)
            self._pending.clear()
            self._cond.notify_all()
            thread = self._thread
        return thread is None or joined(thread, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._stopping)
                if self._stopping:
                    return
                obj = self._pending.popleft()
            self._notify(obj)

    def _notify(self, obj: JSON) -> None:
        if not self._term.admits():
            self.dropped += 1
            return
        where = _describe(obj, self._resource)
        try:
            model = build(self._resource, obj)
        except InvalidObject as error:
            self.dropped += 1
            self._log.warning("Deleted %s does not fit the model (%s); no notice", where, error)
            return
        fence = WriteFence(reason="the deletion notice outlived the term", parent=self._term.fence)
        try:
            with fenced(fence):
                self._handler(model)
            self.delivered += 1
        except Exception as error:
            self._log.error(
                "Deletion handler %s raised for %s; not retried (notices are at most once)",
                self._label,
                where,
                exc_info=error,
            )


def _describe(obj: JSON, resource: type[Resource]) -> str:
    metadata = obj.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    return f"{resource.__name__} {namespace}/{name}" if namespace else f"{resource.__name__} {name}"
