"""What a reconcile pass reports: stage conditions, `Ready`, Events and failures.

The policy of cloudcoil 0.8, independent of how a pass stages status or sends Events.
The runtime's per-pass request object implements `PassRequest` (staging validated
status edits, conditions with transition Events, queued Events); the dispatchers
(`Registry.run`, `Stages`, `Cases`) and the worker's failure hook call the functions
here, so every pass reports the same way:

- each stage that completes sets its condition True, reason `Reconciled` (or the
  selected case's function name), message "<action> is up to date", with an Event on
  a transition; after the last stage `Ready` is True;
- a stage that waits sets its condition False with the wait's reason and message,
  later stages Unknown/`DependencyNotReady`, and `Ready` False with the wait reason;
- a failure sets the running stage False (`ReconcileFailed`, or `TerminalError`),
  later stages Unknown and `Ready` False, with a message naming only the stage and
  the exception type (never its text: it may hold secrets);
- without status reporting, outcomes become Events only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from cloudcoil_sync.controller._internal.types import TerminalError, Wait

__all__ = [
    "PassReport",
    "PassRequest",
    "report_failure",
    "report_outcome",
    "start_pass",
]

READY = "Ready"
ConditionStatus = bool | Literal["True", "False", "Unknown"]


@dataclass
class PassReport:
    """Per-pass reporting state, owned by the pass's request."""

    managed: bool = False
    """Whether conditions are written to status (`report_status`)."""
    stage_conditions: bool = True
    """Stages report their own condition; False: the single outcome goes on `Ready`."""
    pending: list[str] = field(default_factory=list)
    """Conditions (or action names) not yet established, the running one first."""
    reserved: set[str] = field(default_factory=set)
    """Condition types the controller manages; handlers may not set them."""
    action: str = ""
    """The running stage or handler name (the Event `action`)."""


class PassRequest(Protocol):
    """What the dispatchers need of the runtime's per-pass request."""

    report: PassReport

    @property
    def resource(self) -> Any:
        """The working copy of the primary, or None when absent."""

    @property
    def object(self) -> Any:
        """The current primary object (the returned resource once `use` adopted it)."""

    def context(self) -> Any:
        """The `ctx` passed to `(resource, ctx)` handlers."""

    def use(self, resource: Any) -> None:
        """Adopt a resource the reconcile handler returned as the pass's current object."""

    def set_status(self, **changes: Any) -> None:
        """Stage validated status edits (kept even if the pass later fails)."""

    def condition(self, *args: Any, **options: Any) -> None:
        """Stage a condition: `context.Request.condition(condition, status, reason=...)`."""

    def record_event(
        self,
        reason: str,
        message: str,
        *,
        type: Literal["Normal", "Warning"] = "Normal",
        action: str | None = None,
    ) -> None:
        """Queue an Event, sent after status persistence."""


def start_pass(
    request: PassRequest,
    names: list[str],
    *,
    managed: bool,
    stage_conditions: bool = True,
    reserve: bool = False,
) -> bool:
    """Prepare the report; False when there is nothing to run (absent or deleting object).

    With `reserve` (decorated controllers), `Ready` and `names` become controller-managed
    conditions while reporting.
    """
    obj = request.resource
    metadata = getattr(obj, "metadata", None)
    if obj is None or (metadata is not None and metadata.deletion_timestamp):
        return False
    report = request.report
    report.managed = managed
    report.stage_conditions = stage_conditions
    report.pending = list(names)
    report.reserved = {READY, *names} if managed and reserve else set()
    if managed:
        request.set_status(observed_generation=metadata.generation if metadata else None)
    return True


def report_outcome(
    request: PassRequest, condition: str, *, wait: Wait | None = None, reason: str = "Reconciled"
) -> None:
    """Report one stage (or, with `condition="Ready"`, the whole pass) as done or waiting."""
    report = request.report
    message = wait.message if wait else f"{report.action} is up to date"
    reason = wait.reason if wait else reason
    if not report.managed:
        request.record_event(reason, message, action=report.action)
        return
    request.condition(
        condition, wait is None, reason=reason, message=message, event=True, action=report.action
    )
    if wait is None:
        return
    for pending in report.pending[1:]:
        request.condition(pending, "Unknown", reason="DependencyNotReady")
    if condition != READY:
        request.condition(READY, False, reason=reason, message=message)


def report_failure(request: PassRequest, error: BaseException) -> None:
    """Report a failed pass: stable, non-sensitive details on the running stage and Ready."""
    report = request.report
    name = report.pending[0] if report.pending else "Reconcile"
    reason = "TerminalError" if isinstance(error, TerminalError) else "ReconcileFailed"
    message = f"{name} failed ({type(error).__name__}); see controller logs"
    if not report.managed:
        if report.pending:
            request.record_event(reason, message, type="Warning", action=name)
        return
    if report.pending and report.stage_conditions:
        request.condition(name, False, reason=reason, message=message, event=True, warning=True)
        for pending in report.pending[1:]:
            request.condition(pending, "Unknown", reason="DependencyNotReady")
    request.condition(
        READY,
        False,
        reason=reason,
        message=message,
        event=not report.stage_conditions,
        warning=True,
        action=name,
    )
