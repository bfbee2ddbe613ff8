"""The per-pass `Request` and the `Context` handlers receive as `ctx`.

A `Request` holds one pass's private copy of the primary (None when absent from the
watched scope), the status edits and conditions the pass staged, the Events it queued and
the children it ensured. The runtime persists the staged status with whatever the handler
returned, flushes the Events after persistence, and prunes children a successful pass did
not ensure. `Context(request)` is the handler-facing view: live clients, cached reads,
children, status, conditions and Events.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.slots import ThreadSlot
from cloudcoil_sync.controller._internal.causes import Cause
from cloudcoil_sync.controller._internal.changes import Change
from cloudcoil_sync.controller._internal.handler_calls import current_call
from cloudcoil_sync.controller._internal.logcontext import current
from cloudcoil_sync.controller._internal.reporting import ConditionStatus, PassReport
from cloudcoil_sync.controller._internal.status import get_condition, set_condition, update_status
from cloudcoil_sync.controller._internal.types import ResourceKey

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config, ResourceClient
    from cloudcoil_sync.controller._internal.cache import CachedResources
    from cloudcoil_sync.controller._internal.informer import Informer

__all__ = ["MAX_EVENTS_PER_PASS", "Context", "PassServices", "QueuedEvent", "Request", "active"]

T = TypeVar("T", bound=Resource)
U = TypeVar("U", bound=Resource)
EventType = Literal["Normal", "Warning"]

MAX_EVENTS_PER_PASS = 100
_REASON = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

_active: ThreadSlot[Request[Any]] = ThreadSlot()


class PassServices(Protocol):
    """What a pass needs from its runtime."""

    @property
    def config(self) -> Config: ...

    def cached(self, resource: type[Any], *, namespace: str | None = None) -> Any: ...

    def informer_for(self, resource: type[Any]) -> Informer: ...


@dataclass(frozen=True)
class QueuedEvent:
    reason: str
    message: str
    type: EventType
    action: str | None


@dataclass(frozen=True)
class _Condition:
    status: ConditionStatus
    reason: str
    message: str


@dataclass
class _Staged:
    status: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, _Condition] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.status or self.conditions)


def active() -> Request[Any] | None:
    """The request of the pass running on this thread, if any."""
    return _active.get()


class Request(Generic[T]):
    """One reconcile pass: the key, a private copy of the primary, and staged effects."""

    def __init__(
        self,
        key: ResourceKey,
        resource: T | None,
        services: PassServices,
        *,
        original: T | None = None,
    ) -> None:
        """`original` is the untouched snapshot the pass started from (read only: the pass
        diffs against it); without it the original is a deep copy of `resource`."""
        self.key = key
        self.name: str = key.name
        self.namespace: str | None = key.namespace
        self.report = PassReport()
        self.completed = False
        self.events: list[QueuedEvent] = []
        self.ensured: set[tuple[type[Resource], str | None, str]] = set()
        self._services = services
        self._object = resource
        # What the pass started from: status staged without a returned resource is applied
        # to a copy of it, and condition transitions are judged against it.
        self._original: T | None = original
        if resource is not None and original is None:
            self._original = resource.model_copy(deep=True)
        self._scratch: T | None = None
        self._staged = _Staged()

    # -- identity -------------------------------------------------------------------------

    @property
    def resource(self) -> T | None:
        """The working copy of the primary (None when absent)."""
        return self._object

    @property
    def object(self) -> T | None:
        """The current primary (the returned resource once the pass adopted it)."""
        return self._object

    @property
    def original(self) -> T | None:
        """The untouched snapshot the pass started from (do not modify it)."""
        return self._original

    @property
    def config(self) -> Config:
        return self._services.config

    @property
    def services(self) -> PassServices:
        return self._services

    def context(self) -> Context[T]:
        return Context(self)

    def use(self, resource: Any) -> None:
        self._object = resource

    # -- status -------------------------------------------------------------------------------

    @property
    def staged(self) -> bool:
        """Whether the pass staged status edits or conditions."""
        return bool(self._staged)

    def set_status(self, **changes: Any) -> None:
        """Stage validated status edits (python names or wire aliases)."""
        update_status(self._scratch_copy(), **changes)
        self._staged.status.update(changes)

    def condition(
        self,
        condition: str,
        status: ConditionStatus,
        *,
        reason: str,
        message: str = "",
        event: bool = False,
        warning: bool = False,
        action: str | None = None,
    ) -> None:
        """Stage a condition; with `event`, queue an Event if status or reason changed."""
        value: ConditionStatus = str(status) if isinstance(status, bool) else status  # type: ignore[assignment]
        set_condition(self._scratch_copy(), condition, value, reason=reason, message=message)
        self._staged.conditions[condition] = _Condition(value, reason, message)
        if event:
            original = self.original
            before = get_condition(original, condition) if original is not None else None
            if before is None or before.status != value or before.reason != reason:
                kind: EventType = "Warning" if warning else "Normal"
                self.record_event(reason, message or reason, type=kind, action=action)

    def apply_status(self, resource: T) -> T:
        """`resource` with every staged status edit and condition applied (in place)."""
        if self._staged.status:
            update_status(resource, **self._staged.status)
        for name, staged in self._staged.conditions.items():
            set_condition(
                resource, name, staged.status, reason=staged.reason, message=staged.message
            )
        return resource

    def _scratch_copy(self) -> T:
        if self._scratch is None:
            base = self.original if self.original is not None else self._object
            if base is None:
                raise RuntimeError("An absent object has no status to set")
            self._scratch = base.model_copy(deep=True)
        return self._scratch

    # -- events ---------------------------------------------------------------------------

    def record_event(
        self,
        reason: str,
        message: str,
        *,
        type: EventType = "Normal",
        action: str | None = None,
    ) -> None:
        """Queue an Event (sent after status persistence; at most 100 per pass)."""
        if type not in ("Normal", "Warning"):
            raise ValueError("Event type must be Normal or Warning")
        if not _REASON.fullmatch(reason or "") or len(reason) > 128:
            raise ValueError(
                f"Event reason {reason!r} must be an identifier of at most 128 characters"
            )
        if len(self.events) < MAX_EVENTS_PER_PASS:
            self.events.append(QueuedEvent(reason, message, type, action))

    def event(
        self, reason: str, message: str, *, type: EventType = "Normal", action: str | None = None
    ) -> None:
        self.record_event(reason, message, type=type, action=action)

    # -- API access ---------------------------------------------------------------------------

    def client(self, resource: type[U], *, namespace: str | None = None) -> ResourceClient[U]:
        """A live client of any kind, defaulting to this request's namespace."""
        return self.config.client(resource, namespace=namespace or self.key.namespace)

    def cached(self, resource: type[U]) -> CachedResources[U]:
        """Cached reads of a kind this controller watches (default: this namespace)."""
        cached: CachedResources[U] = self._services.cached(resource, namespace=self.key.namespace)
        return cached

    def ensure(self, desired: U) -> U:
        """Create or update a child controlled by this pass's primary (see `children`)."""
        from cloudcoil_sync.controller._internal.children import ensure_child

        return ensure_child(self, desired)

    def running(self) -> AbstractContextManager[Request[Any] | None]:
        """Make this the thread's active request (for `mutate` without config=)."""
        return _active.holding(self)


class Context(Generic[T]):
    """The `ctx` of `(resource, ctx)` handlers: one pass's helpers."""

    def __init__(self, request: Request[T]) -> None:
        self.request = request
        # Fixed for the pass (the resource is not: the pass may adopt a returned one).
        self.namespace: str | None = request.namespace
        self.config: Config = request.config

    @property
    def resource(self) -> T | None:
        return self.request.object

    @property
    def causes(self) -> tuple[Cause, ...]:
        """Why this pass runs: the causes of every event coalesced into it (empty outside a
        worker's pass). See docs/observability.md."""
        info = current()
        return info.causes if info is not None else ()

    @property
    def changes(self) -> tuple[Change, ...] | None:
        """What changed in the primary since its last successful pass (path, before, after),
        computed now; None when no earlier success is known (the first pass, or the first
        since the controller started keeping them: reading this starts it)."""
        info = current()
        if info is None or info.changes is None:
            return None
        found: tuple[Change, ...] | None = info.changes()
        return found

    # Change handlers and steps (handler_calls.py); outside one: 0, None, None, None, ().

    @property
    def retry(self) -> int:
        """Earlier failed attempts of the running change handler or step (0 on the first)."""
        call = current_call()
        return call.retry if call is not None else 0

    @property
    def reason(self) -> str | None:
        """Why the running handler runs: create, update, resume, delete, field or step."""
        call = current_call()
        return call.reason if call is not None else None

    @property
    def old(self) -> Any:
        """The essence (or field value) before the change being handled (None on create)."""
        call = current_call()
        return call.old if call is not None else None

    @property
    def new(self) -> Any:
        """The essence (or field value) the change being handled leads to."""
        call = current_call()
        return call.new if call is not None else None

    @property
    def diff(self) -> tuple[Change, ...]:
        """The changed fields of the change being handled (path, before, after)."""
        call = current_call()
        return call.diff if call is not None else ()

    def substeps(self, steps: Mapping[str, Callable[[], Any]]) -> None:
        """Run `steps` (id -> function) as independent sub-steps of the running handler,
        each with its own progress and retries; returns once every one succeeded."""
        call = current_call()
        if call is None or call.substeps is None:
            raise RuntimeError("ctx.substeps can only be called from a change handler or step")
        call.substeps(call, steps)

    def client(self, resource: type[U], *, namespace: str | None = None) -> ResourceClient[U]:
        """A live, uncached client sharing the operator's pool; default namespace: the
        request's."""
        return self.request.client(resource, namespace=namespace)

    def get(self, resource: type[U], name: str, *, namespace: str | None = None) -> U:
        """A live GET (raises `NotFound` if absent)."""
        return self.client(resource, namespace=namespace).get(name)

    def cached(self, resource: type[U]) -> CachedResources[U]:
        return self.request.cached(resource)

    def ensure(self, desired: U) -> U:
        """Create the child or patch the fields `desired` sets; returns the live child."""
        return self.request.ensure(desired)

    def set_status(self, **changes: Any) -> None:
        self.request.set_status(**changes)

    def condition(
        self, name: str, status: ConditionStatus, *, reason: str, message: str = ""
    ) -> None:
        """Stage a condition the handler owns (not `Ready` nor stage conditions)."""
        if name in self.request.report.reserved:
            raise ValueError(f"Condition '{name}' is managed by the controller")
        self.request.condition(name, status, reason=reason, message=message)

    def event(self, reason: str, message: str, *, type: EventType = "Normal") -> None:
        """Queue an Event about the primary, sent after its status is persisted."""
        self.request.record_event(reason, message, type=type)
