"""The lean response head reads every header block as http.client reads it."""

from __future__ import annotations

import io
from http.client import HTTPMessage, HTTPResponse, parse_headers

import pytest
import urllib3

from cloudcoil_sync.client._internal import connections
from cloudcoil_sync.client._internal.response_head import LeanMessage, LeanResponse, parse_head

PLAIN = (
    b"Audit-Id: 5c0e\r\n"
    b"Cache-Control: no-cache, private\r\n"
    b"Content-Type: application/json\r\n"
    b"X-Kubernetes-Pf-Flowschema-Uid: 1f3a\r\n"
    b"Date: Sun, 06 Dec 2026 16:00:00 GMT\r\n"
    b"Content-Length: 2\r\n"
    b"\r\n"
)

BLOCKS = {
    "plain": PLAIN,
    "empty": b"\r\n",
    "lf endings": b"A: 1\nB: 2\n\n",
    "repeated": b"Warning: 299 - one\r\nWarning: 299 - two\r\nwarning: three\r\n\r\n",
    "padding": b"A:   spaced  \r\nB:\tTabbed\r\nC:\r\nD:x\r\n\r\n",
    "colon in value": b"Location: https://h:6443/api?x=a:b\r\n\r\n",
    "latin-1": b"X-Name: caf\xe9\r\n\r\n",
    "folded": b"A: one\r\n two\r\nB: 2\r\n\r\n",
    "no colon": b"A: 1\r\nnot a header\r\nB: 2\r\n\r\n",
    "space before colon": b"A : 1\r\n\r\n",
    "bare CR": b"A: 1\rB: 2\r\n\r\n",
    "from line": b"From someone\r\nA: 1\r\n\r\n",
    "eof": b"A: 1\r\n",
}


def lines(block: bytes) -> list[bytes]:
    stream = io.BytesIO(block)
    out = []
    while True:
        line = stream.readline(65537)
        out.append(line)
        if line in (b"\r\n", b"\n", b""):
            return out


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_a_header_block_reads_as_http_client_reads_it(name: str) -> None:
    block = BLOCKS[name]
    ours = parse_head(lines(block))
    stock = parse_headers(io.BytesIO(block))
    assert isinstance(ours, HTTPMessage)
    assert ours.items() == stock.items()
    for header in ("a", "B", "warning", "content-length", "x-name", "location", "missing"):
        assert ours.get(header) == stock.get(header)
        assert ours.get_all(header) == stock.get_all(header)
    assert [type(d) for d in ours.defects] == [type(d) for d in stock.defects]
    assert ours.is_multipart() == stock.is_multipart()
    assert ours.get_payload() == stock.get_payload()


def test_only_plain_blocks_take_the_lean_path() -> None:
    assert type(parse_head(lines(PLAIN))) is LeanMessage
    for odd in ("folded", "no colon", "space before colon", "bare CR", "from line"):
        assert type(parse_head(lines(BLOCKS[odd]))) is HTTPMessage, odd


class _Socket:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self.data))


RESPONSES = {
    "length": b"HTTP/1.1 200 OK\r\n" + PLAIN + b"{}",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "close": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
    "no length": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil EOF",
    "bad length": b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nuntil EOF",
    "no content": b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
    "continue": (
        b"HTTP/1.1 100 Continue\r\nX: y\r\n\r\nHTTP/1.1 201 Created \r\nContent-Length: 1\r\n\r\nz"
    ),
    "http/1.0": b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nz",
    "keep-alive 1.0": b"HTTP/1.0 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 1\r\n\r\nz",
    "folded": b"HTTP/1.1 200 OK\r\nA: 1\r\n 2\r\nContent-Length: 1\r\n\r\nz",
}


def read(cls: type[HTTPResponse], data: bytes, method: str = "GET") -> tuple[object, ...]:
    response = cls(_Socket(data), method=method)  # type: ignore[arg-type]
    response.begin()
    head = (response.status, response.reason, response.version, response.chunked)
    framing = (response.length, response.will_close, response.headers.items())
    return (*head, *framing, response.read())


@pytest.mark.parametrize("name", sorted(RESPONSES))
def test_a_response_begins_as_http_clients_does(name: str) -> None:
    assert read(LeanResponse, RESPONSES[name]) == read(HTTPResponse, RESPONSES[name])


def test_a_head_response_has_no_body_either_way() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    assert read(LeanResponse, data, "HEAD") == read(HTTPResponse, data, "HEAD")


def test_limits_and_bad_status_lines_fail_as_http_client_fails() -> None:
    too_many = b"HTTP/1.1 200 OK\r\n" + b"A: 1\r\n" * 101 + b"\r\n"
    too_long = b"HTTP/1.1 200 OK\r\nA: " + b"x" * 70000 + b"\r\n\r\n"
    for data in (too_many, too_long, b"HTTP/2 200 OK\r\n\r\n", b"garbage\r\n\r\n"):
        with pytest.raises(Exception) as stock:
            read(HTTPResponse, data)
        with pytest.raises(type(stock.value)):
            read(LeanResponse, data)


def test_the_pools_read_responses_with_it() -> None:
    for pool in connections.POOL_CLASSES.values():
        assert getattr(pool.ConnectionCls, "response_class", None) is LeanResponse


def test_urllib3_still_reports_a_malformed_head(caplog: pytest.LogCaptureFixture) -> None:
    """A defect found by the email parser (the fallback) still reaches urllib3's check."""
    from urllib3.exceptions import HeaderParsingError
    from urllib3.util.response import assert_header_parsing

    assert_header_parsing(parse_head(lines(PLAIN)))
    with pytest.raises(HeaderParsingError):
        assert_header_parsing(parse_head(lines(BLOCKS["no colon"])))
    assert urllib3  # the pools above are urllib3's
