"""The webhook server's stop is a lame-duck drain: from its start every answer carries
`Connection: close` (a client's pooled connection is retired on its next use, never closed
under it) and /readyz is 503 while the listener keeps accepting; the listener closes once the
drain delay has passed; a request begun before then is still answered.

Over real TLS on loopback. Loopback clients are exempt from the delay unless
`drain_loopback=True` (the tests' way to have it apply); `end_drain` ends it early.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from waiting import wait_until

from cloudcoil_sync.admission._internal import tls as tls_module
from cloudcoil_sync.admission._internal.connections import Phase
from cloudcoil_sync.admission._internal.server import WebhookHost

from .conftest import https, raw_connect

Factory = Callable[..., WebhookHost]
LONG = 3600.0  # a drain delay no test waits out: `end_drain` ends it


def kept_alive(host: WebhookHost, context: ssl.SSLContext) -> http.client.HTTPSConnection:
    """A connection that was answered once and is kept alive, idle."""
    connection = https(host, context)
    connection.request("GET", "/x")
    response = connection.getresponse()
    response.read()
    assert response.status == 200
    assert response.getheader("Connection") is None  # kept alive before the drain
    return connection


@contextmanager
def stopping(host: WebhookHost, timeout: float = 5) -> Iterator[Future[bool]]:
    """`host.stop(timeout)` on another thread, once it is draining; the delay ends on exit."""
    with ThreadPoolExecutor(1) as pool:
        stopped = pool.submit(host.stop, timeout)
        try:
            assert host.draining.wait(5)
            yield stopped
        finally:
            host.end_drain()


def test_a_pooled_connection_used_during_the_drain_gets_a_full_answer_that_closes_it(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(drain_delay=LONG, drain_loopback=True, idle_timeout=60)
    pooled = kept_alive(host, client_context)
    with stopping(host) as stopped:
        pooled.request("POST", "/echo", body=b'{"a": 1}')  # before: a closed socket
        response = pooled.getresponse()
        assert response.status == 200
        assert response.getheader("Connection") == "close"
        assert response.read() == b'{"path": "/echo", "scheme": "https", "size": 8}'
        assert host.serving and not stopped.done()  # still listening: the delay runs
    assert stopped.result(timeout=10) is True
    pooled.close()


def test_new_connections_are_served_during_the_drain_and_readyz_fails(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(drain_delay=LONG, drain_loopback=True)
    assert get_status(host, client_context, "/readyz") == (200, None)
    with stopping(host) as stopped:
        assert get_status(host, client_context, "/echo") == (200, "close")
        assert get_status(host, client_context, "/readyz") == (503, "close")
        assert get_status(host, client_context, "/healthz") == (200, "close")
        assert not stopped.done()
    assert stopped.result(timeout=10) is True


def get_status(host: WebhookHost, context: ssl.SSLContext, path: str) -> tuple[int, str | None]:
    connection = https(host, context)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Connection")
    finally:
        connection.close()


@pytest.mark.parametrize(
    "options",
    [
        {"drain_delay": 0.0, "drain_loopback": True},  # no delay
        {"drain_delay": LONG},  # only loopback clients so far: no Service to drain from
    ],
)
def test_the_stop_does_not_wait_when_no_delay_applies(
    host_factory: Factory, client_context: ssl.SSLContext, options: dict[str, object]
) -> None:
    host = host_factory(**options)
    pooled = kept_alive(host, client_context)
    with ThreadPoolExecutor(1) as pool:
        stopped = pool.submit(host.stop, 5)
        assert stopped.result(timeout=30) is True  # never the hour's delay
    assert host.front is not None and not host.front.remote_clients
    pooled.close()


def test_the_stop_completes_within_its_bound_with_silent_and_idle_clients(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    before = set(threading.enumerate())
    host = host_factory(drain_delay=0.2, drain_loopback=True, handshake_timeout=30)
    silent = raw_connect(host)  # never handshakes
    pooled = kept_alive(host, client_context)  # never sends again
    assert host.stop(timeout=3) is True  # the delay, then every thread joined
    assert set(threading.enumerate()) <= before
    silent.close()
    pooled.close()


def test_a_request_begun_before_the_stop_is_answered_not_dropped(
    host_factory: Factory, client_context: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tls_module, "_BEGUN_REQUEST_GRACE", 30.0)  # a loaded machine's pause
    host = host_factory(header_timeout=30)
    front = host.front
    assert front is not None
    tls = client_context.wrap_socket(raw_connect(host), server_hostname="127.0.0.1")
    tls.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\n")  # headers under way
    assert wait_until(lambda: any(c.phase == Phase.RECEIVING for c in connections(host)), 10)
    with ThreadPoolExecutor(1) as pool:
        stopped = pool.submit(host.stop, 20)  # waits up to 19 s for the request
        assert wait_until(lambda: front.stopping, 10)
        tls.sendall(b"Content-Length: 2\r\n\r\n{}")
        answer = receive_all(tls)
        assert stopped.result(timeout=10) is True
    assert answer.startswith(b"HTTP/1.1 200")
    assert b"Connection: close" in answer
    assert answer.endswith(b'"size": 2}')
    tls.close()


def connections(host: WebhookHost) -> list[object]:
    front = host.front
    assert front is not None
    with front._lock:
        return list(front._connections.values())


def receive_all(tls: ssl.SSLSocket) -> bytes:
    data = b""
    try:
        while chunk := tls.recv(4096):
            data += chunk
    except (TimeoutError, ssl.SSLError, ConnectionError):
        pass
    return data
