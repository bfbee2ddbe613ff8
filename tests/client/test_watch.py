"""Watch streams: parsing, typed ERROR events, broken streams, timing over real HTTPS."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import responses
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import (
    APITimeout,
    Config,
    Expired,
    Forbidden,
    Gone,
    WatchEvent,
    WatchEventTooLarge,
    WatchStreamError,
)
from cloudcoil_sync.client._internal.watch import MAX_EVENT_BYTES, Watch

from .certs import PKI
from .fakeserver import FakeAPI, Reply, Request

SERVER = "http://api.test"
URL = f"{SERVER}/api/v1/namespaces/default/configmaps"


def _ev(etype: str, name: str, rv: str) -> bytes:
    obj = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "resourceVersion": rv},
    }
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


def _bookmark(rv: str) -> bytes:
    obj = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": rv}}
    return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"


@pytest.fixture
def config() -> Iterator[Config]:
    cfg = Config(SERVER, token="t", qps=0, max_retries=0)
    yield cfg
    cfg.close()


@responses.activate
def test_events_and_resource_version_tracking(config: Config) -> None:
    body = (
        _ev("ADDED", "a", "5")
        + _ev("MODIFIED", "a", "6")
        + _bookmark("9")
        + _ev("DELETED", "a", "10")
    )
    responses.get(URL, body=body)
    with config.client(ConfigMap).watch(resource_version="4", timeout_seconds=60) as w:
        assert w.resource_version == "4"
        events = list(w)
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "BOOKMARK", "DELETED"]
    assert isinstance(events[0], WatchEvent) and events[0].object["metadata"]["name"] == "a"
    assert w.resource_version == "10"
    query = responses.calls[0].request.url or ""
    for part in (
        "watch=true",
        "resourceVersion=4",
        "timeoutSeconds=60",
        "allowWatchBookmarks=true",
    ):
        assert part in query


@responses.activate
def test_error_event_raises_expired(config: Config) -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Expired",
        "message": "too old resource version: 1 (88309)",
        "code": 410,
    }
    responses.get(
        URL,
        body=_ev("ADDED", "a", "7")
        + json.dumps({"type": "ERROR", "object": status}).encode()
        + b"\n",
    )
    w = config.client(ConfigMap).watch(resource_version="1")
    assert next(w).type == "ADDED"
    with pytest.raises(Expired, match="too old resource version") as err:
        next(w)
    assert isinstance(err.value, Gone) and err.value.status_code == 410
    assert w.resource_version == "7" and w.closed


@responses.activate
def test_http_error_on_watch_request_is_typed(config: Config) -> None:
    responses.get(URL, status=410, json={"kind": "Status", "code": 410, "reason": "Gone"})
    with pytest.raises(Expired):
        config.client(ConfigMap).watch(resource_version="1")
    responses.get(f"{SERVER}/api/v1/configmaps", status=403, body=b"forbidden")
    with pytest.raises(Forbidden):
        config.client(ConfigMap).watch(all_namespaces=True)


@responses.activate
def test_truncated_last_line(config: Config) -> None:
    responses.get(URL, body=_ev("ADDED", "a", "5") + b'{"type": "MODIFIED", "obj')
    w = config.client(ConfigMap).watch()
    assert next(w).type == "ADDED"
    with pytest.raises(WatchStreamError, match="truncated line"):
        next(w)
    assert w.resource_version == "5"


@responses.activate
def test_malformed_and_non_event_lines(config: Config) -> None:
    responses.get(URL, body=b"<html>proxy error</html>\n")
    with pytest.raises(WatchStreamError, match="malformed line"):
        list(config.client(ConfigMap).watch())
    responses.get(URL, body=b'{"kind": "Status"}\n')
    with pytest.raises(WatchStreamError, match="not a watch event"):
        list(config.client(ConfigMap).watch())
    # JSON has no NaN: a server (or proxy) writing one is malformed, not a number.
    responses.get(URL, body=b'{"type": "ADDED", "object": {"metadata": {}, "x": NaN}}\n')
    with pytest.raises(WatchStreamError, match="malformed line"):
        list(config.client(ConfigMap).watch())


@responses.activate
def test_many_events_in_one_chunk_and_one_event_over_many_chunks(config: Config) -> None:
    body = b"".join(_ev("ADDED", f"o{i}", str(i)) for i in range(1, 301))
    responses.get(URL, body=body)  # delivered as one chunk
    names = [e.object["metadata"]["name"] for e in config.client(ConfigMap).raw.watch()]
    assert names == [f"o{i}" for i in range(1, 301)]


@responses.activate
def test_final_line_without_newline_is_accepted(config: Config) -> None:
    responses.get(URL, body=_ev("ADDED", "a", "5").rstrip(b"\n"))
    assert [e.type for e in config.client(ConfigMap).watch()] == ["ADDED"]


class _ResettingRaw(io.RawIOBase):
    def __init__(self, data: bytes) -> None:
        self._data = data

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        if not self._data:
            raise ConnectionResetError(104, "Connection reset by peer")
        n = min(len(buf), len(self._data))
        buf[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


@responses.activate
def test_connection_reset_mid_watch(config: Config) -> None:
    event = _ev("ADDED", "a", "5")
    event = event[:-2] + b" " * (1024 - len(event)) + b"}\n"  # two full 512-byte reads
    raw = io.BufferedReader(_ResettingRaw(event + b'{"type": "MOD'), buffer_size=512)
    responses.get(URL, body=raw)
    w = config.client(ConfigMap).watch(resource_version="3")
    events: list[WatchEvent] = []
    with pytest.raises(WatchStreamError, match="resume from resourceVersion 5"):
        events.extend(w)
    assert [e.type for e in events] == ["ADDED"]


# -- real HTTPS server: chunk timing, close from another thread, silent streams ---------


def test_events_arrive_before_stream_ends_and_close_unblocks(pki: PKI) -> None:
    release = threading.Event()

    def chunks() -> Iterator[bytes]:
        yield _ev("ADDED", "a", "5")
        release.wait(10)  # holds the stream open like a quiet watch
        yield _ev("ADDED", "b", "6")

    def handler(req: Request) -> Reply:
        return Reply(chunks=chunks())

    with FakeAPI(handler, pki) as api:
        cfg = Config(api.url, token="t", ca_data=pki.ca.cert_pem)
        w = cfg.client(ConfigMap).watch(timeout_seconds=30)
        first = next(w)  # delivered while the server still holds the stream
        assert first.object["metadata"]["name"] == "a"
        done = threading.Event()
        got: list[WatchEvent] = []

        def reader() -> None:
            got.extend(w)
            done.set()

        t = threading.Thread(target=reader)
        t.start()
        w.close()
        assert done.wait(5), "close() did not unblock the reading thread"
        t.join(5)
        release.set()
        assert got == [] and w.closed
        cfg.close()


def test_silent_stream_hits_read_timeout(pki: PKI) -> None:
    release = threading.Event()

    def chunks() -> Iterator[bytes]:
        yield _ev("ADDED", "a", "5")
        release.wait(10)
        yield b""

    with FakeAPI(lambda req: Reply(chunks=chunks()), pki) as api:
        cfg = Config(api.url, token="t", ca_data=pki.ca.cert_pem)
        w = cfg.client(ConfigMap).watch(timeout_seconds=1, read_timeout=0.3)
        assert next(w).type == "ADDED"
        with pytest.raises(APITimeout):
            next(w)
        assert w.resource_version == "5"
        release.set()
        cfg.close()


def test_default_read_timeout_is_above_timeout_seconds(pki: PKI) -> None:
    with FakeAPI(lambda req: Reply(chunks=iter([_bookmark("3")])), pki) as api:
        cfg = Config(api.url, token="t", ca_data=pki.ca.cert_pem)
        seen: dict[str, Any] = {}
        real = cfg.transport._adapter.send

        def spy(*args: Any, **kwargs: Any) -> Any:
            seen.update(kwargs)
            return real(*args, **kwargs)

        cfg.transport._adapter.send = spy  # type: ignore[method-assign]
        assert [e.type for e in cfg.client(ConfigMap).watch(timeout_seconds=42)] == ["BOOKMARK"]
        _connect, read = seen["timeout"]
        assert 42 < read <= 60 and seen["stream"] is True
        assert api.requests[0].query["timeoutSeconds"] == ["42"]
        cfg.close()


# -- issue 37, finding 5: a line limit, linear cost ------------------------------------------


@responses.activate
def test_a_long_event_over_many_reads_is_assembled(config: Config) -> None:
    big = {"type": "ADDED", "object": {"metadata": {"name": "big", "resourceVersion": "9"}}}
    big["object"]["data"] = {"blob": "y" * (MAX_EVENT_BYTES // 2)}  # read 512 bytes at a time
    responses.get(URL, body=json.dumps(big).encode() + b"\n" + _ev("MODIFIED", "after", "10"))
    events = list(config.client(ConfigMap).raw.watch())
    assert [e.object["metadata"]["name"] for e in events] == ["big", "after"]
    assert len(events[0].object["data"]["blob"]) == MAX_EVENT_BYTES // 2


@responses.activate
def test_a_line_over_the_limit_is_a_typed_error(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cloudcoil_sync.client._internal.watch.MAX_EVENT_BYTES", 4096)
    body = _ev("ADDED", "a", "1") + b'{"type":"ADDED","object":{"x":"' + b"z" * 100_000
    responses.get(URL, body=body)
    stream = config.client(ConfigMap).raw.watch()
    assert next(stream).object["metadata"]["name"] == "a"
    with pytest.raises(WatchEventTooLarge, match="longer than 4096 bytes"):
        next(stream)
    assert stream.closed
    assert issubclass(WatchEventTooLarge, WatchStreamError)  # a broken stream to old callers


@responses.activate
@pytest.mark.parametrize("shape", ["whole line in a chunk", "tail of a chunk", "many chunks"])
def test_a_line_over_the_limit_is_refused_however_it_arrives(
    config: Config, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """The limit holds for a line a chunk holds whole, for the unfinished tail of a chunk and
    for pieces of a line over many chunks; a line of exactly the limit is an event."""
    event = _ev("ADDED", "a", "1")
    limit = len(event) - 1  # the line without its newline: exactly at the limit
    long = b'{"type":"ADDED","object":{"x":"' + b"z" * limit + b'"}}'
    chunks = {
        "whole line in a chunk": [event + long + b"\n"],
        "tail of a chunk": [event + long[: limit + 1]],
        "many chunks": [event, *(long[i : i + 7] for i in range(0, len(long), 7))],
    }[shape]
    monkeypatch.setattr(Watch, "_chunks", lambda self: iter(chunks))
    responses.get(URL, body=b"")
    path = "/api/v1/namespaces/default/configmaps"
    stream = Watch(config.transport, path, {}, read_timeout=5, max_line=limit)
    assert next(stream).object["metadata"]["name"] == "a"
    with pytest.raises(WatchEventTooLarge, match=f"longer than {limit} bytes"):
        next(stream)
    assert stream.closed
