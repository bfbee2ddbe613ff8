"""Stages and first-match cases: the ordered shapes of a reconcile pass.

Two spellings share these rules. The decorator API (`@controller.stage(...)`,
`scope.case(...)`, `@controller.case(...)`) builds `StageScope`s and `Branches`
whose order must be a unique topological order. The low-level API builds
`Stages(Stage(...), ...)` and `Cases()` values passed as a controller's reconciler.
Everything here is definition only: nothing runs a handler except `select`, which
the worker calls during a pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name, parameters, require_sync
from cloudcoil_sync.controller._internal.reporting import READY, PassRequest, start_pass
from cloudcoil_sync.controller._internal.types import Result, TerminalError, Wait

__all__ = ["Branch", "Branches", "Cases", "Handler", "Stage", "StageScope", "Stages"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", bound=Resource)

_CONDITION = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")

Step = Callable[[Any], "Wait | None"]
"""A low-level stage step: `(request) -> None`, or return/raise `Wait`."""


def _arity(function: Callable[..., Any], *, predicate: bool = False) -> int:
    require_sync(function, "predicates" if predicate else "handlers")
    declared = parameters(function)
    if len(declared) not in (1, 2) or any(
        p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in declared
    ):
        raise TypeError(f"{function_name(function)}: use (resource) or (resource, ctx)")
    return len(declared)


def refs(value: object | tuple[object, ...] | None) -> tuple[object, ...]:
    """Normalise a `depends=`/`after=` value to a tuple of references."""
    if value is None:
        return ()
    return value if isinstance(value, tuple) else (value,)


class _Node(Protocol):
    @property
    def identity(self) -> object: ...

    @property
    def name(self) -> str: ...

    @property
    def dependencies(self) -> tuple[object, ...]: ...


N = TypeVar("N", bound=_Node)


def ordered(nodes: Sequence[N], *, label: str) -> list[N]:
    """Return the unique topological order of `nodes`; ambiguity is an error.

    A dependency may name a node by its identity (the handler function) or by the
    node itself (a `StageScope`). Registration order never breaks a tie.
    """
    known: dict[int, N] = {id(node.identity): node for node in nodes}
    if len(known) != len(nodes):
        raise ValueError(f"Duplicate {label} handler")
    known.update({id(node): node for node in nodes})
    for node in nodes:
        for dependency in node.dependencies:
            if id(dependency) not in known:
                raise ValueError(f"Unknown {label} dependency for {node.name}")
    remaining = list(nodes)
    done: set[int] = set()
    result: list[N] = []
    while remaining:
        ready = [n for n in remaining if all(id(d) in done for d in n.dependencies)]
        if not ready:
            raise ValueError(f"Cycle in {label} dependencies")
        if len(ready) != 1:
            names = ", ".join(n.name for n in ready)
            raise ValueError(f"Ambiguous {label} order: {names}; declare dependencies")
        node = ready[0]
        result.append(node)
        done.update((id(node.identity), id(node)))
        remaining.remove(node)
    return result


@dataclass(frozen=True)
class Handler:
    """A validated `(resource)` or `(resource, ctx)` function."""

    function: Callable[..., Any]
    arity: int

    @classmethod
    def build(cls, function: Callable[..., Any], *, predicate: bool = False) -> Handler:
        return cls(function, _arity(function, predicate=predicate))

    @property
    def name(self) -> str:
        return str(getattr(self.function, "__name__", "handler"))

    def call(self, resource: Any, context: Callable[[], Any]) -> Any:
        """Call with the resource, and a context built by `context()` if it asks for one."""
        if self.arity == 1:
            return self.function(resource)
        return self.function(resource, context())


@dataclass(frozen=True)
class Branch:
    """One `case`: a predicate, its handler and the cases it must follow."""

    handler: Handler
    predicate: Handler
    dependencies: tuple[object, ...]

    @property
    def identity(self) -> object:
        return self.handler.function

    @property
    def name(self) -> str:
        return self.handler.name


class Branches:
    """First-match cases with one mandatory `otherwise` fallback."""

    def __init__(self, check: Callable[[], None]) -> None:
        self._check = check
        self.branches: list[Branch] = []
        self.fallback: Handler | None = None
        self.order: list[Branch] | None = None

    def case(
        self, *, when: Callable[..., bool], after: object | tuple[object, ...] | None = None
    ) -> Callable[[F], F]:
        predicate = Handler.build(when, predicate=True)

        def register(function: F) -> F:
            self._check()
            self.branches.append(Branch(Handler.build(function), predicate, refs(after)))
            return function

        return register

    def otherwise(self) -> Callable[[F], F]:
        def register(function: F) -> F:
            self._check()
            if self.fallback is not None:
                raise ValueError("Only one otherwise handler may be registered")
            self.fallback = Handler.build(function)
            return function

        return register

    @property
    def populated(self) -> bool:
        return bool(self.branches or self.fallback)

    def validate(self, *, freeze: bool = False) -> list[Branch]:
        if self.fallback is None:
            raise ValueError("Cases require an otherwise handler")
        order = ordered(self.branches, label="case")
        if freeze:
            self.order = order
        return order

    def select(self, resource: Any, context: Callable[[], Any]) -> Handler:
        """Evaluate predicates lazily in order; the first `True` wins, else the fallback."""
        order = self.order if self.order is not None else self.validate()
        for branch in order:
            matches = branch.predicate.call(resource, context)
            if type(matches) is not bool:
                raise TypeError("Case predicates must return bool")
            if matches:
                return branch.handler
        assert self.fallback is not None
        return self.fallback


class StageScope(Generic[T]):
    """One stage, named by the condition it establishes: a handler or first-match cases.

    Created by `Controller.stage(...)`. Used as a decorator it registers the stage's
    handler and returns the function unchanged; used as a named scope it holds cases.
    """

    def __init__(
        self,
        check: Callable[[], None],
        name: str | None,
        condition: str,
        depends: object | tuple[object, ...] | None,
    ) -> None:
        if not isinstance(condition, str) or not _CONDITION.fullmatch(condition):
            raise ValueError("Stage condition must be an identifier other than Ready")
        if condition == "Ready":
            raise ValueError("Stage condition must be an identifier other than Ready")
        self._check = check
        self.name = name or condition
        self.condition = condition
        self.dependencies = refs(depends)
        self.handler: Handler | None = None
        self.identity: object = self
        self.branches = Branches(self._check_cases)

    def __call__(self, function: F) -> F:
        self._check()
        if self.handler is not None or self.branches.populated:
            raise ValueError("A stage has one handler or cases, not both")
        self.handler = Handler.build(function)
        self.identity = function
        return function

    def _check_cases(self) -> None:
        self._check()
        if self.handler is not None:
            raise ValueError("A stage has one handler or cases, not both")

    def case(
        self, *, when: Callable[..., bool], after: object | tuple[object, ...] | None = None
    ) -> Callable[[F], F]:
        return self.branches.case(when=when, after=after)

    def otherwise(self) -> Callable[[F], F]:
        return self.branches.otherwise()

    def validate(self, *, freeze: bool = False) -> None:
        if self.handler is None:
            self.branches.validate(freeze=freeze)

    def __repr__(self) -> str:
        return f"StageScope({self.name!r}, condition={self.condition!r})"


# Low-level constructor-style compositions.


@dataclass(frozen=True)
class Stage(Generic[T]):
    """An idempotent step named by the condition it establishes (low-level API)."""

    name: str
    run: Step

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _CONDITION.fullmatch(self.name):
            raise ValueError("Stage name must be an identifier of at most 128 characters")
        if self.name == "Ready":
            raise ValueError("Ready is reserved for the aggregate condition")
        if not callable(self.run):
            raise TypeError("Stage run must be a callable taking the Request")
        require_sync(self.run, "stage steps")


def _require_reconcile_status(resource: type[Resource], report_status: bool) -> None:
    if not report_status:
        return
    from cloudcoil_sync.controller._internal.status import ReconcileStatus

    model = declared_status(resource)
    if model is None or not issubclass(model, ReconcileStatus):
        raise TypeError("Stages need a ReconcileStatus subclass; use report_status=False otherwise")
    model()  # New objects need a status whose fields all have defaults.


def declared_status(resource: type[Resource]) -> type[Any] | None:
    """The pydantic model class declared for `resource.status`, if any."""
    from pydantic import BaseModel

    annotation = getattr(resource, "model_fields", {}).get("status")
    if annotation is None:
        return None
    candidates = (annotation.annotation, *getattr(annotation.annotation, "__args__", ()))
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


class Stages(Generic[T]):
    """Run low-level stages in the given order, stopping at the first `Wait` or failure.

    Every pass starts from the first stage: conditions are observations, never
    checkpoints that would skip repairing drift.
    """

    def __init__(self, *stages: Stage[T], report_status: bool = True) -> None:
        if not stages or any(not isinstance(stage, Stage) for stage in stages):
            raise ValueError("Stages requires one or more Stage values")
        if len({stage.name for stage in stages}) != len(stages):
            raise ValueError("Stage names must be unique")
        self.stages: tuple[Stage[T], ...] = stages
        self.report_status = report_status

    def freeze(self, resource: type[T]) -> None:
        _require_reconcile_status(resource, self.report_status)

    def __call__(self, request: PassRequest) -> Result | None:
        """Run every stage in order; stop at the first that waits."""
        names = [stage.name for stage in self.stages]
        if not start_pass(request, names, managed=self.report_status):
            return None
        for stage in self.stages:
            wait = run_step(request, stage)
            if wait is not None:
                return finish(request, wait)
        return finish(request)


@dataclass(frozen=True)
class LowLevelCase(Generic[T]):
    stage: Stage[T]
    when: Callable[[Any], bool]
    priority: int | None


class Cases(Generic[T]):
    """First-match cases registered on an instance before the controller starts.

    Without priorities, registration order is execution order; with priorities,
    every case needs a distinct integer priority (higher first). Predicates are
    synchronous, side-effect-free reads evaluated lazily.
    """

    def __init__(self, *, report_status: bool = True) -> None:
        self.report_status = report_status
        self.cases: list[LowLevelCase[T]] = []
        self.fallback: Stage[T] | None = None
        self.frozen = False

    def case(
        self, name: str, *, when: Callable[[Any], bool], priority: int | None = None
    ) -> Callable[[F], F]:
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ValueError("Case priority must be an integer")
        if not callable(when):
            raise TypeError("Case when must be a synchronous predicate")
        require_sync(when, "predicates")

        def register(run: F) -> F:
            self._check_name(name)
            if priority is not None and any(case.priority == priority for case in self.cases):
                raise ValueError("Case priorities must be unique; import order must not break ties")
            self.cases.append(LowLevelCase(Stage(name, run), when, priority))
            return run

        return register

    def otherwise(self, name: str) -> Callable[[F], F]:
        """Register the explicit fallback, which always follows every predicate."""

        def register(run: F) -> F:
            self._check_name(name)
            if self.fallback is not None:
                raise ValueError("Only one otherwise case may be registered")
            self.fallback = Stage(name, run)
            return run

        return register

    def _check_name(self, name: str) -> None:
        if self.frozen:
            raise RuntimeError("Register cases before running the controller")
        names = [case.stage.name for case in self.cases]
        if self.fallback is not None:
            names.append(self.fallback.name)
        if name in names:
            raise ValueError("Case names must be unique")

    def freeze(self, resource: type[T]) -> None:
        if self.frozen:
            return
        _require_reconcile_status(resource, self.report_status)
        if not self.cases and self.fallback is None:
            raise ValueError("Register at least one case")
        if any(case.priority is not None for case in self.cases):
            if any(case.priority is None for case in self.cases):
                raise ValueError("Give every case a priority, or use registration order throughout")
            self.cases.sort(key=lambda case: case.priority or 0, reverse=True)
        self.frozen = True

    def __call__(self, request: PassRequest) -> Result | None:
        """Run the first case whose predicate holds (else the fallback); report on Ready."""
        if request.resource is None:
            return None
        self.freeze(type(request.object))
        names = [case.stage.name for case in self.cases]
        if self.fallback is not None:
            names.append(self.fallback.name)
        if not start_pass(request, names, managed=self.report_status, stage_conditions=False):
            return None
        selected = self.fallback
        for case in self.cases:
            # A failing predicate is reported against its case.
            request.report.pending = [case.stage.name, *(n for n in names if n != case.stage.name)]
            if _matches(case.when, request):
                selected = case.stage
                break
        if selected is None:
            raise TerminalError(
                "No case matched; register an otherwise handler if this is expected"
            )
        request.report.pending = [selected.name]
        return finish(request, run_step(request, selected))

    def select(self, request: Any) -> Stage[T] | None:
        """The first case whose predicate holds for `request`, else the fallback (may be None)."""
        for case in self.cases:
            if _matches(case.when, request):
                return case.stage
        return self.fallback


def _matches(predicate: Callable[[Any], bool], request: Any) -> bool:
    matches = predicate(request)
    if type(matches) is not bool:
        raise TypeError("Case predicates must return bool and must not perform I/O")
    return matches


def run_step(request: PassRequest, stage: Stage[Any]) -> Wait | None:
    """Run one low-level step and report its condition (on Ready for cases)."""
    report = request.report
    report.action = stage.name
    try:
        result = stage.run(request)
    except Wait as wait:
        result = wait
    if result is not None and not isinstance(result, Wait):
        raise TypeError("A stage must return None (continue) or Wait (stop this pass)")
    if report.managed:
        own = report.stage_conditions
        if result is not None:
            reason, message = result.reason, result.message
        else:
            reason, message = ("Reconciled" if own else stage.name), f"{stage.name} is up to date"
        request.condition(
            stage.name if own else READY,
            result is None,
            reason=reason,
            message=message,
            event=True,
            action=stage.name,
        )
        if result is not None and own:
            for pending in report.pending[1:]:
                request.condition(pending, "Unknown", reason="DependencyNotReady")
            request.condition(READY, False, reason=result.reason, message=result.message)
    if result is None:
        report.pending.pop(0)
    return result


def finish(request: PassRequest, wait: Wait | None = None) -> Result:
    """The low-level pass's result: persist the current object; requeue after a wait."""
    report = request.report
    if wait is None and report.managed and report.stage_conditions:
        request.condition(
            READY, True, reason="Reconciled", message="All required work is current", event=True
        )
    return Result(resource=request.object, requeue_after=wait.requeue_after if wait else None)
