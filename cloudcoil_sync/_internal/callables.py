"""Checks on user callables: every handler in cloudcoil_sync is a plain `def`.

Handlers run on worker threads (controllers) or the webhook's handler pool (admission), so a
coroutine function would return an un-awaited coroutine; it is refused at registration.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["function_name", "is_async", "parameters", "require_sync"]


def function_name(function: object) -> str:
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    return str(name) if name else repr(function)


def is_async(function: object) -> bool:
    """True for `async def` functions, async generators and objects with an async `__call__`."""
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        return True
    # A callable object whose __call__ is `async def`.
    call = type(function).__dict__.get("__call__")
    return not inspect.isfunction(function) and inspect.iscoroutinefunction(call)


def require_sync(function: object, what: str) -> None:
    """TypeError naming `function` unless it is a plain (non-async) callable."""
    if not callable(function):
        raise TypeError(f"{function!r}: {what} must be callable")
    if is_async(function):
        raise TypeError(
            f"{function_name(function)}: {what} must be synchronous; use def, not async def"
        )


def parameters(function: Any) -> list[inspect.Parameter]:
    """The declared parameters of `function` ([] when it has no inspectable signature)."""
    try:
        return list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []
