"""Who gives way at the connection limits: never a client whose silence is the server's lag.

On a starved CPU (the API server sending a burst of reviews to a 2-core node) a connection
thread may not read for longer than `evictable_silence`: the client's bytes then wait in the
kernel, or in the thread's hands before it parses them. Such a connection has made progress;
closing it to make room would drop a request of a client that kept pace.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from waiting import wait_until

from cloudcoil_sync.admission._internal.channel import _Channel
from cloudcoil_sync.admission._internal.connections import Connection, ConnectionTable, Phase
from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.server import WebhookHost

from .test_connection_limits import answer, tls

LIMITS = ConnectionLimits(
    max_connections=1, max_connections_per_client=1, evictable_silence=0.1, evictable_idle=1.0
)


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    for server_end, client_end in made:
        server_end.close()
        client_end.close()


def old_connection(
    pairs: list[tuple[socket.socket, socket.socket]], phase: str, age: float
) -> tuple[Connection, socket.socket]:
    """A connection (the server's end of a socket pair) in `phase` for `age` seconds."""
    server_end, client_end = socket.socketpair()
    pairs.append((server_end, client_end))
    connection = Connection(server_end, peer="10.0.0.1")
    connection.enter(phase)
    connection.since = time.monotonic() - age
    return connection, client_end


def newcomer(pairs: list[tuple[socket.socket, socket.socket]]) -> Connection:
    connection, _ = old_connection(pairs, Phase.SILENT, 0.0)
    return connection


def drain(connection: Connection) -> None:
    connection.client.setblocking(False)
    while True:
        try:
            if not connection.client.recv(65536):
                return
        except BlockingIOError:
            return


@pytest.mark.parametrize(
    ("phase", "age"),
    [(Phase.SILENT, 0.5), (Phase.HANDSHAKE, 0.5), (Phase.RECEIVING, 0.5), (Phase.IDLE, 5.0)],
)
def test_bytes_unread_in_the_kernel_keep_a_connection(
    pairs: list[tuple[socket.socket, socket.socket]], phase: str, age: float
) -> None:
    table = ConnectionTable(LIMITS)
    held, client_end = old_connection(pairs, phase, age)
    assert table.admit(held)
    client_end.sendall(b"\x16\x03\x01")  # the client spoke; the server has not read it yet

    assert not table.admit(newcomer(pairs))  # refused (answered 503), not made room for
    assert not held.evicted and table.evicted == 0 and table.refused == 1

    drain(held)  # read: now its silence is the client's own
    assert table.admit(newcomer(pairs))
    assert held.evicted and table.evicted == 1


def test_a_connection_whose_thread_holds_unparsed_bytes_is_kept(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    table = ConnectionTable(LIMITS)
    held, _ = old_connection(pairs, Phase.IDLE, 5.0)
    assert table.admit(held)
    held.busy = True  # received, waiting for its turn to parse
    assert not table.admit(newcomer(pairs))
    held.busy = False
    assert table.admit(newcomer(pairs))
    assert held.evicted


def test_a_lagging_connection_gives_way_to_none_but_a_silent_one_behind_it_does(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    limits = ConnectionLimits(
        max_connections=2, max_connections_per_client=2, evictable_silence=0.1
    )
    table = ConnectionTable(limits)
    oldest, client_end = old_connection(pairs, Phase.HANDSHAKE, 2.0)
    younger, _ = old_connection(pairs, Phase.HANDSHAKE, 1.0)
    assert table.admit(oldest) and table.admit(younger)
    client_end.sendall(b"x")
    assert table.admit(newcomer(pairs))
    assert younger.evicted and not oldest.evicted  # the longest waiting that is truly silent


def test_a_closed_connection_is_not_asked_about_its_socket(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    held, client_end = old_connection(pairs, Phase.IDLE, 5.0)
    client_end.sendall(b"x")
    assert held.lagging()
    held.close()
    assert not held.lagging()


def test_a_request_read_but_not_yet_parsed_is_answered_not_evicted(
    host_factory: Callable[..., WebhookHost],
    client_context: ssl.SSLContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Over real TLS: an idle keep-alive connection (past evictable_idle) sends its next
    # request; its thread has read it and waits (as for a turn on a starved CPU) before
    # parsing, so the connection still looks idle. A newcomer at the limit is refused.
    parsing, release = threading.Event(), threading.Event()
    received = _Channel._received

    def slow_received(self: _Channel, data: bytes) -> bool:
        if b"/held" in data:
            parsing.set()
            assert release.wait(10)
        return received(self, data)

    monkeypatch.setattr(_Channel, "_received", slow_received)
    host = host_factory(max_connections=1, max_connections_per_client=1, evictable_idle=0.2)
    assert host.front is not None
    keep_alive = tls(host, client_context)
    try:
        keep_alive.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        assert keep_alive.recv(65536).startswith(b"HTTP/1.1 200")
        connection = next(iter(host.front._connections.values()))
        assert wait_until(
            lambda: connection.phase == Phase.IDLE and time.monotonic() - connection.since > 0.3
        )
        keep_alive.sendall(b"GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
        assert parsing.wait(5)
        newcomer = tls(host, client_context)
        with newcomer:
            newcomer.settimeout(5)
            newcomer.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
            assert answer(newcomer).startswith(b"HTTP/1.1 503")
        assert host.front.table.evicted == 0
        release.set()
        keep_alive.settimeout(5)
        assert keep_alive.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        release.set()
        keep_alive.close()
