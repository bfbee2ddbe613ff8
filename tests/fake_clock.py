"""A monotonic clock that moves only when a test says (queues, runtimes, deadlines)."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
