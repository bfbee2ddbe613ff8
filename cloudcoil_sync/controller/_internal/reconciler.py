"""The `Reconciler` of one controller: one pass for one key, returning an `Outcome`.

A pass builds the primary model from the informer's JSON once (`None` if absent), gives the
handler a private copy (parsed from the same bytes: cheaper than a deep copy) and keeps the
untouched snapshot for the diff, persists what the handler changed, and says what happened.
It never touches the queue: `Workers` settles the key from the `Outcome` (see `outcome`):
`success` or `requeue_after` (`Result`, `Wait`); `terminal` for a `TerminalError` (later
events still reconcile); `error` for any other exception (409/422 conflicts and timeouts
included; the next pass reads the informer's newer snapshot).

Handlers run on the pass threads and may block. A pass exceeding `reconcile_timeout` cannot
be interrupted (threads cannot be cancelled): the watchdog abandons it. Its `PassFence`
closes with cause `timeout` (a write already on the wire finishes first; later API writes
from its thread are refused with `WriteFenced`), and the watchdog's releaser settles its
key. When the handler finally returns, nothing it produced is written or recorded.

Persistence (`persist`) is the last step of a pass, not a layer of its own: the patch is
`cloudcoil_sync._internal.patches.diff(snapshot, desired)`, which starts with `test`
operations on the UID and resourceVersion the pass read, so a concurrent change or a
replaced object makes the API server refuse it (422, raised as `StaleWrite`) instead of
being overwritten; spec/metadata and `/status` go in two guarded patches when the kind has a
status subresource. The write is never rebased onto a fresh read.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.patches import diff, split_status
from cloudcoil_sync.client import (
    APIError,
    Conflict,
    Invalid,
    ResourceClient,
    TransportError,
    WriteFenced,
)
from cloudcoil_sync.client._internal import codec
from cloudcoil_sync.controller._internal.changes import ChangeTracker
from cloudcoil_sync.controller._internal.echoes import Echoes
from cloudcoil_sync.controller._internal.fence import PassFence
from cloudcoil_sync.controller._internal.invalid import InvalidObject, build
from cloudcoil_sync.controller._internal.logcontext import current
from cloudcoil_sync.controller._internal.metrics import ControllerMetrics
from cloudcoil_sync.controller._internal.outcome import Outcome, PassFenced, PassTimedOut
from cloudcoil_sync.controller._internal.store import encode
from cloudcoil_sync.controller._internal.term import PassRefused
from cloudcoil_sync.controller._internal.types import ResourceKey, TerminalError, Wait, interpret

__all__ = [
    "STALE_SNAPSHOT_DELAY",
    "Handler",
    "PassHooks",
    "Reconciler",
    "StaleWrite",
    "persist",
    "status_only",
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
        echoes: Echoes | None = None,
    ) -> None:
        """`echoes` learns of every guarded write, so its watch echo starts no pass."""
        self.resource = resource
        self.name = name
        self._handler = handler
        self._lookup, self._client = lookup, client  # where a pass reads, where it writes
        self._metrics = metrics
        self._hooks: PassHooks = hooks or _NoHooks()
        self._echoes = echoes
        self._log = logging.getLogger(f"cloudcoil_sync.controller.{name}")
        self._lock = threading.Lock()
        # key -> resourceVersion our last write replaced: a snapshot still at it is stale.
        self._superseded: dict[ResourceKey, tuple[str, float]] = {}
        self.counts = {"success": 0, "error": 0, "terminal": 0, "cancelled": 0, "invalid": 0}
        self.duration = 0.0
        self.writes = 0
        self.changes = ChangeTracker()  # `ctx.changes`: since the last successful pass

    def reconcile(
        self,
        key: ResourceKey,
        fence: PassFence | None = None,
        handled: Callable[[], None] | None = None,
    ) -> Outcome:
        """One pass for `key` (its writes already guarded by `fence`, if any); `handled` is
        called once the handler returned or raised, before the pass's own write."""
        started = time.monotonic()
        data = self._read(key)
        if data is not None and self._is_stale(key, data):  # before any model is built
            self._log.debug("Pass for %s skipped: the cache still shows our last write's base", key)
            return Outcome("stale", STALE_SNAPSHOT_DELAY)
        info = current()
        if info is not None:
            info.changes = functools.partial(self.changes.changes, key, data)
        try:
            snapshot = build(self.resource, data) if data is not None else None
        except InvalidObject as error:
            assert data is not None
            return self._rejected(key, data, error)
        working = self.resource.model_validate_json(data) if data is not None else None
        try:
            outcome = self._run(key, snapshot, working, fence, handled)
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
            changed = self.changes.changes(key, data, asked=False)
            described = outcome.describe(seconds, absent=snapshot is None)
            if changed:
                described += f"; changed since the last success: {'; '.join(map(str, changed))}"
            self._log.debug("Pass for %s: %s", key, described)
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
        self,
        key: ResourceKey,
        snapshot: T | None,
        working: T | None,
        fence: PassFence | None,
        handled: Callable[[], None] | None,
    ) -> Outcome:
        try:
            value = self._handler(key, working, snapshot)
        except Wait as wait:
            value = wait
        finally:
            if handled is not None:
                handled()
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
        echoes = self._echoes
        response = None
        if echoes is not None:
            meta = snapshot.metadata  # not the model's property (Python code): per write
            echoes.writing(key, None if meta is None else meta.resource_version)
        try:
            response = persist(
                client,
                snapshot,
                desired,
                status_subresource="status" in client.mapping.subresources,
            )
        finally:
            if echoes is not None:
                echoes.wrote(key, ((response or {}).get("metadata") or {}).get("resourceVersion"))
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

    def _is_stale(self, key: ResourceKey, data: bytes) -> bool:
        """The informer still shows the version our last write replaced (briefly)."""
        with self._lock:
            if key not in self._superseded:
                return False  # the common case: nothing to decode
        version = (codec.loads(data).get("metadata") or {}).get("resourceVersion")
        with self._lock:
            remembered = self._superseded.get(key)
            if remembered is None:
                return False
            superseded, until = remembered
            if version == superseded and time.monotonic() < until:
                return True
            # Caught up, or the echo is late: a truly stale patch is refused (422) anyway.
            del self._superseded[key]
            return False

    def _remember_write(self, key: ResourceKey, snapshot: T, response: JSON) -> None:
        meta = snapshot.metadata
        version = None if meta is None else meta.resource_version
        written = (response.get("metadata") or {}).get("resourceVersion")
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


# -- guarded persistence ---------------------------------------------------------------------


def status_only(snapshot: T, desired: Resource) -> T:
    """`snapshot` with `desired`'s status: what a failure report may write (nothing else)."""
    copy = snapshot.model_copy(deep=True)
    copy.status = getattr(desired, "status", None)  # type: ignore[attr-defined]
    return copy


class StaleWrite(Conflict):
    """The object changed after the pass read it: the guarded patch was refused."""


def _stale(snapshot: Resource, refused: Invalid) -> StaleWrite:
    what = f"{type(snapshot).__name__} {snapshot.namespace + '/' if snapshot.namespace else ''}"
    return StaleWrite(
        refused.status_code,
        refused.reason,
        f"{what}{snapshot.name} changed after this pass read it at resourceVersion "
        f"{snapshot.resource_version}; the write was refused, not merged, and the pass will be "
        "retried against the newer object",
        details=refused.details,
        method=refused.method,
        url=refused.url,
    )


def written_paths(snapshot: Resource, desired: Resource) -> list[str]:
    """The JSON pointers `persist` changes (for logs; the guards are left out)."""
    return [str(op.get("path")) for op in diff(snapshot, desired)[2:]]


def persist(
    client: ResourceClient[Any],
    snapshot: Resource,
    desired: Resource,
    *,
    status_subresource: bool,
) -> dict[str, Any] | None:
    """Write what changed from `snapshot` to `desired`; return the last response or None.

    With a status subresource, spec/metadata go in one guarded patch of the object and
    status in a second guarded patch of `/status` (at the resourceVersion the first
    returned). Without one, everything goes in a single patch. A refused guard raises
    `StaleWrite`.
    """
    try:
        return _persist(client, snapshot, desired, status_subresource=status_subresource)
    except Invalid as refused:
        if refused.causes:  # a validation failure of what we wrote, not a moved object
            raise
        raise _stale(snapshot, refused) from refused


def _persist(
    client: ResourceClient[Any],
    snapshot: Resource,
    desired: Resource,
    *,
    status_subresource: bool,
) -> dict[str, Any] | None:
    operations = diff(snapshot, desired)
    if not operations:
        return None
    guards, changes = operations[:2], operations[2:]
    meta = snapshot.metadata  # present: `diff` refuses a snapshot without it
    assert meta is not None
    name, namespace = meta.name or "", meta.namespace
    raw = client.raw
    if not status_subresource:
        return raw.json_patch(name, operations, namespace=namespace)
    main, status = split_status(changes)
    response: dict[str, Any] | None = None
    version = meta.resource_version
    if main:
        response = raw.json_patch(name, guards + main, namespace=namespace)
        version = (response.get("metadata") or {}).get("resourceVersion") or version
        if status and response.get("status") != _status_json(snapshot):
            raise Conflict(409, "Conflict", "Status changed during resource patch; reconcile again")
    if status:
        version_guard = {"op": "test", "path": "/metadata/resourceVersion", "value": version}
        response = raw.json_patch(
            name, [guards[0], version_guard, *status], namespace=namespace, subresource="status"
        )
    return response


def _status_json(resource: Resource) -> Any:
    dumped = resource.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped.get("status")
