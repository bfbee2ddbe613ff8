"""urllib3 internals: the pools a PoolManager holds, the socket under a streamed response,
a pool's kept-alive connections."""

from __future__ import annotations

import logging
import queue
import select
import socket
from typing import Any

from urllib3 import HTTPConnectionPool, PoolManager
from urllib3.exceptions import ClosedPoolError

from cloudcoil_sync._compat import changed

__all__ = [
    "HANDED_OVER_SOCKET",
    "check_connections",
    "check_pools",
    "check_response",
    "connection_pools",
    "kept_alive",
    "put_back",
    "response_socket",
]

#: From a response whose connection handed its socket over (a ``Connection: close`` answer):
#: urllib3's http.client response, its socket file, the SocketIO under it, its socket.
HANDED_OVER_SOCKET = ("_fp", "fp", "raw", "_sock")
_log = logging.getLogger("urllib3.connectionpool")  # where `_get_conn` logs a dropped one
#: urllib3's `wait_for_read` asks poll(2) where it works; elsewhere `kept_alive` leaves the
#: check to it.
_POLL = getattr(select, "poll", None)
_POOLS = "to count connections and requests (Transport.pool_stats)"
_SOCKET = "to wake a thread blocked reading a watch (Watch.close, Lease watches)"


def connection_pools(manager: PoolManager) -> list[HTTPConnectionPool]:
    """The pools `manager` holds: its LRU container offers no public way to list them."""
    container = getattr(manager.pools, "_container", None)
    if container is None:
        raise changed("urllib3", "PoolManager.pools._container", _POOLS)
    return list(container.values())


def response_socket(response: Any) -> socket.socket | None:
    """The socket an open streamed urllib3 response reads from, or None (closed, or unknown).

    While the connection keeps it, that is ``response.connection.sock`` (public); after
    http.client handed it to the response only the chain `HANDED_OVER_SOCKET` reaches it.
    """
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is None:
        sock, _ = _follow(response, HANDED_OVER_SOCKET)
    return sock if isinstance(sock, socket.socket) else None


def check_pools(manager: PoolManager) -> None:
    """Raise `DependencyChanged` unless `connection_pools` can read `manager`."""
    connection_pools(manager)


def check_response(response: Any) -> None:
    """Raise `DependencyChanged` unless `response_socket` finds the socket of `response`, an
    open streamed response (either while its connection keeps the socket or after hand-over)."""
    if response_socket(response) is not None:
        return
    if getattr(getattr(response, "connection", None), "sock", None) is not None:
        raise changed("urllib3", "HTTPResponse.connection.sock as a socket", _SOCKET)
    _, missing = _follow(response, HANDED_OVER_SOCKET)
    raise changed("urllib3", f"HTTPResponse.{missing or '.'.join(HANDED_OVER_SOCKET)}", _SOCKET)


def _follow(value: Any, names: tuple[str, ...]) -> tuple[Any, str | None]:
    """The value at the end of the attribute chain, or None and the chain up to the missing link."""
    for depth, name in enumerate(names, 1):
        value = getattr(value, name, None)
        if value is None:
            return None, ".".join(names[:depth])
    return value, None


def kept_alive(pool: HTTPConnectionPool) -> Any | None:
    """A connection of `pool` that is open and was not dropped (urllib3 closes a dropped one
    as it takes it), now held by the caller; None, with nothing held, when the pool offers
    none (a new connection would connect in ``urlopen``), has a proxy or is closed."""
    if not _CONNECTIONS:
        return None
    stack = getattr(pool, "pool", None)
    if pool.block or _POLL is None or not isinstance(stack, queue.LifoQueue):
        return _taken(pool)  # blocking, closed, or not as known: urllib3's own `_get_conn`
    try:  # `_get_conn` without its five calls to ask poll(2) whether the peer closed
        conn = stack.get(block=False)
    except queue.Empty:
        return None  # every connection in use: urlopen opens another
    sock = getattr(conn, "sock", None)
    if sock is not None:
        poller = _POLL()
        poller.register(sock, select.POLLIN)
        if poller.poll(0):  # readable while idle: closed by the peer (or sent garbage)
            _log.debug("Resetting dropped connection: %s", pool.host)
            sock = None
    if conn is not None and sock is None:
        conn.close()  # as urllib3 closes a connection it finds dropped
    if sock is None or getattr(conn, "proxy", None) is not None:
        pool._put_conn(conn)
        return None
    return conn


def _taken(pool: HTTPConnectionPool) -> Any | None:
    """`kept_alive` by urllib3's ``_get_conn``."""
    try:
        conn = pool._get_conn()
    except ClosedPoolError:
        return None  # urlopen raises it as the adapter does
    if getattr(conn, "sock", None) is None or getattr(conn, "proxy", None) is not None:
        pool._put_conn(conn)
        return None
    return conn


def put_back(pool: HTTPConnectionPool, conn: Any | None) -> None:
    """Return a connection `kept_alive` handed out (None: its slot, the connection dropped)."""
    stack = getattr(pool, "pool", None)
    if isinstance(stack, queue.LifoQueue):
        try:
            stack.put(conn, block=False)  # `_put_conn`'s first step, without its call
            return
        except queue.Full:
            pass  # `_put_conn` closes it, and warns or raises, as urllib3 does
    pool._put_conn(conn)


def check_connections() -> None:
    """Raise `DependencyChanged` unless `kept_alive` and `put_back` can use urllib3's pools."""
    if not _CONNECTIONS:
        raise changed("urllib3", "HTTPConnectionPool._get_conn and _put_conn", _KEPT)


_KEPT = "to send on a kept-alive connection without urlopen (client/_internal/wire.py)"
_CONNECTIONS = all(
    callable(getattr(HTTPConnectionPool, name, None)) for name in ("_get_conn", "_put_conn")
)
