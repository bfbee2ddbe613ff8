"""Fields every log line of the current pass carries (set per thread by the controller).

`bound(fields)` sets them for the calling thread (a `contextvars.ContextVar`: a pass never
sees another's); `ContextFilter`, which `logs.configure` installs on its handler, copies them
onto each record (never replacing a field a caller passed with `extra=`). Add it to your own
handlers when you configure logging yourself: `handler.addFilter(ContextFilter())`.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["ContextFilter", "bind", "bound", "fields", "unbind"]

_fields: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "cloudcoil_sync_log_fields", default=None
)


def fields() -> Mapping[str, Any] | None:
    """The fields bound on this thread, if any."""
    return _fields.get()


Token = contextvars.Token


def bind(values: Mapping[str, Any]) -> Token[Mapping[str, Any] | None]:
    """Bind `values` on this thread until `unbind` (on the same thread)."""
    return _fields.set(values)


def unbind(token: Token[Mapping[str, Any] | None]) -> None:
    _fields.reset(token)


@contextmanager
def bound(values: Mapping[str, Any]) -> Iterator[None]:
    token = _fields.set(values)
    try:
        yield
    finally:
        _fields.reset(token)


class ContextFilter(logging.Filter):
    """Adds the bound fields (`pass_id`, `controller`, `kind`, `namespace`, `object_name`
    during a reconcile pass) to each record; drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        values = _fields.get()
        if values:
            present = record.__dict__
            for key, value in values.items():
                if key not in present:
                    present[key] = value
        return True
