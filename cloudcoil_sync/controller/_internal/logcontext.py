"""The pass running on this thread (`PassInfo`), and the context it gives logs and spans.

`Workers` opens a `PassScopes.scope` around each pass: it sets the thread's current pass
(a `contextvars.ContextVar`: per thread, never leaking into another pass), binds the log
fields `pass_id`, `controller`, `kind`, `namespace`, `object_name` (`_internal.logfields`:
copied onto every record logged on that thread meanwhile, the handler's own `logging`
lines and the framework's), logs one debug line naming the causes, counts the pass by
cause kind, and opens the pass's span when tracing is on (its API requests are children).
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import operator
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync._internal import logfields, tracing
from cloudcoil_sync.controller._internal.causes import REQUEUE, TIMER, Cause, describe
from cloudcoil_sync.controller._internal.types import ResourceKey

__all__ = ["PassInfo", "PassScope", "PassScopes", "current", "requeue"]

_current: contextvars.ContextVar[PassInfo | None] = contextvars.ContextVar(
    "cloudcoil_sync_pass", default=None
)
_serial = itertools.count(1)
_PREFIX = f"{os.getpid():x}"
_KIND = operator.attrgetter("kind")


@dataclass(slots=True)
class PassInfo:
    """One pass: its id, object, causes, and (lazily) what changed since the last success."""

    id: str
    controller: str
    kind: str
    key: ResourceKey
    causes: tuple[Cause, ...]
    changes: Callable[[], Any] | None = None  # set by the reconciler: computed when called
    timer: bool = False  # the pass's requeue is `@reconcile(every=...)`'s
    written: Any = None  # the server's answer to the pass's write (the next changes' base)
    outcome: str | None = None


def current() -> PassInfo | None:
    """The pass running on this thread, if any."""
    return _current.get()


def requeue() -> Cause:
    """The cause of the requeue the pass on this thread asks for (`timer` or `requeue`)."""
    info = _current.get()
    return TIMER if info is not None and info.timer else REQUEUE


class PassScopes:
    """Opens the scope of each pass of one controller (see the module doc)."""

    def __init__(self, controller: str, kind: str, count: Callable[[str], None] | None) -> None:
        self._controller = controller
        self._kind = kind
        self._count = count
        self._log = logging.getLogger(f"cloudcoil_sync.controller.{controller}")

    def enter(self, key: ResourceKey, causes: tuple[Cause, ...]) -> PassScope:
        """The pass of `key` begins on this thread; `exit` it on the same thread."""
        info = PassInfo(f"{_PREFIX}-{next(_serial)}", self._controller, self._kind, key, causes)
        if self._count is not None:
            for kind in set(map(_KIND, causes)) or {"unknown"}:  # map: no setcomp call
                self._count(kind)
        return PassScope(info, self._log)


class PassScope:
    """One pass's log fields, current `PassInfo` and span, set until `exit`."""

    __slots__ = ("_fields", "_pass", "_span", "info")

    def __init__(self, info: PassInfo, log: logging.Logger) -> None:
        self.info = info
        key = info.key
        values = dict(
            pass_id=info.id,
            controller=info.controller,
            kind=info.kind,
            namespace=key.namespace,
            object_name=key.name,
        )
        self._pass = _current.set(info)
        self._fields = logfields.bind(values)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Pass %s for %s: %s", info.id, key, describe(info.causes))
        self._span: Any = None
        if tracing.enabled():
            self._span = tracing.span(f"reconcile {info.controller}", _attributes(info))
            self._span.__enter__()

    def exit(self, outcome: str) -> None:
        self.info.outcome = outcome
        try:
            if self._span is not None:
                current = tracing.current_span()
                current.set_attribute("cloudcoil.outcome", outcome)
                self._span.__exit__(None, None, None)
        finally:
            logfields.unbind(self._fields)
            _current.reset(self._pass)


def _attributes(info: PassInfo) -> dict[str, Any]:
    key = info.key
    return {
        "cloudcoil.pass_id": info.id,
        "cloudcoil.controller": info.controller,
        "k8s.kind": info.kind,
        "k8s.namespace.name": key.namespace or "",
        "k8s.object.name": key.name,
        "cloudcoil.causes": [str(cause) for cause in info.causes],
        "cloudcoil.cause_kinds": sorted({cause.kind for cause in info.causes}),
    }
