"""The write gate: the one hook the transport calls before it sends a write.

Whoever runs work on a thread may install a gate for that thread (`fenced(gate)`); every
non-read request the thread sends through any client is then sent inside
`gate.write(method, path)`, which may refuse it by raising `WriteFenced` (nothing reaches the
API server) or track it while it is on the wire, and may refuse each attempt to send it (a
retry after backoff, one after a wait for the client's rate limiter) through the `Recheck` it
yields. The transport also arms that `Recheck` around each attempt (`armed`): the pool's
connections call it (`check_armed`) right before they write the request's bytes, so a write
that passed the check before connecting, building its headers or a stop of the process
(SIGSTOP) is refused when it would leave after the gate closed. The client knows nothing
else of the gate: what opens and closes it, and why, belongs to whoever installed it (the
controller's `WriteFence`, `cloudcoil_sync.controller._internal.fence`). Reads are never
gated.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from cloudcoil_sync._internal.slots import ThreadSlot
from cloudcoil_sync.client._internal.errors import ClientError

__all__ = [
    "READ_METHODS",
    "Recheck",
    "WriteFenced",
    "WriteGate",
    "armed",
    "check_armed",
    "current",
    "fenced",
]

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class WriteFenced(ClientError):
    """A write was refused unsent by the gate installed on its thread.

    `cause` is the gate's word for why (the controller's fences say ``timeout`` for a pass
    past `reconcile_timeout`, ``renew_deadline``, ``leadership_lost``, ``shutdown``, or
    ``abandoned`` when unspecified).
    """

    def __init__(self, message: str, cause: str = "abandoned") -> None:
        super().__init__(message)
        self.cause = cause


#: What a gate's `write` may yield: called before each attempt to send the admitted write
#: (the first, and a retry after backoff or a wait for the rate limiter, which may outlast
#: the gate), it raises `WriteFenced` once the write may no longer leave.
Recheck = Callable[[], None]


class WriteGate(Protocol):
    """What the transport asks of an installed gate."""

    def write(self, method: str, path: str) -> AbstractContextManager[Recheck | None]:
        """Admit one write for its duration, or raise `WriteFenced` to refuse it; yield
        None, or a `Recheck` the transport calls before each attempt to send it."""


_installed: ThreadSlot[WriteGate] = ThreadSlot()


def current() -> WriteGate | None:
    """The gate installed on this thread, if any."""
    return _installed.get()


def fenced(fence: WriteGate | None) -> AbstractContextManager[WriteGate | None]:
    """Send this thread's writes through `fence` (a `WriteGate`; None: ungated) inside the
    block; the previous gate is restored after it."""
    return _installed.holding(fence)


_armed: ThreadSlot[Recheck] = ThreadSlot()


def armed(recheck: Recheck | None) -> AbstractContextManager[Recheck | None]:
    """Inside the block, `check_armed` on this thread runs `recheck` (None: nothing)."""
    return _armed.holding(recheck)


def check_armed() -> None:
    """Raise `WriteFenced` if the write being sent on this thread may no longer leave (the
    connections call it before each write of a request's bytes to the socket)."""
    recheck = _armed.get()
    if recheck is not None:
        recheck()
