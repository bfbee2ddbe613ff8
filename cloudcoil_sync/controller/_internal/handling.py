"""`PassHandler`: the definition's side of one pass, called by the `Reconciler`.

The handler is the `Reconciler`'s strategy (it is handed down, never reached up to): the
term check at the moment a pass starts, a sharded replica's drain, the per-pass `Request`
(its original is the reconciler's untouched snapshot: the object is parsed once per pass,
and once more for the handler's own copy), finalizers, the controller's handlers, staged
status, pruning. Its hooks say failures on the object (`failed`, `invalid`, `abandoned`)
and flush the pass's Events once it settled.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from cloudcoil.resources import Resource

from cloudcoil_sync.controller._internal import invalid as rejects
from cloudcoil_sync.controller._internal.children import prune_children
from cloudcoil_sync.controller._internal.context import PassServices, Request
from cloudcoil_sync.controller._internal.events import EventRecorder
from cloudcoil_sync.controller._internal.finalizers import Step, finalizer_step
from cloudcoil_sync.controller._internal.logcontext import current
from cloudcoil_sync.controller._internal.outcome import PassTimedOut
from cloudcoil_sync.controller._internal.reporting import report_failure
from cloudcoil_sync.controller._internal.store import decode
from cloudcoil_sync.controller._internal.term import Term
from cloudcoil_sync.controller._internal.types import ResourceKey, Result, Wait, interpret

if TYPE_CHECKING:
    from cloudcoil_sync.client import ResourceClient
    from cloudcoil_sync.controller._internal.definition import Controller
    from cloudcoil_sync.controller._internal.share import Share

__all__ = ["PassHandler"]


class PassHandler:
    """The `Handler` and `PassHooks` of one controller's `Reconciler`."""

    def __init__(
        self,
        controller: Controller[Any],
        services: PassServices,
        marks: rejects.Marks,
        *,
        term: Term,
        shard: Share | None,
    ) -> None:
        """`marks` says what a pass cannot do on the object, through the primary kind's
        client and the Event recorder, which the handler uses too."""
        self._controller = controller
        self._services = services
        self._marks = marks
        self._client: ResourceClient[Any] = marks.client
        self._recorder: EventRecorder | None = marks.recorder
        self._kind = self._client.mapping.kind
        self._term = term
        self._shard = shard
        self._pruned = controller.pruned
        self._lock = threading.Lock()
        self._passes: dict[ResourceKey, Request[Any]] = {}

    def __call__(self, key: ResourceKey, working: Resource | None, snapshot: Any) -> object:
        self._term.check()  # the moment a pass starts: never after a stop or past the deadline
        shard = self._shard
        if shard is not None and working is not None and shard.release(self._client, working):
            return None  # drained: the object's next shard reconciles it
        if working is not None:
            self._marks.reports.forget(self._kind, key.namespace, key.name)
        request: Request[Any] = Request(key, working, self._services, original=snapshot)
        if working is not None and self._recorder is not None:
            _note_deleted_children(request)
        with self._lock:
            self._passes[key] = request
        # Writes are guarded by the pass's one fence (set by the workers around the pass);
        # a WriteFenced is told apart by the reconciler (its cause).
        with request.running():
            value = self._run(request)
        request.completed = True
        return value

    def _run(self, request: Request[Any]) -> object:
        controller = self._controller
        finalizer = controller.registry.finalizer if controller.reconciler is None else None
        if (
            finalizer is not None
            and request.object is not None
            and finalizer_step(request, finalizer) is Step.DONE
        ):
            return None
        value = controller.run_pass(request)
        waited = isinstance(value, Wait) or bool(request.report.pending)
        desired, requeue_after = interpret(value)
        if request.staged and request.original is not None:
            # The snapshot is the reconciler's (read only): staged status goes on a copy.
            base = desired if desired is not None else request.original.model_copy(deep=True)
            desired = request.apply_status(base)
        if not waited and self._pruned and request.object is not None:
            prune_children(request, self._pruned)
        if desired is None and requeue_after is None:
            return None
        return Result(requeue_after=requeue_after, resource=desired)

    # PassHooks

    def failed(
        self, key: ResourceKey, snapshot: Resource | None, error: BaseException
    ) -> Resource | None:
        """The failure status to write: staged status plus the failed stage and Ready."""
        with self._lock:
            request = self._passes.get(key)
        if request is None or snapshot is None:
            return None
        if request.completed and not isinstance(error, PassTimedOut):
            return None  # the handler finished; its write failed and will be retried
        report_failure(request, error)
        if not request.staged:
            return None
        applied: Resource | None = request.apply_status(snapshot.model_copy(deep=True))
        return applied

    def invalid(self, key: ResourceKey, data: bytes, error: rejects.InvalidObject) -> None:
        self._term.check()  # as any pass: not once stopping or fenced
        self._marks.invalid(decode(data), error)

    def abandoned(self, key: ResourceKey, data: bytes | None, seconds: float) -> None:
        if data is not None:
            self._marks.timed_out(decode(data), self._controller.reconcile_timeout or seconds)

    def settled(self, key: ResourceKey, succeeded: bool) -> None:
        """Flush the pass's queued Events within `event_flush_timeout`."""
        with self._lock:
            request = self._passes.pop(key, None)
        if request is None or not request.events or self._recorder is None:
            return
        regarding = request.object
        if regarding is None:
            regarding = request.original
        if regarding is not None:
            self._recorder.flush(
                regarding,
                request.events,
                timeout=self._controller.event_flush_timeout,
                key=key,
            )


def _note_deleted_children(request: Request[Any]) -> None:
    """The one cause worth an Event: an owned child was deleted (by a user, a garbage
    collector, a prune: `kubectl describe` on the primary then says why the operator acted
    again); the rest of a pass's causes go to its debug line, metrics and span."""
    info = current()
    deleted: list[str] = []  # a loop, not a list comprehension (a call): once per pass
    for cause in info.causes if info is not None else ():
        if cause.kind == "child" and cause.event == "deleted" and cause.object:
            deleted.append(cause.object)
    if deleted:
        request.event("ChildDeleted", f"{', '.join(deleted)} deleted; reconciling")
