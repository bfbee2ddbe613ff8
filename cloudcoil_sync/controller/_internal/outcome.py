"""`Outcome`: what one reconcile pass came to, and nothing else.

The `Reconciler` returns one; `Workers.settle` is the one switch that turns it into queue
calls (controller-runtime's `reconcileHandler`). Neither the pass nor its hooks touch the
queue.

| kind            | the key                                     | metric result |
|-----------------|---------------------------------------------|---------------|
| `success`       | forgotten (backoff reset)                   | success       |
| `requeue_after` | forgotten, added again after the delay      | requeue_after |
| `error`         | retried with backoff                        | error         |
| `terminal`      | forgotten, not retried                      | error         |
| `fenced`        | retried (the term's fence refused a write)  | error         |
| `timed_out`     | retried (the pass outlived reconcile_timeout) | error       |
| `invalid`       | forgotten until the object changes          | (not counted) |
| `refused`       | looked at again shortly (not started)       | (not counted) |
| `stale`         | looked at again shortly (the cache lags)    | (not counted) |
| `abandoned`     | not settled here: the watchdog's releaser settles it | (not counted) |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Outcome", "OutcomeKind", "PassFenced", "PassTimedOut"]

OutcomeKind = Literal[
    "success",
    "requeue_after",
    "error",
    "terminal",
    "fenced",
    "timed_out",
    "invalid",
    "refused",
    "stale",
    "abandoned",
]


@dataclass(frozen=True)
class Outcome:
    """One pass's result: its kind, the delay of a scheduled look, what it wrote."""

    kind: OutcomeKind
    requeue_after: float | None = None
    error: BaseException | None = None
    wrote: bool = False
    written: tuple[str, ...] = ()  # JSON pointers written, only collected for debug logs

    def describe(self, seconds: float, *, absent: bool) -> str:
        """One debug line's worth: outcome, duration and what was written."""
        parts = [f"{self.kind} in {seconds * 1000:.1f} ms" + (" (object absent)" if absent else "")]
        if self.requeue_after is not None:
            parts.append(f"requeued after {self.requeue_after:g}s")
        if self.error is not None:
            parts.append(f"{type(self.error).__name__}: {self.error}")
        if self.written:
            parts.append(f"wrote {', '.join(self.written)}")
        elif self.error is None:
            parts.append("wrote" if self.wrote else "nothing to write")
        return ", ".join(parts)


class PassTimedOut(TimeoutError):
    """The pass outlived `reconcile_timeout`; whatever it returned was not written."""


class PassFenced(RuntimeError):
    """A write of the pass was refused for another cause than its own timeout: the term's
    fence closed (`cause`: renew_deadline, leadership_lost, shutdown)."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause
