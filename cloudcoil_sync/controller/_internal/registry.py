"""The decorated handlers of one controller, validated and frozen before it runs.

A `Registry` records what `@controller.reconcile()`, `.stage()`, `.case()`,
`.otherwise()` and `.finalize()` declare. Registration runs no handler code and
does no I/O; `validate(freeze=True)` checks the completed definition once (one
entrypoint, unique stage conditions and names, a unique topological order, a
fallback for cases, a `ReconcileStatus` when reporting) and then refuses changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.numbers import is_number
from cloudcoil_sync.controller._internal.change_handlers import ChangeHandlers, carry_annotations
from cloudcoil_sync.controller._internal.logcontext import current
from cloudcoil_sync.controller._internal.progress import FINALIZER, ProgressStorage
from cloudcoil_sync.controller._internal.raw_events import RawEvents
from cloudcoil_sync.controller._internal.reporting import (
    READY,
    PassRequest,
    report_outcome,
    start_pass,
)
from cloudcoil_sync.controller._internal.stages import (
    Branches,
    Handler,
    StageScope,
    declared_status,
    ordered,
)
from cloudcoil_sync.controller._internal.types import Result, Wait, interpret

__all__ = ["Finalizer", "Registry", "positive"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", bound=Resource)


def positive(setting: str, value: float | None) -> None:
    """`ValueError` naming `setting` unless `value` is None or a finite number above 0."""
    if value is not None and not (is_number(value) and value > 0):
        raise ValueError(f"{setting} must be finite and positive, got {value!r}")


class Finalizer:
    """A finalizer key and the cleanup handler that must succeed before it is removed."""

    def __init__(self, key: str, handler: Handler) -> None:
        self.key = key
        self.handler = handler

    def __repr__(self) -> str:
        return f"Finalizer({self.key!r}, {self.handler.name})"


def reports_status(resource: type[Resource]) -> bool:
    """Whether `resource.status` is declared as a `ReconcileStatus` subclass."""
    from cloudcoil_sync.controller._internal.status import ReconcileStatus

    model = declared_status(resource)
    return model is not None and issubclass(model, ReconcileStatus)


class Registry(Generic[T]):
    """Decorated handlers for one primary kind."""

    def __init__(
        self,
        resource: type[T],
        report_status: bool | None = None,
        *,
        progress: ProgressStorage = "annotations",
    ) -> None:
        self.resource = resource
        self.handler: Handler | None = None
        self.every: float | None = None
        self.stages: list[StageScope[T]] = []
        self.branches = Branches(self.check)
        self.finalizer: Finalizer | None = None
        self.changes = ChangeHandlers(resource, self.check, progress)  # on_create ..., steps
        self.raw_events = RawEvents(resource, self.check)  # on_event
        self.frozen = False
        self.order: list[StageScope[T]] = []
        self.report_status = reports_status(resource) if report_status is None else report_status

    def check(self) -> None:
        if self.frozen:
            raise RuntimeError("Register handlers before running the controller")

    @property
    def populated(self) -> bool:
        """Whether any decorated entrypoint or finalizer is registered."""
        return bool(
            self.handler
            or self.stages
            or self.branches.populated
            or self.finalizer
            or self.changes.populated
            or self.raw_events.populated
        )

    @property
    def entrypoint(self) -> bool:
        """Whether a reconcile, stages or cases are registered (not only change handlers)."""
        return bool(self.handler or self.stages or self.branches.populated)

    def reconcile(self, *, every: float | None = None) -> Callable[[F], F]:
        positive("every", every)

        def register(function: F) -> F:
            self.check()
            if self.handler is not None:
                raise ValueError("Only one reconcile handler may be registered")
            self.handler = Handler.build(function)
            self.every = None if every is None else float(every)
            return function

        return register

    def add_stage(self, name: str | None, condition: str, depends: object) -> StageScope[T]:
        """`Controller.stage`: a new stage scope, in registration order."""
        self.check()
        scope: StageScope[T] = StageScope(self.check, name, condition, depends)
        self.stages.append(scope)
        return scope

    def finalize(self, key: str) -> Callable[[F], F]:
        if not isinstance(key, str) or "/" not in key:
            raise ValueError("Use a qualified finalizer name such as example.com/cleanup")

        def register(function: F) -> F:
            self.check()
            if self.finalizer is not None:
                raise ValueError("Use one finalizer handler and compose cleanup explicitly")
            self.finalizer = Finalizer(key, Handler.build(function))
            return function

        return register

    def validate(self, *, freeze: bool = False) -> list[StageScope[T]]:
        """Check the whole definition; return stages in execution order."""
        if self.frozen:
            return self.order
        entrypoints = bool(self.handler) + bool(self.stages) + self.branches.populated
        sugar = self.changes.populated or self.raw_events.populated
        if entrypoints > 1 or (entrypoints == 0 and not sugar):
            raise ValueError(
                "Register exactly one entrypoint: reconcile, stages, or cases "
                "(or only change handlers, steps and event handlers)"
            )
        self._changes_finalizer()
        if self.changes.populated and self.changes.storage == "status":
            _require_progress_field(self.resource)
        if self.report_status and entrypoints:
            if not reports_status(self.resource):
                raise TypeError("Automatic reporting requires a ReconcileStatus subclass")
            model = declared_status(self.resource)
            assert model is not None
            model()  # A new object's status must be constructible from defaults.
        conditions = [stage.condition for stage in self.stages]
        if len(set(conditions)) != len(conditions):
            raise ValueError("Stage conditions must be unique")
        if len({stage.name for stage in self.stages}) != len(self.stages):
            raise ValueError("Stage names must be unique")
        order = ordered(self.stages, label="stage")
        for stage in order:
            stage.validate(freeze=freeze)
        if self.branches.populated:
            self.branches.validate(freeze=freeze)
        if freeze:
            self.order = order
            self.frozen = True
        return order

    def _changes_finalizer(self) -> None:
        """Delete handlers that require a finalizer run as its cleanup."""
        if not self.changes.finalizer_needed:
            return
        if self.finalizer is not None and self.finalizer.key != FINALIZER:
            raise ValueError(
                "on_delete handlers and @controller.finalize cannot be combined: "
                "use on_delete(requires_finalizer=True) for every cleanup"
            )
        self.finalizer = Finalizer(FINALIZER, self.changes.finalizer_handler())

    # The pass --------------------------------------------------------------------------

    def run(self, request: PassRequest) -> Any:
        """One decorated pass over `request` (after the runtime's finalizer step).

        Absent and deleting objects are skipped. Returns what the worker interprets: the
        reconcile handler's value, a `Result` for waits and `every`, or None. Status the
        pass staged on `request` is the runtime's to persist with it.
        """
        order = self.validate(freeze=True)
        handled = self.changes.run(request) if self.changes.populated else None
        if not self.entrypoint:
            return handled
        return merged(self._run_entrypoint(request, order), handled)

    def _run_entrypoint(self, request: PassRequest, order: list[StageScope[T]]) -> Any:
        names = [stage.condition for stage in order] if order else ["Reconcile"]
        if not start_pass(
            request, names, managed=self.report_status, stage_conditions=bool(order), reserve=True
        ):
            return None
        if order:
            return self._run_stages(request, order)
        return self._run_single(request)

    def _run_stages(self, request: PassRequest, order: list[StageScope[T]]) -> Result | None:
        report = request.report
        for stage in order:
            report.action = stage.name
            try:
                returned = _called(stage.handler, stage.branches, request)
                if returned is not None:
                    raise TypeError("Stage handlers return None, or raise Wait")
            except Wait as wait:
                report_outcome(request, stage.condition, wait=wait)
                return Result(requeue_after=wait.requeue_after)
            reason = "Reconciled" if stage.handler is not None else report.action
            report_outcome(request, stage.condition, reason=reason)
            report.pending.pop(0)
        report_outcome(request, READY)
        return None

    def _run_single(self, request: PassRequest) -> Any:
        report = request.report
        report.action = "Reconcile"
        try:
            returned = _called(self.handler, self.branches, request)
            if returned is not None and not isinstance(returned, self.resource | Result):
                raise TypeError("Reconcile handlers return their resource, Result, or None")
        except Wait as wait:
            report_outcome(request, READY, wait=wait)
            return Result(requeue_after=wait.requeue_after)
        desired = returned.resource if isinstance(returned, Result) else returned
        if isinstance(desired, self.resource):
            request.use(desired)
            if self.report_status:
                metadata = desired.metadata
                request.set_status(observed_generation=metadata.generation if metadata else None)
        reason = "Reconciled" if self.handler is not None else report.action
        report_outcome(request, READY, reason=reason)
        report.pending.clear()
        if self.every is not None and not (
            isinstance(returned, Result) and returned.requeue_after is not None
        ):
            info = current()
            if info is not None:
                info.timer = True  # the next pass's cause: `timer`
            return Result(resource=desired, requeue_after=self.every)
        return returned


def _require_progress_field(resource: type[Resource]) -> None:
    model = declared_status(resource)
    if model is None or not (
        "progress" in model.model_fields or model.model_config.get("extra") == "allow"
    ):
        raise TypeError(
            f"progress='status' needs a status model on {resource.__name__} with a "
            "`progress` field (dict) or extra='allow'"
        )


def merged(value: Any, handled: Result | None) -> Any:
    """The entrypoint's value with what change handlers and steps wrote and asked for."""
    if handled is None:
        return value
    desired, requeue_after = interpret(value)
    ours = handled.resource
    if ours is not None and desired is None:
        desired = ours
    elif ours is not None and desired is not ours and desired is not None:
        carry_annotations(ours, desired)
    delays = [d for d in (requeue_after, handled.requeue_after) if d is not None]
    return Result(requeue_after=min(delays) if delays else None, resource=desired)


def _called(handler: Any, branches: Any, request: PassRequest) -> Any:
    """Call the scope's handler (or the case its branches select) as the report's action;
    a returned `Wait` is raised, as if the handler had raised it."""
    chosen = handler or branches.select(request.object, request.context)
    request.report.action = chosen.name
    returned = chosen.call(request.object, request.context)
    if isinstance(returned, Wait):
        raise returned
    return returned
