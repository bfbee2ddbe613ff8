"""The `Reconciler` of one controller: one pass for one key, returning an `Outcome`.

A pass builds the primary model from the informer's JSON once (`None` if absent), gives the
handler a private copy (parsed from the same bytes: cheaper than a deep copy) and keeps the
untouched snapshot for the diff, persists what the handler changed (guarded JSON patch,
status through `/status`), and says what happened. It never touches the queue: `Workers`
settles the key from the `Outcome` (see `outcome`).

- success: `success`, or `requeue_after` (`Result`, `Wait`);
- `TerminalError`: failure reported, `terminal` (later events still reconcile);
- any other exception (409/422 conflicts and timeouts included): failure reported,
  `error`; the next pass reads the informer's newer snapshot.

Handlers run on the worker threads and may block. A pass exceeding `reconcile_timeout`
cannot be interrupted (threads cannot be cancelled): the watchdog abandons it. Its
`PassFence` (the one fence of a pass, a child of the term's) closes with cause `timeout`
(a write already on the wire finishes first; later API writes from its thread are refused
with `WriteFenced`), and the watchdog's releaser settles its key. When the handler finally
returns, nothing it produced is written and nothing more is recorded.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync.client import APIError, Conflict, ResourceClient, TransportError, WriteFenced
from cloudcoil_sync.client._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.causes import Cause
from cloudcoil_sync.controller._internal.changes import ChangeTracker
from cloudcoil_sync.controller._internal.echoes import OwnWrites
from cloudcoil_sync.controller._internal.invalid import InvalidObject, build
from cloudcoil_sync.controller._internal.logcontext import current
from cloudcoil_sync.controller._internal.metrics import ControllerMetrics
from cloudcoil_sync.controller._internal.outcome import Outcome, PassFenced, PassTimedOut
from cloudcoil_sync.controller._internal.persist import persist, status_only, written_paths
from cloudcoil_sync.controller._internal.store import encode
from cloudcoil_sync.controller._internal.term import PassRefused
from cloudcoil_sync.controller._internal.types import (
    ResourceKey,
    TerminalError,
    Wait,
    interpret,
)

__all__ = [
    "ABANDONED",
    "STALE_SNAPSHOT_DELAY",
    "Handler",
    "PassFence",
    "PassHooks",
    "Reconciler",
]

T = TypeVar("T", bound=Resource)
JSON = dict[str, Any]
#: `handler(key, working, snapshot)`: the handler's private copy and the untouched snapshot
#: (read only: the pass diffs against it), both None for an absent object.
Handler = Callable[[ResourceKey, Any, Any], object]

# How long to wait for the informer to catch up with our own write before looking again.
STALE_SNAPSHOT_DELAY = 1.0
# Passes are deferred for a stale snapshot only this long after the write.
STALE_SNAPSHOT_PATIENCE = 5.0
MAX_REMEMBERED_WRITES = 10_000
ABANDONED = "the reconcile pass outlived reconcile_timeout and was abandoned"


class PassFence(WriteFence):
    """The one fence of one pass: a child of the term's fence, closed (cause `timeout`) by
    the watchdog when the pass outlives `reconcile_timeout`.

    `abandoned` and `finished` change under the workers' lock: exactly one of the watchdog
    (abandoning) and the worker (finishing) settles the key.
    """

    def __init__(self, key: Any, *, parent: WriteFence | None = None, started: float) -> None:
        super().__init__(reason=ABANDONED, parent=parent, cause="timeout")
        self.key = key
        self.started = started  # on the workers' clock
        self.expired = False  # the watchdog closed it at reconcile_timeout
        self.abandoned = False
        self.finished = False

    def check(self) -> None:
        """Raise `WriteFenced` (cause `timeout`) once this pass itself was closed."""
        if self.expired:
            raise WriteFenced(f"The pass of {self.key} was not written: {self.reason}", "timeout")


class PassHooks(Protocol):
    """What the definition layer adds around a pass (failure status, Events)."""

    def failed(
        self, key: ResourceKey, snapshot: Resource | None, error: BaseException
    ) -> Resource | None:
        """A copy of `snapshot` whose status reports the failure (only status is written)."""

    def settled(self, key: ResourceKey, succeeded: bool) -> None:
        """After persistence (flush queued Events, forget per-pass state)."""

    def invalid(self, key: ResourceKey, data: bytes, error: InvalidObject) -> None:
        """The stored object does not fit the model: say so on it (raises to retry)."""

    def abandoned(self, key: ResourceKey, data: bytes | None, seconds: float) -> None:
        """A pass outlived reconcile_timeout: say so on the object (best effort)."""


class _NoHooks:
    def failed(
        self, key: ResourceKey, snapshot: Resource | None, error: BaseException
    ) -> Resource | None:
        return None

    def settled(self, key: ResourceKey, succeeded: bool) -> None:
        pass

    def invalid(self, key: ResourceKey, data: bytes, error: InvalidObject) -> None:
        logging.getLogger("cloudcoil_sync.controller").warning("%s; not reconciled", error)

    def abandoned(self, key: ResourceKey, data: bytes | None, seconds: float) -> None:
        pass


class Reconciler(Generic[T]):
    """Run passes for one controller's primary kind; each returns an `Outcome`."""

    def __init__(
        self,
        resource: type[T],
        handler: Handler,
        *,
        lookup: Callable[[ResourceKey], bytes | JSON | None],
        client: Callable[[ResourceKey], ResourceClient[Any]],
        name: str,
        metrics: ControllerMetrics | None = None,
        hooks: PassHooks | None = None,
        own_writes: OwnWrites | None = None,
    ) -> None:
        self.resource = resource
        self._own_writes = own_writes
        self.name = name
        self._handler = handler
        self._lookup = lookup
        self._client = client
        self._metrics = metrics
        self._hooks: PassHooks = hooks or _NoHooks()
        self._log = logging.getLogger(f"cloudcoil_sync.controller.{name}")
        self._lock = threading.Lock()
        # key -> resourceVersion our last write replaced: a snapshot still at it is stale.
        self._superseded: dict[ResourceKey, tuple[str, float]] = {}
        self.counts = {"success": 0, "error": 0, "terminal": 0, "cancelled": 0, "invalid": 0}
        self.duration = 0.0
        self.writes = 0
        self.changes = ChangeTracker()  # `ctx.changes`: since the last successful pass

    def reconcile(self, key: ResourceKey, fence: PassFence | None = None) -> Outcome:
        """One pass for `key` (its writes already guarded by `fence`, if any)."""
        started = time.monotonic()
        data = self._read(key)
        info = current()
        if info is not None:
            info.changes = functools.partial(self.changes.changes, key, data)
        try:
            snapshot = build(self.resource, data) if data is not None else None
        except InvalidObject as error:
            assert data is not None
            return self._rejected(key, data, error)
        echoed = self._echo(key, snapshot, info.causes) if info is not None else None
        if echoed is not None:
            return echoed
        if snapshot is not None and self._is_stale(key, snapshot):
            self._log.debug("Pass for %s skipped: the cache still shows our last write's base", key)
            return Outcome("stale", STALE_SNAPSHOT_DELAY)
        working = self.resource.model_validate_json(data) if data is not None else None
        try:
            outcome = self._run(key, snapshot, working, fence)
        except PassRefused:
            # Not started (stopping, or the Lease's renew deadline passed): not an error; the
            # key comes back later unless the queue is closed by then.
            return Outcome("refused", STALE_SNAPSHOT_DELAY)
        except Exception as raised:
            if fence is not None and fence.abandoned:
                return Outcome("abandoned", error=raised)
            outcome = self._failed(key, snapshot, _classified(raised))
        if fence is not None and fence.abandoned:
            return Outcome("abandoned", error=outcome.error)  # its write began in time
        seconds = time.monotonic() - started
        self._record(outcome, seconds)
        debug = self._log.isEnabledFor(logging.DEBUG)
        if debug:
            changed = self.changes.changes(key, data)
            described = _describe(outcome, seconds, snapshot is None)
            if changed:
                described += f"; changed since the last success: {'; '.join(map(str, changed))}"
            self._log.debug("Pass for %s: %s", key, described)
        if outcome.requeue_after is not None and outcome.wrote and self._own_writes is not None:
            self._own_writes.requeued(key, outcome.requeue_after)
        if outcome.kind in ("success", "requeue_after") and (self.changes.wanted or debug):
            self.changes.succeeded(key, data, info.written if info is not None else None)
        try:
            self._hooks.settled(key, outcome.error is None)
        except Exception:
            self._log.exception("Settling the pass for %s failed", key)
        return outcome

    def abandon(self, key: ResourceKey, seconds: float) -> Outcome:
        """The outcome of a pass the watchdog gave up on: an error, retried with backoff,
        and said on the object (`Ready=False`, `ReconcileTimedOut`, a Warning Event)."""
        self._log.error("Reconcile of %s timed out after %.1fs; abandoned, retrying", key, seconds)
        try:  # before the retry: a retry's own status is never overwritten by this report
            self._hooks.abandoned(key, self._read(key), seconds)
        except Exception as error:
            self._log.warning("Reporting the timeout of %s on the object failed: %s", key, error)
        outcome = Outcome("timed_out", error=PassTimedOut())
        self._record(outcome, seconds)
        return outcome

    def stats(self) -> tuple[dict[str, int], float, int]:
        """(pass counts by outcome, total pass seconds, writes): a consistent copy.

        Outcomes: success (requeues included), error, terminal, and cancelled (passes
        that outlived `reconcile_timeout`, also counted as errors).
        """
        with self._lock:
            return dict(self.counts), self.duration, self.writes

    # -- the pass ----------------------------------------------------------------------------

    def _read(self, key: ResourceKey) -> bytes | None:
        found = self._lookup(key)
        return found if found is None or isinstance(found, bytes) else encode(found)

    def _rejected(self, key: ResourceKey, data: bytes, error: InvalidObject) -> Outcome:
        """The stored object does not fit the model: reported on it, and looked at again
        only when it changes (no backoff loop: retrying cannot fix it)."""
        try:
            self._hooks.invalid(key, data, error)
        except PassRefused:
            return Outcome("refused", STALE_SNAPSHOT_DELAY)
        except Exception as report_error:  # the report itself is retried
            self._log.warning("Reporting the invalid object %s failed: %s", key, report_error)
            return Outcome("error", error=error)
        with self._lock:
            self.counts["invalid"] += 1
        if self._metrics is not None:
            self._metrics.invalid("pass")
        return Outcome("invalid", error=error)

    def _run(
        self, key: ResourceKey, snapshot: T | None, working: T | None, fence: PassFence | None
    ) -> Outcome:
        try:
            value = self._handler(key, working, snapshot)
        except Wait as wait:
            value = wait
        if fence is not None:
            fence.check()
        desired, requeue_after = interpret(value)
        if desired is not None and not isinstance(desired, self.resource):
            raise TypeError("Reconcile must return its primary resource type")
        wrote = False
        written: tuple[str, ...] = ()
        if desired is not None:
            if snapshot is None:
                raise ValueError("Cannot persist a returned resource for an absent snapshot")
            wrote = self._write(key, snapshot, desired)
            if wrote and self._log.isEnabledFor(logging.DEBUG):
                written = tuple(written_paths(snapshot, desired))
        if requeue_after is not None:
            return Outcome("requeue_after", requeue_after, wrote=wrote, written=written)
        return Outcome("success", wrote=wrote, written=written)

    def _write(self, key: ResourceKey, snapshot: T, desired: Resource) -> bool:
        client = self._client(key)
        response = persist(
            client,
            snapshot,
            desired,
            status_subresource="status" in client.mapping.subresources,
        )
        if response is None:
            return False
        info = current()
        if info is not None:
            info.written = response  # the base of the next pass's changes
        self._remember_write(key, snapshot, response)
        with self._lock:
            self.writes += 1
        return True

    def _failed(self, key: ResourceKey, snapshot: T | None, error: Exception) -> Outcome:
        terminal = isinstance(error, TerminalError)
        if isinstance(error, PassTimedOut):
            self._log.error("Reconcile of %s timed out; its result was discarded", key)
        elif isinstance(error, PassFenced):
            if self._metrics is not None:
                self._metrics.fenced(error.cause)
            self._log.warning("Reconcile of %s stopped writing (%s): %s", key, error.cause, error)
            return Outcome("fenced", error=error)  # its failure cannot be written either
        elif isinstance(error, InvalidObject):
            self._log.warning("Reconcile of %s failed: %s", key, error)
        elif terminal:
            self._log.error("Reconcile of %s failed terminally: %s", key, error)
        elif isinstance(error, Conflict):
            # Optimistic concurrency at work: the next pass reads the newer object.
            self._log.info("Reconcile of %s will retry: the object changed (%s)", key, error)
        elif isinstance(error, APIError | TransportError):
            self._log.warning("Reconcile of %s failed: %s", key, error)
        else:
            self._log.warning("Reconcile of %s failed: %s", key, error, exc_info=error)
        try:
            self._report_failure(key, snapshot, error)
        except Exception as report_error:
            # Could not even record the failure: retry the whole pass.
            self._log.warning("Reporting the failure of %s failed: %s", key, report_error)
            terminal = False
        if isinstance(error, PassTimedOut):
            return Outcome("timed_out", error=error)
        return Outcome("terminal" if terminal else "error", error=error)

    def _report_failure(self, key: ResourceKey, snapshot: T | None, error: Exception) -> None:
        if snapshot is None:
            return
        report = self._hooks.failed(key, snapshot, error)
        if report is None:
            return
        desired = status_only(snapshot, report)
        client = self._client(key)
        subresource = "status" in client.mapping.subresources
        response = persist(client, snapshot, desired, status_subresource=subresource)
        if response is not None:
            self._remember_write(key, snapshot, response)

    # -- bookkeeping -------------------------------------------------------------------------

    def _echo(
        self, key: ResourceKey, snapshot: T | None, causes: tuple[Cause, ...]
    ) -> Outcome | None:
        """A pass woken only by the echo of our own status write (echoes.py): not run; the
        requeue the writing pass asked for is put back."""
        own = self._own_writes
        if own is None or snapshot is None or not causes:
            return None
        # A fresh add takes over the causes of the delayed requeue it superseded.
        kinds = {cause.kind for cause in causes}
        if "status" not in kinds or not kinds <= {"status", "requeue", "timer"}:
            return None
        echo, left = own.echo(key, snapshot.resource_version)
        if not echo:
            return None
        self._log.debug("Pass for %s skipped: the echo of our own status write", key)
        return Outcome("success") if left is None else Outcome("requeue_after", left)

    def _is_stale(self, key: ResourceKey, snapshot: T) -> bool:
        """The informer still shows the version our last write replaced (briefly)."""
        with self._lock:
            remembered = self._superseded.get(key)
            if remembered is None:
                return False
            superseded, until = remembered
            if snapshot.resource_version == superseded and time.monotonic() < until:
                return True
            # Caught up, or the echo is late: a truly stale patch is refused (422) anyway.
            del self._superseded[key]
            return False

    def _remember_write(self, key: ResourceKey, snapshot: T, response: JSON) -> None:
        version = snapshot.resource_version
        written = (response.get("metadata") or {}).get("resourceVersion")
        if written and self._own_writes is not None:
            self._own_writes.note(key, written)
        if not version or written == version:
            return  # the server changed nothing: no newer version is coming
        with self._lock:
            if len(self._superseded) >= MAX_REMEMBERED_WRITES:
                self._superseded.pop(next(iter(self._superseded)))
            self._superseded[key] = (version, time.monotonic() + STALE_SNAPSHOT_PATIENCE)

    def _record(self, outcome: Outcome, seconds: float) -> None:
        kind = outcome.kind
        if kind not in _COUNTED:
            return
        terminal = kind == "terminal"
        label = kind if kind in ("success", "requeue_after") else "error"
        timed_out = kind == "timed_out"
        with self._lock:
            self.counts["terminal" if terminal else "error" if label == "error" else "success"] += 1
            if timed_out:
                self.counts["cancelled"] += 1  # its result was discarded
            self.duration += seconds
        if self._metrics is not None:
            if timed_out:
                self._metrics.timed_out()
            self._metrics.reconciled(label, seconds, terminal=terminal)


_COUNTED = frozenset({"success", "requeue_after", "error", "terminal", "fenced", "timed_out"})


def _describe(outcome: Outcome, seconds: float, absent: bool) -> str:
    """One debug line's worth: outcome, duration and what was written."""
    text = f"{outcome.kind} in {seconds * 1000:.1f} ms"
    if absent:
        text += " (object absent)"
    if outcome.requeue_after is not None:
        text += f", requeued after {outcome.requeue_after:g}s"
    if outcome.error is not None:
        text += f", {type(outcome.error).__name__}: {outcome.error}"
    if outcome.written:
        text += f", wrote {', '.join(outcome.written)}"
    elif outcome.error is None:
        text += ", nothing to write" if not outcome.wrote else ", wrote"
    return text


def _classified(error: Exception) -> Exception:
    """A refused write as its cause: `PassTimedOut` (reconcile_timeout) or `PassFenced`."""
    if not isinstance(error, WriteFenced):
        return error
    if error.cause == "timeout":
        timed_out = PassTimedOut("The reconcile pass outlived reconcile_timeout")
        timed_out.__cause__ = error
        return timed_out
    fenced = PassFenced(str(error), error.cause)
    fenced.__cause__ = error
    return fenced
