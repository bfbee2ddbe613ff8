"""`ThreadSlot`: one value per thread, set for the span of a `with` block.

What a piece of work installs for the code it calls on its thread without passing it down
(the client's write gate, the pass's active `Request`): the previous value comes back when
the block ends, so slots nest.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

__all__ = ["ThreadSlot"]

T = TypeVar("T")


class ThreadSlot(Generic[T]):
    """A per-thread value (None until set on that thread)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self) -> T | None:
        value: T | None = getattr(self._local, "value", None)
        return value

    def holding(self, value: T | None) -> AbstractContextManager[T | None]:
        """This thread's value is `value` inside the block, the previous one after it."""
        # Built without calling __init__ (object.__new__ is C): several per request.
        holding: _Holding[T] = object.__new__(_Holding)
        holding._local, holding._value = self._local, value
        return holding


class _Holding(Generic[T]):
    # A class, not @contextmanager: several are entered per request on the hot path.
    __slots__ = ("_local", "_previous", "_value")

    _local: threading.local
    _value: T | None

    def __enter__(self) -> T | None:
        local = self._local
        self._previous = getattr(local, "value", None)
        local.value = self._value
        return self._value

    def __exit__(self, *exc_info: object) -> None:
        self._local.value = self._previous
