"""The pools' connection classes: urllib3's, asking the write gate right before each write
of a request's bytes to the socket (`gate.check_armed`), sending a request's header block
and body together, and reading responses' plain header blocks leanly (`response_head`).

The transport checks a gated write before each attempt, but connecting, the TLS handshake
and building the request come between that check and the first byte; a process stopped
there (SIGSTOP past its Lease) would send it when resumed, past the renew deadline. Checking
in `send` leaves only the socket call itself between the check and the wire. A write refused
there has sent nothing (the header block is the first `send`), or only part of its request
(a refused body), which the server discards when urllib3 closes the connection.
"""

from __future__ import annotations

import http.client
import queue
import threading
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util import SKIP_HEADER

from cloudcoil_sync.client._internal import gate
from cloudcoil_sync.client._internal.response_head import LeanResponse

__all__ = ["POOL_CLASSES"]


class _GatedHTTPConnection(HTTPConnection):
    """Checks the armed gate before each write to the socket and, on a connection already
    open, sends a request's header block with the first piece of its body: one TLS record
    and one system call instead of two (http.client sends them apart)."""

    response_class = LeanResponse  # http.client's, without the email package for plain heads
    _hold = False  # the next bytes sent are the header block: keep them for the body
    _held: bytes | None = None

    def request(self, *args: Any, **kwargs: Any) -> None:
        self._hold = self.sock is not None  # a new one connects in `send`: nothing held
        try:
            super().request(*args, **kwargs)
        finally:
            self._hold = False
            held, self._held = self._held, None
        if held is not None:  # no body came
            gate.check_armed()
            super().send(held)

    def putheader(self, header: str, *values: str) -> None:  # type: ignore[override]
        # urllib3's only looks for its SKIP_HEADER marker, with a generator per header: a
        # single other string value goes straight to http.client's, which checks it.
        if len(values) == 1 and values[0].__class__ is str and values[0] != SKIP_HEADER:
            http.client.HTTPConnection.putheader(self, header, values[0])
        else:
            super().putheader(header, *values)

    def send(self, data: Any) -> None:
        if self._hold and isinstance(data, bytes):  # nothing leaves yet: checked when it does
            self._hold = False
            self._held = data
            return
        gate.check_armed()
        held = self._held
        if held is not None:
            self._held = None
            if isinstance(data, bytes):
                data = held + data
            else:
                super().send(held)
        super().send(data)


class _GatedHTTPSConnection(_GatedHTTPConnection, HTTPSConnection):
    pass


# Condition keeps its waiting threads in `_waiters` in every CPython 3 so far; if that goes,
# every take and return notifies as LifoQueue's own do.
_WAITERS = hasattr(threading.Condition(), "_waiters")


class _ConnectionStack(queue.LifoQueue[Any]):
    """urllib3's pool of connections (a LifoQueue) taking and returning one in a single call
    when it need not wait: LifoQueue's ``get`` and ``put`` cost seven Python calls each
    (conditions entered, sizes asked, a notify with no one to wake), twice per request. A
    full or empty stack, and waking a waiting thread, are LifoQueue's own."""

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        with self.mutex:
            stack = self.queue
            if stack:
                item = stack.pop()
                if not _WAITERS or self.not_full._waiters:  # type: ignore[attr-defined]
                    self.not_full.notify()
                return item
        return super().get(block, timeout)  # empty: wait, or raise Empty, as LifoQueue

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self.mutex:
            if self.maxsize <= 0 or len(self.queue) < self.maxsize:
                self.queue.append(item)
                self.unfinished_tasks += 1
                if not _WAITERS or self.not_empty._waiters:  # type: ignore[attr-defined]
                    self.not_empty.notify()
                return
        super().put(item, block, timeout)  # full: wait, or raise Full, as LifoQueue


class _GatedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _GatedHTTPConnection
    QueueCls = _ConnectionStack


class _GatedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _GatedHTTPSConnection
    QueueCls = _ConnectionStack


#: urllib3's `PoolManager.pool_classes_by_scheme` for the client's adapter.
POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {
    "http": _GatedHTTPConnectionPool,
    "https": _GatedHTTPSConnectionPool,
}
