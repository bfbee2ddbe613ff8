"""HTTP/1.1 on the TLS connection's own thread: waitress's parser and tasks, no backend hop."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from cloudcoil_sync.admission._internal.server import WebhookHost

from .conftest import raw_connect

Factory = Callable[..., WebhookHost]


@contextmanager
def tls_socket(host: WebhookHost, context: ssl.SSLContext) -> Iterator[ssl.SSLSocket]:
    with (
        raw_connect(host) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        yield tls


def read_answers(tls: ssl.SSLSocket, count: int) -> list[tuple[int, bytes]]:
    """`count` HTTP answers (status, body) read off `tls`, each framed by Content-Length."""
    buffer = b""
    answers: list[tuple[int, bytes]] = []
    while len(answers) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = tls.recv(65536)
            assert chunk, f"connection closed after {len(answers)} answers"
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", 0))
        while len(buffer) < length:
            chunk = tls.recv(65536)
            assert chunk
            buffer += chunk
        answers.append((int(lines[0].split()[1]), buffer[:length]))
        buffer = buffer[length:]
    return answers


def test_pipelined_requests_are_answered_in_order(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory()
    requests = b"".join(
        b"POST /echo%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (i, len(body), body)
        for i, body in enumerate([b"{}", b"x" * 70_000, b"[1]"])
    )
    with tls_socket(host, client_context) as tls:
        tls.sendall(requests)  # all three in one write: parsed one after another
        answers = read_answers(tls, 3)
    assert [status for status, _ in answers] == [200, 200, 200]
    assert [json.loads(body)["path"] for _, body in answers] == ["/echo0", "/echo1", "/echo2"]
    assert [json.loads(body)["size"] for _, body in answers] == [2, 70_000, 3]


def test_expect_100_continue(host_factory: Factory, client_context: ssl.SSLContext) -> None:
    host = host_factory()
    with tls_socket(host, client_context) as tls:
        tls.sendall(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
        )
        assert tls.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
        tls.sendall(b"hello")
        [(status, body)] = read_answers(tls, 1)
    assert status == 200 and json.loads(body)["size"] == 5


def test_oversized_body_is_refused_and_the_connection_closed(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(max_request_body_size=1000)
    with tls_socket(host, client_context) as tls:
        tls.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
        [(status, _)] = read_answers(tls, 1)
        assert status == 413
        assert tls.recv(100) == b""  # closed after the answer


def test_malformed_request_gets_400(host_factory: Factory, client_context: ssl.SSLContext) -> None:
    host = host_factory()
    with tls_socket(host, client_context) as tls:
        tls.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
        [(status, _)] = read_answers(tls, 1)
        assert status == 400


def failing_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["PATH_INFO"] == "/oserror":
        raise ConnectionRefusedError("the app's own socket error")
    raise RuntimeError("app defect")


def test_app_failures_answer_500_and_close(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(failing_app)
    for path in (b"/defect", b"/oserror"):  # an app's OSError is not the client's
        with tls_socket(host, client_context) as tls:
            tls.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            [(status, body)] = read_answers(tls, 1)
            assert status == 500 and b"app defect" not in body
            assert tls.recv(100) == b""


def environ_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    keys = {
        k: v
        for k, v in environ.items()
        if k.startswith(("HTTP_", "REMOTE_", "SERVER_", "wsgi.url")) and isinstance(v, str)
    }
    body = json.dumps(keys).encode()
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


def test_environ_has_the_peer_and_no_forwarded_headers(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(environ_app)
    with tls_socket(host, client_context) as tls:
        port = tls.getsockname()[1]
        tls.sendall(
            b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.9.9.9\r\n"
            b"Forwarded: for=10.9.9.9\r\nX-Trace: 1\r\n\r\n"
        )
        [(status, body)] = read_answers(tls, 1)
    environ = json.loads(body)
    assert status == 200
    assert environ["REMOTE_ADDR"] == "127.0.0.1" and environ["REMOTE_PORT"] == str(port)
    assert environ["wsgi.url_scheme"] == "https" and environ["HTTP_X_TRACE"] == "1"
    assert (environ["SERVER_NAME"], environ["SERVER_PORT"]) == ("127.0.0.1", str(host.address[1]))
    assert "HTTP_X_FORWARDED_FOR" not in environ and "HTTP_FORWARDED" not in environ


@pytest.mark.parametrize(("threads", "most"), [(2, 2), (None, 4)])
def test_app_calls_are_bounded_by_threads_if_given(
    host_factory: Factory, client_context: ssl.SSLContext, threads: int | None, most: int
) -> None:
    inside = threading.Semaphore(0)
    release = threading.Event()
    running = [0, 0]  # now, most at once
    lock = threading.Lock()

    def slow_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with lock:
            running[0] += 1
            running[1] = max(running)
        inside.release()
        release.wait(10)
        with lock:
            running[0] -= 1
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    host = host_factory(slow_app, threads=threads)
    sockets = [raw_connect(host) for _ in range(4)]
    wrapped = [client_context.wrap_socket(s, server_hostname="127.0.0.1") for s in sockets]
    try:
        for tls in wrapped:
            tls.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(most):
            assert inside.acquire(timeout=5)
        if most < len(wrapped):
            assert not inside.acquire(timeout=0.3)  # the others wait for a slot
        release.set()
        for tls in wrapped:
            assert read_answers(tls, 1) == [(200, b"ok")]
    finally:
        release.set()
        for tls in wrapped:
            tls.close()
    assert running[1] == most


def test_idle_keep_alive_connection_is_closed(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(idle_timeout=0.3)
    with tls_socket(host, client_context) as tls:
        tls.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answers(tls, 1)[0][0] == 200
        tls.settimeout(5)
        assert tls.recv(100) == b""  # closed (close_notify) after 0.3 s of silence
