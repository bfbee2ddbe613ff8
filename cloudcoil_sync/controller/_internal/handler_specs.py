"""`HandlerSpec`: one change handler or step as registered (`@controller.on_create()` ...).

Registration runs no handler code and does no I/O; the options are checked at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync._internal.numbers import is_number
from cloudcoil_sync.controller._internal.stages import Handler

__all__ = ["REASONS", "HandlerSpec", "build_spec", "field_path"]

REASONS = ("create", "update", "resume", "delete", "field", "step")
DEFAULT_BACKOFF = 60.0  # kopf's execution.default_backoff
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True)
class HandlerSpec:
    """A handler, why it runs (`reason`) and how it is retried."""

    id: str
    reason: str
    handler: Handler
    field: tuple[str, ...] = ()
    retries: int | None = None
    backoff: float = DEFAULT_BACKOFF
    timeout: float | None = None
    when: Handler | None = None
    requires_finalizer: bool = True

    @property
    def changes(self) -> bool:
        """A change handler (its progress lasts until the change is handled)."""
        return self.reason != "step"


def field_path(field: object) -> tuple[str, ...]:
    """`spec.replicas` as ("spec", "replicas"); refused when empty or malformed."""
    if not isinstance(field, str) or not field or any(not part for part in field.split(".")):
        raise ValueError(f"field must be a dotted path such as 'spec.replicas', got {field!r}")
    return tuple(field.split("."))


def _seconds(name: str, value: object, *, zero: bool) -> float | None:
    if value is None:
        return None
    if not (is_number(value) and (value > 0 or (value == 0 and zero))):
        raise ValueError(f"{name} must be a finite {'nonnegative' if zero else 'positive'} number")
    return float(value)


def build_spec(
    reason: str,
    function: Callable[..., Any],
    *,
    id: str | None = None,
    field: tuple[str, ...] = (),
    retries: int | None = None,
    backoff: float | None = None,
    timeout: float | None = None,
    when: Callable[..., bool] | None = None,
    requires_finalizer: bool = True,
) -> HandlerSpec:
    name = id if id is not None else str(getattr(function, "__name__", "handler"))
    if not isinstance(name, str) or not _ID.match(name):
        raise ValueError(
            f"Handler id {name!r} must be 1-63 letters, digits, '_', '-' or '.' "
            "(pass id= for a lambda)"
        )
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or retries < 1
    ):
        raise ValueError("retries must be a positive integer (attempts before giving up)")
    chosen_backoff = _seconds("backoff", backoff, zero=True)
    return HandlerSpec(
        id=name,
        reason=reason,
        handler=Handler.build(function),
        field=field,
        retries=retries,
        backoff=DEFAULT_BACKOFF if chosen_backoff is None else chosen_backoff,
        timeout=_seconds("timeout", timeout, zero=False),
        when=None if when is None else Handler.build(when, predicate=True),
        requires_finalizer=bool(requires_finalizer),
    )
