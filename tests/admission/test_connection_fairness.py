"""Issue 37, finding 1: connections that make no progress give way to those that do.

A connection that sent part of a ClientHello or part of a request used to hold its slot until
its handshake or header deadline: from 4 addresses they took every slot of the table, and from
the normal client's own address they took every slot of its share. Now such a connection is
the first to make room (before idle keep-alive ones), the oldest first, and when the table is
full it is taken from the addresses that hold more connections than the newcomer's. Real TLS
on loopback, attackers bound to 127.0.0.2-127.0.0.9 (other clients).
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable

from waiting import wait_until

from cloudcoil_sync.admission._internal.connections import Phase
from cloudcoil_sync.admission._internal.server import WebhookHost

from .test_connection_limits import PROMPT, answer, connect, normal_request, tls

Factory = Callable[..., WebhookHost]
ATTACKERS = [f"127.0.0.{n}" for n in range(2, 6)]
# The start of a TLS record that announces a 512-byte handshake message, then one byte of it.
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01"
SLOW_HEADERS = b"POST /slow HTTP/1.1\r\nHost: x\r\n"  # and never the blank line


def _phases(host: WebhookHost) -> list[str]:
    """The phases of the host's connections, once each is older than the eviction grace
    (`evictable_silence`, `evictable_idle`): [] until then."""
    assert host.front is not None
    limits, now = host.limits, time.monotonic()
    connections = list(host.front._connections.values())
    grace = {Phase.IDLE: limits.evictable_idle}
    if any(now - c.since < grace.get(c.phase, limits.evictable_silence) for c in connections):
        return []
    return sorted(c.phase for c in connections)


def still_open(sock: ssl.SSLSocket) -> bool:
    """Whether the server has not closed the TLS connection `sock` (nothing to read yet)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except ssl.SSLWantReadError:
        return True
    except (ConnectionError, ssl.SSLError):
        return False
    finally:
        sock.settimeout(PROMPT)


def _partial_hello(host: WebhookHost, source: str) -> socket.socket:
    sock = connect(host, source)
    sock.sendall(PARTIAL_HELLO)
    return sock


def _slow_headers(host: WebhookHost, context: ssl.SSLContext, source: str) -> ssl.SSLSocket:
    sock = tls(host, context, source)
    sock.sendall(SLOW_HEADERS)
    return sock


def _fair_host(host_factory: Factory) -> WebhookHost:
    # 4 addresses x 2 fill the table; deadlines far beyond the test: only eviction helps.
    return host_factory(
        max_connections=8,
        max_connections_per_client=2,
        handshake_timeout=60,
        header_timeout=60,
        evictable_silence=0.05,
    )


def test_partial_client_hellos_from_four_addresses_do_not_starve_a_fifth(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = _fair_host(host_factory)
    held = [_partial_hello(host, source) for source in ATTACKERS for _ in range(2)]
    try:
        assert wait_until(lambda: _phases(host) == [Phase.HANDSHAKE] * 8)
        statuses = [normal_request(host, client_context, source="127.0.0.9") for _ in range(5)]
        assert statuses == [200] * 5
        assert host.front is not None and host.front.rejected == 0
        assert host.front.table.evicted >= 1
    finally:
        for sock in held:
            sock.close()


def test_slow_headers_from_four_addresses_do_not_starve_a_fifth(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = _fair_host(host_factory)
    held = [_slow_headers(host, client_context, source) for source in ATTACKERS for _ in range(2)]
    try:
        assert wait_until(lambda: _phases(host) == [Phase.RECEIVING] * 8)
        statuses = [normal_request(host, client_context, source="127.0.0.9") for _ in range(5)]
        assert statuses == [200] * 5
        assert host.front is not None and host.front.rejected == 0
    finally:
        for sock in held:
            sock.close()


def test_slow_headers_on_the_normal_clients_own_address_give_way_oldest_first(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(
        max_connections=16, max_connections_per_client=4, header_timeout=60, evictable_silence=0.05
    )
    held = []
    for count in range(1, 5):  # one at a time: each is older than the next
        held.append(_slow_headers(host, client_context, "127.0.0.1"))
        assert wait_until(lambda count=count: _phases(host) == [Phase.RECEIVING] * count)
    try:
        assert normal_request(host, client_context) == 200
        held[0].settimeout(PROMPT)
        assert answer(held[0]) == b""  # the oldest was closed to make room
        assert all(still_open(sock) for sock in held[1:])
    finally:
        for sock in held:
            sock.close()


def test_a_pending_connection_gives_way_before_an_idle_keep_alive_one(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(
        max_connections=2,
        max_connections_per_client=2,
        header_timeout=60,
        evictable_silence=0.05,
        evictable_idle=0.05,
    )
    idle = tls(host, client_context)
    idle.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.recv(65536).startswith(b"HTTP/1.1 200")
    slow = _slow_headers(host, client_context, "127.0.0.1")
    try:
        assert wait_until(lambda: _phases(host) == [Phase.IDLE, Phase.RECEIVING])
        assert normal_request(host, client_context) == 200
        slow.settimeout(PROMPT)
        assert answer(slow) == b""
        assert still_open(idle)  # the keep-alive connection (e.g. the API server's) stays
    finally:
        idle.close()
        slow.close()
