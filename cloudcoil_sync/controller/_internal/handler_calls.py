"""The change handler or step running on this thread (`HandlerCall`), and its errors.

`Context.retry`, `.reason`, `.old`, `.new`, `.diff` and `.substeps` read the call set here
by the runner (`handler_runs.py`) around each call: a `contextvars.ContextVar`, per thread,
never leaking into another pass.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync._internal.numbers import is_number
from cloudcoil_sync.controller._internal.changes import Change

__all__ = ["HandlerCall", "TemporaryError", "call_scope", "current_call"]


class TemporaryError(Exception):
    """A failure worth retrying: the handler or step runs again after `delay` seconds
    (default: its `backoff=`), counting one retry against its `retries=`."""

    def __init__(self, message: str = "", *, delay: float | None = None) -> None:
        if delay is not None and (not is_number(delay) or delay < 0):
            raise ValueError("TemporaryError delay must be finite and nonnegative")
        super().__init__(message)
        self.delay = None if delay is None else float(delay)


@dataclass(frozen=True)
class HandlerCall:
    """One call of a change handler or step.

    `reason`: create, update, resume, delete, field or step; `retry`: how many earlier
    attempts of this handler failed for this change (0 on the first); `started`: when the
    first attempt began (epoch seconds); `old`/`new`/`diff`: what changed (for `field`, the
    field's values); `substeps`: the runner's, for `ctx.substeps`.
    """

    id: str
    reason: str
    retry: int
    started: float
    old: Any = None
    new: Any = None
    diff: tuple[Change, ...] = ()
    substeps: Callable[[HandlerCall, Mapping[str, Callable[[], Any]]], None] | None = None


_current: contextvars.ContextVar[HandlerCall | None] = contextvars.ContextVar(
    "cloudcoil_sync_handler_call", default=None
)


def current_call() -> HandlerCall | None:
    """The change handler or step running on this thread, if any."""
    return _current.get()


@contextmanager
def call_scope(call: HandlerCall) -> Iterator[HandlerCall]:
    token = _current.set(call)
    try:
        yield call
    finally:
        _current.reset(token)
