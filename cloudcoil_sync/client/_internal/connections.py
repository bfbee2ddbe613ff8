"""The pools' connection classes: urllib3's, asking the write gate right before each write
of a request's bytes to the socket (`gate.check_armed`).

The transport checks a gated write before each attempt, but connecting, the TLS handshake
and building the request come between that check and the first byte; a process stopped
there (SIGSTOP past its Lease) would send it when resumed, past the renew deadline. Checking
in `send` leaves only the socket call itself between the check and the wire. A write refused
there has sent nothing (the header block is the first `send`), or only part of its request
(a refused body), which the server discards when urllib3 closes the connection.
"""

from __future__ import annotations

from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from cloudcoil_sync.client._internal import gate

__all__ = ["POOL_CLASSES"]


class _GatedHTTPConnection(HTTPConnection):
    def send(self, data: Any) -> None:
        gate.check_armed()
        super().send(data)


class _GatedHTTPSConnection(HTTPSConnection):
    def send(self, data: Any) -> None:
        gate.check_armed()
        super().send(data)


class _GatedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _GatedHTTPConnection


class _GatedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _GatedHTTPSConnection


#: urllib3's `PoolManager.pool_classes_by_scheme` for the client's adapter.
POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {
    "http": _GatedHTTPConnectionPool,
    "https": _GatedHTTPSConnectionPool,
}
