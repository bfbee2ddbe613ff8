"""One pass's run of change handlers and steps (`HandlerRun`): each independent, retried on
its own schedule, its progress kept on the object (`progress.py`).

Per handler and attempt, what it does → its progress entry → when it runs again:

- returns None → `success` (a step's entry is dropped) → not for this change (a step: at
  the next pass);
- raises `Wait(after=s)` → `delayed`, retries unchanged → after s;
- raises `TemporaryError(delay=d)` → retries + 1, `delayed` → after d (default `backoff`);
- raises another exception → retries + 1, `delayed` → after `backoff`;
- raises `TerminalError`, or past `retries=` attempts or `timeout=` seconds → `failure`
  (logged, a Warning Event) → not for this change (a step: once the essence changes).

A failing handler never stops the others of the pass; the pass asks to be requeued at the
earliest `delayed`. A write refused by the pass's fence (`WriteFenced`) or a stopping term
ends the pass as usual: nothing is recorded, the pass is retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from cloudcoil_sync.client import WriteFenced
from cloudcoil_sync.controller._internal.changes import Change
from cloudcoil_sync.controller._internal.handler_calls import (
    HandlerCall,
    TemporaryError,
    call_scope,
)
from cloudcoil_sync.controller._internal.handler_specs import HandlerSpec
from cloudcoil_sync.controller._internal.progress import Entry, Progress
from cloudcoil_sync.controller._internal.stages import Handler
from cloudcoil_sync.controller._internal.term import PassRefused
from cloudcoil_sync.controller._internal.types import TerminalError, Wait

__all__ = ["HandlerRun", "SubstepsPending"]

Diff = tuple[Change, ...]

logger = logging.getLogger("cloudcoil_sync.controller.handlers")


class SubstepsPending(Exception):
    """Internal: some sub-steps are not done yet; the parent waits for the earliest."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"sub-steps pending for {delay:g}s")
        self.delay = delay


class HandlerRun:
    """The handlers of one pass over one object (`resource`, with `context()` for ctx)."""

    def __init__(
        self,
        progress: Progress,
        resource: Any,
        context: Callable[[], Any],
        *,
        essence: str,
        where: str,
        specs: Mapping[str, HandlerSpec],
        event: Callable[[str, str], None] | None = None,
        now: float | None = None,
    ) -> None:
        """`specs` by id: those `ctx.substeps` may be called from."""
        self.progress, self._specs = progress, specs
        self._resource, self._context = resource, context
        self._essence = essence  # fingerprint: a step's permanent failure is for it
        self._where, self._event = where, event
        self.now = time.time() if now is None else now
        self.delays: list[float] = []  # seconds until each pending handler is due
        self.failed: list[str] = []

    @property
    def requeue_after(self) -> float | None:
        return max(0.0, min(self.delays)) if self.delays else None

    def run(
        self, spec: HandlerSpec, reason: str, old: Any = None, new: Any = None, diff: Diff = ()
    ) -> bool:
        """One attempt of `spec` unless done or not yet due; whether it is done now."""
        entries = self.progress.entries
        entry = entries.get(spec.id)
        if entry is not None and entry.failure and not spec.changes:
            if entry.essence == self._essence:
                return True  # a step that failed for good: until the object changes
            self.progress.drop({spec.id})
            entry = None
        if entry is not None and (entry.success or entry.failure):
            return True
        if entry is not None and entry.delayed is not None and entry.delayed > self.now:
            self.delays.append(entry.delayed - self.now)
            return False
        if spec.when is not None and not spec.when.call(self._resource, self._context):
            return True
        entry = entry or Entry(started=self.now)
        entries[spec.id] = entry
        if spec.timeout is not None and self.now - entry.started > spec.timeout:
            return self._fail(spec, entry, f"timed out after {spec.timeout:g}s")
        call = HandlerCall(
            spec.id, reason, entry.retries, entry.started, old, new, diff, self._substeps
        )
        return self._attempt(spec, entry, call)

    def _attempt(self, spec: HandlerSpec, entry: Entry, call: HandlerCall) -> bool:
        try:
            with call_scope(call):
                returned = spec.handler.call(self._resource, self._context)
            if isinstance(returned, Wait):
                raise returned
            if returned is not None:
                raise TerminalError(
                    f"handler {spec.id} returned {type(returned).__name__}: change handlers "
                    "and steps return None (write results with ctx.set_status)"
                )
        except (WriteFenced, PassRefused):
            raise  # the pass itself cannot go on
        except Wait as wait:  # without `after`: look again after its backoff, not at once
            after = spec.backoff if wait.requeue_after is None else wait.requeue_after
            return self._delay(entry, after, f"{wait.reason}: {wait.message}")
        except SubstepsPending as pending:
            return self._delay(entry, pending.delay, str(pending))
        except TerminalError as error:
            return self._fail(spec, entry, f"{type(error).__name__}: {error}")
        except TemporaryError as error:
            return self._retry(spec, entry, error, error.delay)
        except Exception as error:
            return self._retry(spec, entry, error, None)
        entry.success, entry.delayed, entry.message = True, None, None
        if not spec.changes:
            self.progress.drop({spec.id})  # a step at rest keeps no progress
        return True

    def _delay(self, entry: Entry, delay: float, message: str) -> bool:
        entry.delayed, entry.message = self.now + delay, message
        self.delays.append(delay)
        return False

    def _retry(
        self, spec: HandlerSpec, entry: Entry, error: Exception, delay: float | None
    ) -> bool:
        entry.retries += 1
        message = f"{type(error).__name__}: {error}"
        if spec.retries is not None and entry.retries >= spec.retries:
            return self._fail(spec, entry, f"{message} (gave up after {entry.retries} attempts)")
        wait = spec.backoff if delay is None else delay
        logger.warning(
            "Handler %s of %s failed (attempt %d), retrying in %gs: %s",
            spec.id,
            self._where,
            entry.retries,
            wait,
            message,
            exc_info=None if isinstance(error, TemporaryError) else error,
        )
        return self._delay(entry, wait, message)

    def _fail(self, spec: HandlerSpec, entry: Entry, message: str) -> bool:
        entry.failure, entry.delayed, entry.message = True, None, message
        entry.essence = self._essence
        self.failed.append(spec.id)
        logger.error("Handler %s of %s failed permanently: %s", spec.id, self._where, message)
        if self._event is not None:
            self._event("HandlerFailed", f"{spec.id}: {message}")
        return True

    def _substeps(self, parent: HandlerCall, steps: Mapping[str, Callable[[], Any]]) -> None:
        """`ctx.substeps`: each sub-step independent, with its own progress entry
        (`parent/id`); returns once all succeeded, else the parent waits or fails."""
        if not isinstance(steps, Mapping) or not steps:
            raise TypeError("ctx.substeps expects a non-empty mapping of id to function")
        spec = self._specs.get(parent.id)
        if spec is None:
            raise RuntimeError("ctx.substeps can only be called from a change handler or step")
        failed_before, pending_before = len(self.failed), len(self.delays)
        for name, function in steps.items():
            # A sub-step keeps its entry until its parent is done (`substep` is no `step`).
            sub = replace(
                spec,
                id=f"{parent.id}/{name}",
                handler=Handler(_no_arguments(function), 1),
                when=None,
                reason="substep",
            )
            self.run(sub, parent.reason, parent.old, parent.new, parent.diff)
        if len(self.delays) > pending_before:
            raise SubstepsPending(min(self.delays[pending_before:]))
        if len(self.failed) > failed_before:
            raise TerminalError(f"sub-steps failed: {', '.join(self.failed[failed_before:])}")


def _no_arguments(function: Callable[[], Any]) -> Callable[[Any], Any]:
    if not callable(function):
        raise TypeError(f"sub-step {function!r} is not callable")
    return lambda _resource: function()
