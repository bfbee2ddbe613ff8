"""Lifespans: setup and cleanup around the whole process or around leadership.

A lifespan is a generator function that yields exactly once:

```python
@app.lifespan(scope="leader")
def connections(event: LifecycleEvent):
    pool = open_pool()
    try:
        yield
    finally:
        pool.close()   # event.type tells shutdown, leadership loss and failure apart
```
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, TypeVar

from cloudcoil_sync._internal.callables import function_name
from cloudcoil_sync.controller import LeadershipLost

__all__ = ["LifecycleEvent", "LifecycleType", "Lifespans"]

LifespanScope = Literal["process", "leader"]
F = TypeVar("F", bound=Callable[..., Any])


class LifecycleType(StrEnum):
    STARTUP = "startup"
    LEADERSHIP_ACQUIRED = "leadership_acquired"
    SHUTDOWN = "shutdown"
    LEADERSHIP_LOST = "leadership_lost"
    FAILURE = "failure"


@dataclass
class LifecycleEvent:
    """The event passed to a lifespan; `type`/`error` are updated before its cleanup runs.

    Entry types are STARTUP (process) and LEADERSHIP_ACQUIRED (leader); at exit the
    type becomes SHUTDOWN, LEADERSHIP_LOST or FAILURE. `identity` is the leader
    election identity when election is configured.
    """

    type: LifecycleType
    scope: LifespanScope
    identity: str | None = None
    error: BaseException | None = None


class Lifespans:
    """At most one lifespan per scope, registered before the application runs."""

    def __init__(self, check: Callable[[], None]) -> None:
        self.check = check
        self.handlers: dict[str, tuple[Callable[..., Iterator[Any]], bool]] = {}

    def register(self, *, scope: LifespanScope = "process") -> Callable[[F], F]:
        if scope not in ("process", "leader"):
            raise ValueError("Lifespan scope must be process or leader")

        def register(handler: F) -> F:
            self.check()
            if scope in self.handlers:
                raise ValueError(
                    f"Only one {scope} lifespan; compose resources with a with statement"
                )
            if inspect.iscoroutinefunction(handler) or inspect.isasyncgenfunction(handler):
                raise TypeError(
                    f"{function_name(handler)}: lifespans must be generator functions; "
                    "use def with one yield, not async def"
                )
            parameters = list(inspect.signature(handler).parameters.values())
            if (
                not inspect.isgeneratorfunction(handler)
                or len(parameters) > 1
                or any(
                    p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters
                )
            ):
                raise TypeError(
                    "Lifespan must be a generator function taking optional LifecycleEvent"
                )
            self.handlers[scope] = (handler, bool(parameters))
            return handler

        return register

    def __contains__(self, scope: object) -> bool:
        return scope in self.handlers

    @contextmanager
    def enter(self, scope: LifespanScope, identity: str | None = None) -> Iterator[LifecycleEvent]:
        """Run the scope's lifespan around the block; yields its (live) event.

        Inside the block the caller may set `event.type`/`event.error` (e.g. to
        LEADERSHIP_LOST after stopping leader work); otherwise an exception sets
        FAILURE (LEADERSHIP_LOST for `LeadershipLost`, SHUTDOWN for
        KeyboardInterrupt/SystemExit) and a normal exit sets SHUTDOWN.
        """
        entry = LifecycleType.STARTUP if scope == "process" else LifecycleType.LEADERSHIP_ACQUIRED
        event = LifecycleEvent(entry, scope, identity)
        registered = self.handlers.get(scope)
        if registered is None:
            yield event
            return
        handler, accepts_event = registered
        failure: BaseException | None = None
        with contextmanager(handler)(*([event] if accepts_event else [])):
            try:
                yield event
            except BaseException as error:
                failure = error
                _classify(event, error)
                raise
            finally:
                if event.type is entry:
                    event.type = LifecycleType.SHUTDOWN
        if failure is not None:
            raise failure  # A lifespan must not swallow the failure it observed.


def _classify(event: LifecycleEvent, error: BaseException) -> None:
    if event.type not in (LifecycleType.STARTUP, LifecycleType.LEADERSHIP_ACQUIRED):
        return  # The caller already recorded the outcome.
    if isinstance(error, LeadershipLost):
        event.type, event.error = LifecycleType.LEADERSHIP_LOST, error
    elif isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit):
        event.type, event.error = LifecycleType.SHUTDOWN, None
    else:
        event.type, event.error = LifecycleType.FAILURE, error
