"""The TLS front when accept fails (EMFILE): it waits for a descriptor, woken by events."""

from __future__ import annotations

import errno
import http.client
import socket
import ssl
import threading
from collections.abc import Callable, Iterator

import pytest
from waiting import wait_until

from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.tls import TLSFront

Factory = Callable[..., WebhookHost]


def front_of(host: WebhookHost) -> TLSFront:
    assert host.front is not None
    return host.front


def keep_alive(host: WebhookHost, context: ssl.SSLContext) -> http.client.HTTPSConnection:
    """A connection that was answered once and stays open (one of the front's)."""
    address, port = host.address
    connection = http.client.HTTPSConnection(address, port, context=context, timeout=10)
    connection.request("POST", "/ok", body=b"{}", headers={"Content-Type": "text/plain"})
    response = connection.getresponse()
    response.read()
    assert response.status == 200
    return connection


@pytest.fixture
def out_of_descriptors(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., threading.Event]]:
    """Make the listener at an address fail accept with EMFILE (`times` times)."""
    original = socket.socket.accept
    failing: dict[tuple[str, int], list[int]] = {}
    failed = threading.Event()

    def accept(sock: socket.socket) -> tuple[socket.socket, object]:
        left = failing.get(sock.getsockname()[:2])
        if left is not None and left[0] > 0:
            left[0] -= 1
            failed.set()
            raise OSError(errno.EMFILE, "Too many open files")
        return original(sock)

    def fail(address: tuple[str, int], times: int = 1) -> threading.Event:
        failing[address] = [times]
        return failed

    monkeypatch.setattr(socket.socket, "accept", accept)
    yield fail


def test_accept_resumes_when_one_of_its_connections_closes(
    host_factory: Factory,
    client_context: ssl.SSLContext,
    out_of_descriptors: Callable[..., threading.Event],
) -> None:
    host = host_factory()
    front = front_of(host)
    first = keep_alive(host, client_context)
    assert wait_until(lambda: front.active_connections == 1)
    failed = out_of_descriptors(front.address)
    waiting = socket.create_connection(host.address, timeout=10)  # its accept fails
    try:
        assert failed.wait(10)
        assert front.accepting and front.accepted == 1
        first.close()  # frees a descriptor: the accept loop is woken and accepts again
        assert wait_until(lambda: front.accepted == 2, timeout=10)
        keep_alive(host, client_context).close()  # and keeps serving
    finally:
        waiting.close()
    assert host.stop(timeout=5) is True


def test_stop_ends_an_accept_loop_waiting_for_a_descriptor(
    host_factory: Factory,
    client_context: ssl.SSLContext,
    out_of_descriptors: Callable[..., threading.Event],
) -> None:
    host = host_factory()
    front = front_of(host)
    first = keep_alive(host, client_context)
    failed = out_of_descriptors(front.address, times=1_000_000)
    waiting = socket.create_connection(host.address, timeout=10)
    try:
        assert failed.wait(10)
        assert host.stop(timeout=5) is True  # the accept thread and the connection ended
        assert not front.accepting and front.active_connections == 0
    finally:
        waiting.close()
        first.close()
