"""The wire send (a request on a kept-alive connection without urlopen) against urlopen's:
the same bytes reach the server and the same answers and failures come back, over real
sockets on loopback, for answers and breakages a server can give after a first exchange
left the connection open."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cloudcoil_sync.client import Config
from cloudcoil_sync.client._internal import wire
from cloudcoil_sync.client._internal.retry import RetryPolicy

CM = "/api/v1/namespaces/default/configmaps"
OK = b'{"metadata":{"name":"a"}}'

#: What the server does with the request after the first: bytes to send, then close or not.
Action = tuple[bytes, bool]


def _answer(body: bytes = OK, status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """Plain HTTP/1.1 on loopback: the first request of each run is answered with `_answer()`
    and kept alive, each later one by `action(index)`. Records every request's bytes."""

    def __init__(self, action: Callable[[int], Action]) -> None:
        self.action = action
        self.requests: list[bytes] = []
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept)

    def __enter__(self) -> RawServer:
        self._accepting.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._accepting.join(5)
        for thread in self._threads:
            thread.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,))
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        buffer = b""
        with conn:
            while not self._stop.is_set():
                request, buffer = _take_request(buffer)
                if request is None:
                    try:
                        data = conn.recv(65536)
                    except TimeoutError:
                        continue
                    if not data:
                        return
                    buffer += data
                    continue
                index = len(self.requests)
                self.requests.append(request)
                reply, close = (_answer(), False) if index == 0 else self.action(index)
                conn.sendall(reply)
                if close:
                    return


def _take_request(buffer: bytes) -> tuple[bytes | None, bytes]:
    head, found, rest = buffer.partition(b"\r\n\r\n")
    if not found:
        return None, buffer
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if len(rest) < length:
        return None, buffer
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Methods sent by the wire send itself (not handed to urlopen)."""
    seen: list[str] = []
    real = wire._exchange

    def counted(pool: Any, conn: Any, retries: Any, method: str, *args: Any) -> Any:
        seen.append(method)
        return real(pool, conn, retries, method, *args)

    monkeypatch.setattr(wire, "_exchange", counted)
    yield seen


def _run(
    action: Callable[[int], Action],
    call: Callable[[Config], Any],
    retries: int = 0,
    timeout: float = 10.0,
) -> tuple[tuple[str, str], list[bytes], int]:
    """(outcome, request bytes, connections) of a warm-up GET and then `call` (with a read
    timeout of `timeout`; the warm-up's is long, so a loaded machine cannot fail it)."""
    with RawServer(action) as server:
        config = Config(server.url, token="t0k", qps=0, timeout=10.0)
        config.transport.retry = RetryPolicy(max_retries=retries, base=0.001, cap=0.002)
        try:
            config.client(("", "v1", "configmaps")).raw.get("warm")
            config.transport.timeout = timeout
            outcome = "ok", json.dumps(call(config), sort_keys=True)
        except Exception as error:  # the type and the message are what must match
            outcome = type(error).__name__, str(error).replace(server.url, "URL")
        finally:
            config.close()
        netloc = server.url.split("//")[1].encode()
        return outcome, [r.replace(netloc, b"HOST") for r in server.requests], server.connections


def _raw(config: Config) -> Any:
    return config.client(("", "v1", "configmaps")).raw


CALLS: dict[str, Callable[[Config], Any]] = {
    "get": lambda c: _raw(c).get("a"),
    "patch": lambda c: _raw(c).merge_patch("a", {"data": {"k": "v\u00e9"}}),
    "create": lambda c: _raw(c).create({"metadata": {"name": "a"}}),
    "delete": lambda c: _raw(c).delete("a"),
}

ACTIONS: dict[str, Callable[[int], Action]] = {
    "answer": lambda i: (_answer(), False),
    "answer, then close": lambda i: (_answer(extra="Connection: close\r\n"), True),
    "close, no answer": lambda i: (b"", True),
    "close once, no answer": lambda i: (b"", True) if i == 1 else (_answer(), False),
    "short body": lambda i: (_answer()[:-5], True),
    "chunked": lambda i: (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n"
        + OK[:5]
        + b"\r\n%x\r\n" % (len(OK) - 5)
        + OK[5:]
        + b"\r\n0\r\n\r\n",
        False,
    ),
    "close-delimited 1.0": lambda i: (b"HTTP/1.0 200 OK\r\n\r\n" + OK, True),
    "folded header": lambda i: (_answer(extra="X-Folded: one\r\n two\r\n"), False),
    "100 continue": lambda i: (b"HTTP/1.1 100 Continue\r\n\r\n" + _answer(), False),
    "409 Status": lambda i: (
        _answer(b'{"kind":"Status","code":409,"reason":"Conflict"}', "409 Conflict"),
        False,
    ),
    "429, retry after": lambda i: (
        _answer(b"{}", "429 Too Many Requests", "Retry-After: 0\r\n"),
        False,
    ),
    "redirect": lambda i: (
        (b"HTTP/1.1 308 Permanent Redirect\r\nLocation: /moved\r\nContent-Length: 0\r\n\r\n", False)
        if i == 1
        else (_answer(), False)
    ),
    "no answer in time": lambda i: (b"", False),
    "bad status line": lambda i: (b"HTTP/9 what\r\n\r\n", True),
}


@pytest.mark.parametrize("action", ACTIONS, ids=list(ACTIONS))
@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
def test_the_wire_send_writes_and_reads_as_urlopen_does(
    action: str, call: str, exchanges: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    timeout = 0.2 if action == "no answer in time" else 10.0  # the others answer at once
    direct = _run(ACTIONS[action], CALLS[call], retries=1, timeout=timeout)
    assert exchanges, "the wire send was not taken"
    monkeypatch.setattr(wire, "kept_alive", lambda pool: None)  # every request via urlopen
    exchanges.clear()
    stock = _run(ACTIONS[action], CALLS[call], retries=1, timeout=timeout)
    assert not exchanges
    assert direct == stock  # outcome, every request's bytes, connections opened


def test_the_wire_send_is_taken_on_a_kept_alive_connection_only(exchanges: list[str]) -> None:
    outcome, requests, connections = _run(ACTIONS["answer"], CALLS["patch"])
    assert outcome[0] == "ok" and len(requests) == 2 and connections == 1
    assert exchanges == ["PATCH"]  # the warm-up GET opened the connection through urlopen


@pytest.mark.parametrize(
    ("host", "port"),
    [
        ("127.0.0.1", 80),
        ("127.0.0.1", 6443),
        ("::1", 8443),
        ("kube.example", 80),
        ("bücher.de", 81),
    ],
)
def test_the_host_header_is_http_clients(host: str, port: int) -> None:
    conn = http.client.HTTPConnection(host, port)
    conn.putrequest("GET", "/", skip_accept_encoding=True)
    line = conn._buffer[1]  # type: ignore[attr-defined]
    assert line == b"Host: " + wire._host(host, port, http.client.HTTP_PORT)


def test_a_header_it_cannot_send_as_is_goes_to_urlopen(exchanges: list[str]) -> None:
    def call(config: Config) -> Any:
        return config.transport.request_json("GET", f"{CM}/a", accept="application/json\u0100")

    outcome, _, _ = _run(ACTIONS["answer"], call)
    assert not exchanges  # urlopen (http.client) refuses what latin-1 cannot write
    assert outcome[0] == "UnicodeEncodeError"
