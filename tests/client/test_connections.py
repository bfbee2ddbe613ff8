"""The pools' connections: a request's header block and body leave in one write to the TLS
socket on a connection already open, and every body shape still arrives whole."""

from __future__ import annotations

import json
import ssl
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator


def counted_sends(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every payload a client TLS socket's `sendall` is handed, in order (the in-process
    emulator's answers are left out)."""
    sent: list[bytes] = []
    original = ssl.SSLSocket.sendall

    def sendall(self: ssl.SSLSocket, data: Any, flags: int = 0) -> None:
        if not self.server_side:
            sent.append(bytes(data))
        original(self, data, flags)

    monkeypatch.setattr(ssl.SSLSocket, "sendall", sendall)
    return sent


def test_a_write_leaves_in_one_socket_write(
    kube_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "one-write"}})  # the connection is open from here on
    sent = counted_sends(monkeypatch)
    api.merge_patch("one-write", {"data": {"k": "v"}})
    [request] = sent  # headers and body together (http.client sends them apart)
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"PATCH /api/v1/namespaces/default/configmaps/one-write HTTP/1.1")
    assert json.loads(body) == {"data": {"k": "v"}}
    sent.clear()
    assert api.get("one-write")["data"] == {"k": "v"}  # a request without a body
    [request] = sent
    assert request.startswith(b"GET ") and request.endswith(b"\r\n\r\n")


def test_a_body_that_is_not_bytes_still_follows_its_headers(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    transport = kube_config.transport
    kube_config.client(ConfigMap).raw.list()  # an open connection in the pool
    pool = transport._adapter.lean_pool(transport.url("/"), transport.session.verify, None)
    body = bytearray(json.dumps({"metadata": {"name": "from-bytearray"}}).encode())
    answer = pool.urlopen(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        body=body,  # sent as a memoryview, not bytes: the header block goes first on its own
        headers={
            **transport._base_headers,
            **transport._headers(transport.auth.credentials()[0], "application/json", None),
        },
        retries=False,
    )
    assert answer.status == 201, answer.data
    assert kube_emulator.get_object("", "configmaps", "default", "from-bytearray") is not None


def test_header_values_are_still_checked_and_urllib3_markers_still_honoured() -> None:
    """The connections hand a plain header straight to http.client, which refuses an
    injected line; urllib3's SKIP_HEADER marker still goes through urllib3's own check."""
    from urllib3.connection import HTTPConnection
    from urllib3.util import SKIP_HEADER

    from cloudcoil_sync.client._internal.connections import POOL_CLASSES

    cls = POOL_CLASSES["http"].ConnectionCls
    assert issubclass(cls, HTTPConnection)
    conn = cls("127.0.0.1", 1)
    conn.putrequest("GET", "/", skip_host=True, skip_accept_encoding=True)
    with pytest.raises(ValueError, match="Invalid header value"):
        conn.putheader("X-Injected", "a\r\nAuthorization: stolen")
    with pytest.raises(ValueError, match="Invalid header name"):
        conn.putheader("Bad:Name", "v")
    conn.putheader("User-Agent", SKIP_HEADER)  # skipped: nothing is buffered for it
    with pytest.raises(ValueError, match="SKIP_HEADER only supports"):
        conn.putheader("X-Other", SKIP_HEADER)
    conn.putheader("Accept", "application/json")
    buffered: list[bytes] = getattr(conn, "_buffer")  # noqa: B009 (http.client's, private)
    assert buffered[-1] == b"Accept: application/json"
    assert not any(line.startswith(b"User-Agent") for line in buffered)
    conn.close()


def test_the_pools_keep_connections_on_a_stack_that_behaves_as_lifoqueue(
    kube_config: Config,
) -> None:
    """The stack's one-call take and return keep LifoQueue's order, its Empty and Full, and
    its waking of a thread waiting to take or return."""
    import queue
    import threading

    from cloudcoil_sync.client._internal.connections import POOL_CLASSES

    transport = kube_config.transport
    kube_config.client(ConfigMap).raw.list()
    pool = transport._adapter.lean_pool(transport.url("/"), transport.session.verify, None)
    stack_class = POOL_CLASSES["https"].QueueCls
    assert type(pool.pool) is stack_class and stack_class is POOL_CLASSES["http"].QueueCls
    assert issubclass(stack_class, queue.LifoQueue) and stack_class is not queue.LifoQueue

    stack = stack_class(2)
    with pytest.raises(queue.Empty):
        stack.get(block=False)
    stack.put("a")
    stack.put("b", block=False)
    with pytest.raises(queue.Full):
        stack.put("c", block=False)
    assert (stack.qsize(), stack.unfinished_tasks) == (2, 2)
    assert [stack.get(), stack.get(block=False)] == ["b", "a"]  # last in, first out

    def waiting(condition: threading.Condition) -> threading.Event:
        """Set once a thread waits on `condition` (its lock released: the stack's mutex)."""
        entered = threading.Event()
        wait = condition.wait

        def wait_noting(timeout: float | None = None) -> bool:
            entered.set()
            return wait(timeout)

        condition.wait = wait_noting  # type: ignore[method-assign]
        return entered

    taken: list[Any] = []
    entered = waiting(stack.not_empty)
    taker = threading.Thread(target=lambda: taken.append(stack.get(timeout=30)))
    taker.start()
    assert entered.wait(30)
    stack.put("woken")  # the taker holds the mutex until it waits: it is woken by this put
    taker.join(30)
    assert taken == ["woken"]

    stack.put("x")
    stack.put("y")
    entered = waiting(stack.not_full)
    giver = threading.Thread(target=lambda: stack.put("z", timeout=30))
    giver.start()
    assert entered.wait(30)
    assert stack.get() == "y"  # makes room: the giver is woken and puts
    giver.join(30)
    assert not giver.is_alive() and [stack.get(), stack.get()] == ["z", "x"]
