"""`ThreadSlot`: one value per thread, set for the span of a `with` block.

What a piece of work installs for the code it calls on its thread without passing it down
(the client's write gate, the pass's active `Request`): the previous value comes back when
the block ends, so slots nest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
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

    @contextmanager
    def holding(self, value: T | None) -> Iterator[T | None]:
        """This thread's value is `value` inside the block, the previous one after it."""
        local = self._local
        previous = getattr(local, "value", None)
        local.value = value
        try:
            yield value
        finally:
            local.value = previous
