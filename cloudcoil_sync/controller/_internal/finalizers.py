"""The live finalizer step of a pass for controllers with `@controller.finalize(key)`.

Before the handlers run, every pass reads the primary live:

- absent: nothing to do (the pass ends);
- a different UID: the cached object was replaced (`Conflict`; the pass is retried);
- not being deleted: the finalizer is added when missing, and that pass ends there (the
  watch event of the write starts the next one, from a snapshot that has it);
- being deleted with the key present: the cleanup handler runs (None, or `Wait`), then
  the key is removed; nothing else is written afterwards;
- being deleted without the key: the handlers skip the object.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.client import Conflict, NotFound
from cloudcoil_sync.controller._internal.mutations import ensure_finalizer, remove_finalizer
from cloudcoil_sync.controller._internal.types import Wait

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.context import Request
    from cloudcoil_sync.controller._internal.registry import Finalizer

__all__ = ["Step", "finalizer_step"]


class Step(Enum):
    CONTINUE = "continue"
    """Run the reconcile handlers."""
    DONE = "done"
    """The pass is over: nothing else to run or persist."""


def finalizer_step(request: Request[Any], finalizer: Finalizer) -> Step:
    """Run the finalizer logic for `request`; raises `Wait` to requeue a pending cleanup."""
    obj = request.object
    if obj is None:
        return Step.DONE
    meta = obj.metadata
    if (
        meta is not None
        and not meta.deletion_timestamp
        and finalizer.key in (meta.finalizers or [])
    ):
        # The cached snapshot already holds the finalizer: no live read (the pass's guarded
        # write refuses a stale snapshot, so a deletion started meanwhile is not missed).
        return Step.CONTINUE
    api = request.config.client(type(obj), namespace=request.namespace)
    try:
        live = api.get(request.name)
    except NotFound:
        return Step.DONE
    uid = obj.metadata.uid if obj.metadata else None
    live_meta = live.metadata
    assert live_meta is not None
    if uid and live_meta.uid != uid:
        raise Conflict(
            409, "Conflict", f"{type(obj).__name__} {request.name} was replaced; reconcile again"
        )
    present = finalizer.key in (live_meta.finalizers or [])
    if not live_meta.deletion_timestamp:
        if present:
            return Step.CONTINUE
        ensure_finalizer(live, finalizer.key, config=request.config)
        return Step.DONE
    if not present:
        return Step.CONTINUE  # someone else's finalizer holds it; handlers skip it
    request.report.action = finalizer.handler.name
    returned = finalizer.handler.call(request.object, request.context)
    if isinstance(returned, Wait):
        raise returned
    if returned is not None:
        raise TypeError("Finalizer handlers return None, or raise Wait")
    remove_finalizer(live, finalizer.key, config=request.config)
    return Step.DONE
