"""kopf-style change handlers and independent steps, as sugar over level-based passes.

A pass still reads the whole current object; this decides, from the object and what it
carries (`progress.py`), which handlers it owes:

- create: the object has no `last-handled` annotation (never handled);
- update: its essence differs from `last-handled` (`ctx.old`, `ctx.new`, `ctx.diff`);
- field: the value at its path differs (also on create, from None);
- resume: `last-handled` is there and this process has not handled the object yet (a
  restart, a new leader);
- delete: it is being deleted and holds our finalizer (`handlers.cloudcoil.dev/delete`);
  with `requires_finalizer=False`: once, when it left the cache (the `deleted` cause), with
  the last object seen;
- step: every pass (level-based), each step on its own retry schedule.

Once every change handler of the change is done (succeeded, or failed for good), the new
essence is written to `last-handled` and their progress dropped, in the pass's one patch.
Semantics: create, update, field, resume and delete-with-finalizer run at least once per
change (a write that fails after a handler succeeded repeats that handler in the next pass,
so they must be idempotent); changes made while a change is in flight merge into it (kopf
does the same); delete without a finalizer runs at most once (not if the operator is down
or restarts between the deletion and its pass).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cloudcoil_sync.controller._internal.causes import diff as json_diff
from cloudcoil_sync.controller._internal.changes import Change
from cloudcoil_sync.controller._internal.handler_runs import HandlerRun
from cloudcoil_sync.controller._internal.handler_specs import HandlerSpec, build_spec
from cloudcoil_sync.controller._internal.invalid import InvalidObject, build
from cloudcoil_sync.controller._internal.progress import (
    LAST_HANDLED,
    PREFIX,
    PROGRESS,
    Entry,
    Progress,
    ProgressStorage,
    encode_essence,
    essence,
    fingerprint,
    last_handled,
)
from cloudcoil_sync.controller._internal.stages import Handler
from cloudcoil_sync.controller._internal.types import ResourceKey, Result, Wait

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.context import Request

__all__ = ["ChangeHandlers", "carry_annotations"]

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger("cloudcoil_sync.controller.handlers")
_MISSING = object()


def carry_annotations(source: Any, target: Any) -> None:
    """Our annotations from `source` (the working copy) onto the resource a handler
    returned instead of it."""
    ours = {
        key: value
        for key, value in (source.metadata.annotations or {}).items()
        if key.startswith(PREFIX)
    }
    if target.metadata is None:
        return
    kept = {
        key: value
        for key, value in (target.metadata.annotations or {}).items()
        if not key.startswith(PREFIX)
    }
    target.metadata.annotations = {**kept, **ours} or None


def _value(body: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(body, dict) or part not in body:
            return None
        body = body[part]
    return body


class ChangeHandlers:
    """The change handlers and steps of one controller (registered before it runs)."""

    def __init__(
        self, resource: type[Any], check: Callable[[], None], storage: ProgressStorage
    ) -> None:
        if storage not in ("annotations", "status"):
            raise ValueError("progress must be 'annotations' or 'status'")
        self._resource = resource
        self._check = check
        self.specs: dict[str, HandlerSpec] = {}
        self.storage: ProgressStorage = storage
        self._resumed: set[ResourceKey] = set()  # handled by this process (no resume owed)
        self._tombstones: dict[ResourceKey, Any] = {}  # last objects seen, deleted
        self._deleting: dict[ResourceKey, dict[str, Entry]] = {}  # delete progress written
        self._lock = threading.Lock()

    # -- registration --------------------------------------------------------------------

    def register(self, reason: str, **options: Any) -> Callable[[F], F]:
        def decorate(function: F) -> F:
            self._check()
            spec = build_spec(reason, function, **options)
            if spec.id in self.specs:
                raise ValueError(f"Handler id {spec.id!r} is used twice; pass id=")
            self.specs[spec.id] = spec
            return function

        return decorate

    @property
    def populated(self) -> bool:
        return bool(self.specs)

    def of(self, *reasons: str) -> list[HandlerSpec]:
        return [spec for spec in self.specs.values() if spec.reason in reasons]

    @property
    def tracks_changes(self) -> bool:
        return bool(self.of("create", "update", "resume", "field"))

    @property
    def finalizer_needed(self) -> bool:
        return any(spec.requires_finalizer for spec in self.of("delete"))

    def finalizer_handler(self) -> Handler:
        return Handler(self._finalize, 2)

    # -- the informer's side -------------------------------------------------------------

    def deleted(self, key: ResourceKey, obj: Any) -> None:
        """The object left the cache (on the informer's thread): keep it for its pass."""
        with self._lock:
            self._resumed.discard(key)
            self._deleting.pop(key, None)
            if self.of("delete") and not self.finalizer_needed:
                self._tombstones[key] = obj

    # -- the pass ------------------------------------------------------------------------

    def run(self, request: Any) -> Result | None:
        """The handlers this pass owes (module doc); what to write and when to look again."""
        key = request.key
        if request.original is None:
            self._run_tombstone(request, key)
            return None
        body = request.original.model_dump(mode="json", by_alias=True, exclude_none=True)
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            return None  # the finalizer step runs delete handlers
        current = essence(body)
        run = self._handler_run(request, body, current)
        done = self._run_changes(request, key, body, current, run)
        for spec in self.of("step"):
            run.run(spec, "step")
        working = request.object
        assert working is not None
        # Edits the handlers made to the resource are written with the pass and are part of
        # the handled essence (not a change of their own).
        handled = None
        if done:
            handled = essence(working.model_dump(mode="json", by_alias=True, exclude_none=True))
        self._store(request, working, run.progress, handled)
        return Result(requeue_after=run.requeue_after, resource=working)

    def _handler_run(self, request: Request[Any], body: Any, current: Any) -> HandlerRun:
        return HandlerRun(
            Progress(self.storage, body, time.time()),
            request.object,
            request.context,
            essence=fingerprint(current),
            where=str(request.key),
            specs=self.specs,
            event=lambda reason, message: request.event(reason, message, type="Warning"),
        )

    def _run_changes(
        self, request: Request[Any], key: ResourceKey, body: Any, current: Any, run: HandlerRun
    ) -> bool:
        """Run the change handlers owed; whether the change is completely handled."""
        if not self.tracks_changes:
            return False
        last = last_handled(body)
        done = True
        with self._lock:
            resumed = key in self._resumed
        if last is None:
            for spec in self.of("create"):
                done = run.run(spec, "create", None, current) and done
        elif not resumed:
            for spec in self.of("resume"):
                done = run.run(spec, "resume", last, current) and done
        if last != current:
            before = last or {}
            if last is not None:
                changes = tuple(Change(*found) for found in json_diff(before, current))
                for spec in self.of("update"):
                    done = run.run(spec, "update", last, current, changes) and done
            done = self._run_fields(run, before, current) and done
        if done and self.of("resume"):
            with self._lock:
                self._resumed.add(key)
        return done and (last != current or not resumed)

    def _run_fields(self, run: HandlerRun, before: Any, current: Any) -> bool:
        done = True
        for spec in self.of("field"):
            old, new = _value(before, spec.field), _value(current, spec.field)
            if old == new:
                continue
            prefix = ".".join(spec.field)
            changes = tuple(
                Change(f"{prefix}.{path}" if path else prefix, b, a)
                for path, b, a in json_diff(old, new)
            )
            done = run.run(spec, "field", old, new, changes) and done
        return done

    def _store(self, request: Request[Any], working: Any, progress: Progress, handled: Any) -> None:
        """Put progress and (once a change is handled) `last-handled` on the working copy or
        stage them in status (the pass's patch writes only what differs)."""
        if handled is not None:
            progress.drop({spec.id for spec in self.specs.values() if spec.changes})
        annotations = dict(working.metadata.annotations or {})
        before = dict(annotations)
        if handled is not None:
            annotations[LAST_HANDLED] = encode_essence(handled)
        if self.storage == "status":
            if progress.changed:
                request.set_status(progress=progress.encoded())
        else:
            encoded = progress.annotation()
            if encoded is None:
                annotations.pop(PROGRESS, None)
            else:
                annotations[PROGRESS] = encoded
        if annotations != before:
            working.metadata.annotations = annotations or None

    def _run_tombstone(self, request: Request[Any], key: ResourceKey) -> None:
        """Delete handlers without a finalizer: once, with the last object seen."""
        with self._lock:
            obj = self._tombstones.pop(key, _MISSING)
        if obj is _MISSING:
            return
        try:
            last = build(self._resource, obj)
        except InvalidObject as error:
            logger.warning("Delete handlers of %s skipped: %s", key, error)
            return
        for spec in self.of("delete"):
            try:
                returned = spec.handler.call(last, request.context)
                if returned is not None and not isinstance(returned, Wait):
                    raise TypeError("delete handlers return None")
            except Exception:
                logger.exception("Delete handler %s of %s failed (not retried)", spec.id, key)

    def _finalize(self, resource: Any, ctx: Any) -> None:
        """The finalizer's cleanup: every delete handler, each retried on its own."""
        request, key = ctx.request, ctx.request.key
        body = request.original.model_dump(mode="json", by_alias=True, exclude_none=True)
        run = self._handler_run(request, body, essence(body))
        with self._lock:
            self._resumed.discard(key)
            saved = self._deleting.get(key)
        if saved is not None:  # ours, written live: newer than a cache that lags behind it
            run.progress.entries = saved
        for spec in self.of("delete"):
            run.run(spec, "delete", resource, None)
        if run.requeue_after is None:
            with self._lock:
                self._deleting.pop(key, None)
            return
        self._save_progress(request, run.progress)
        with self._lock:
            self._deleting[key] = dict(run.progress.entries)
        raise Wait("DeleteHandlersPending", "delete handlers are retrying", after=run.requeue_after)

    def _save_progress(self, request: Request[Any], progress: Progress) -> None:
        """Progress of a deletion in flight, written at once (the finalizer step writes
        nothing else while the object is being deleted)."""
        if not progress.changed:
            return
        client = request.config.client(type(request.original), namespace=request.namespace).raw
        if self.storage == "status":
            client.merge_patch(
                request.name, {"status": {"progress": progress.encoded()}}, subresource="status"
            )
        else:
            client.merge_patch(
                request.name, {"metadata": {"annotations": {PROGRESS: progress.annotation()}}}
            )
