"""cloudcoil_sync._compat.urllib3 against the installed urllib3, over loopback."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace
from typing import Any, cast

import pytest
import urllib3
from urllib3 import PoolManager

from cloudcoil_sync._compat import DependencyChanged
from cloudcoil_sync._compat.urllib3 import (
    check_connections,
    check_pools,
    check_response,
    connection_pools,
    kept_alive,
    put_back,
    response_socket,
)

from .conftest import LoopbackServer

VERSION = urllib3.__version__


def test_the_pools_a_pool_manager_holds(server: LoopbackServer) -> None:
    manager = PoolManager()
    try:
        assert manager.request("GET", server.url + "/ok").data == b"ok\n"
        check_pools(manager)
        (pool,) = connection_pools(manager)
        assert (pool.num_connections, pool.num_requests) == (1, 1)
    finally:
        manager.clear()


def test_a_pool_manager_without_the_container_is_named() -> None:
    manager = cast(PoolManager, SimpleNamespace(pools=object()))
    with pytest.raises(DependencyChanged) as changed:
        connection_pools(manager)
    assert str(changed.value).startswith(
        f"urllib3 {VERSION} no longer offers PoolManager.pools._container, which cloudcoil_sync "
        "uses to count connections"
    )


@pytest.mark.parametrize(
    ("path", "handed_over"), [("/stream", False), ("/close", True)], ids=["kept", "handed-over"]
)
def test_the_socket_of_a_streamed_response_wakes_its_reader(
    server: LoopbackServer, path: str, handed_over: bool
) -> None:
    manager = PoolManager()
    response = manager.request("GET", server.url + path, preload_content=False)
    try:
        kept = getattr(response.connection, "sock", None)
        assert (kept is None) is handed_over, "the answer no longer takes the path under test"
        check_response(response)
        sock = response_socket(response)
        assert sock is not None and sock.getpeername() == server.server_address
        ended: list[object] = []

        def read() -> None:  # blocks: the server never ends the body
            try:
                ended.append(response.read())
            except (urllib3.exceptions.HTTPError, OSError) as error:  # a chunked body cut short
                ended.append(error)

        reader = threading.Thread(target=read)
        reader.start()
        sock.shutdown(socket.SHUT_RDWR)
        reader.join(timeout=10)
        assert not reader.is_alive() and len(ended) == 1
    finally:
        response.release_conn()
        manager.clear()


def _response(**attributes: Any) -> Any:
    return SimpleNamespace(**{"connection": None, **attributes})


@pytest.mark.parametrize(
    ("response", "missing"),
    [
        (_response(), "HTTPResponse._fp"),
        (_response(_fp=SimpleNamespace(fp=None)), "HTTPResponse._fp.fp"),
        (
            _response(_fp=SimpleNamespace(fp=SimpleNamespace(raw=SimpleNamespace()))),
            "HTTPResponse._fp.fp.raw._sock",
        ),
        (_response(connection=SimpleNamespace(sock="not a socket")), "HTTPResponse.connection"),
    ],
    ids=["fp", "file", "socket", "not-a-socket"],
)
def test_a_response_without_the_socket_chain_is_named(response: Any, missing: str) -> None:
    assert response_socket(response) is None
    with pytest.raises(DependencyChanged) as changed:
        check_response(response)
    assert str(changed.value).startswith(f"urllib3 {VERSION} no longer offers {missing}")


def test_a_pool_hands_out_its_kept_alive_connection_and_takes_it_back(
    server: LoopbackServer,
) -> None:
    check_connections()
    manager = PoolManager()
    try:
        pool = manager.connection_from_url(server.url)
        assert kept_alive(pool) is None  # none open yet: urlopen connects the one made
        assert pool.request("GET", "/ok").data == b"ok\n"
        conn = kept_alive(pool)
        assert conn is not None and conn.sock is not None
        put_back(pool, conn)
        assert kept_alive(pool) is conn
        put_back(pool, conn)
        assert (pool.num_connections, pool.num_requests) == (1, 1)
        pool.close()
        assert kept_alive(pool) is None  # a closed pool: urlopen raises as requests expects
    finally:
        manager.clear()


def test_a_pool_without_its_connection_methods_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import cloudcoil_sync._compat.urllib3 as compat

    monkeypatch.setattr(compat, "_CONNECTIONS", False)
    with pytest.raises(DependencyChanged) as changed:
        check_connections()
    assert str(changed.value).startswith(
        f"urllib3 {VERSION} no longer offers HTTPConnectionPool._get_conn and _put_conn"
    )
    manager = PoolManager()
    try:
        pool = manager.connection_from_url("http://127.0.0.1:1")
        assert kept_alive(pool) is None  # the wire send stays off: urlopen sends
    finally:
        manager.clear()


@pytest.mark.parametrize("block", [False, True])
def test_a_connection_the_peer_closed_is_closed_and_its_slot_given_back(
    block: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """As urllib3's ``_get_conn``: a dropped connection is closed, not handed out, its slot
    back in the pool; an idle open one is handed out (a blocking pool: by ``_get_conn``)."""
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 1, maxsize=2, block=block)
    conn = pool._get_conn()
    ours, peer = socket.socketpair()
    try:
        conn.sock = ours
        put_back(pool, conn)
        assert kept_alive(pool) is conn  # idle and open
        put_back(pool, conn)
        peer.close()  # the server closed it while idle: readable at end of file
        with caplog.at_level("DEBUG", logger="urllib3.connectionpool"):
            assert kept_alive(pool) is None
        assert conn.sock is None and ours.fileno() == -1  # closed as urllib3 closes it
        assert "Resetting dropped connection: 127.0.0.1" in caplog.text
        assert pool.pool is not None and pool.pool.qsize() == 2  # its slot back
        assert pool.num_connections == 1  # none opened by the check
    finally:
        ours.close()
        peer.close()
        pool.close()


def test_a_connection_given_back_to_a_full_or_closed_pool_is_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As urllib3's ``_put_conn``: no room (or no pool) left, the connection is closed; a
    full pool warns that it discards it."""
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 1, maxsize=1)
    extra = pool._new_conn()
    ours, peer = socket.socketpair()
    try:
        extra.sock = ours
        with caplog.at_level("WARNING", logger="urllib3.connectionpool"):
            put_back(pool, extra)  # its one slot is still in the pool
        assert extra.sock is None and ours.fileno() == -1
        assert "Connection pool is full, discarding connection: 127.0.0.1" in caplog.text
        assert pool.pool is not None and pool.pool.qsize() == 1
        pool.close()
        late = pool._new_conn()
        late.sock, other = socket.socketpair()
        put_back(pool, late)
        assert late.sock is None
        other.close()
    finally:
        ours.close()
        peer.close()
