"""Watch semantics: list-then-watch loses nothing, order, selectors, bookmarks, 410, faults."""

from __future__ import annotations

import json
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from waiting import wait_until

import cloudcoil_sync.testing._internal.watch as emulator_watch
from cloudcoil_sync.testing import Emulator

from .conftest import Client, configmap

CM = "/api/v1/namespaces/default/configmaps"


class Stream:
    """A watch read on a thread, events collected in order."""

    def __init__(self, client: Client, query: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        self.ended = threading.Event()
        self.error: BaseException | None = None
        self._response = client.get(CM + "?watch=true&" + query, stream=True)
        self._thread = threading.Thread(target=self._read)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._response.iter_lines():
                if line:
                    with self.changed:
                        self.events.append(json.loads(line))
                        self.changed.notify_all()
        except requests.RequestException as exc:
            self.error = exc
        finally:
            self.ended.set()
            with self.changed:
                self.changed.notify_all()

    def wait(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        with self.changed:
            self.changed.wait_for(lambda: len(self.events) >= count or self.ended.is_set(), timeout)
            return list(self.events)

    def close(self) -> None:
        """Call after the server ended the stream (closing it under a reader races urllib3)."""
        self.ended.wait(5)
        self._thread.join(5)
        self._response.close()


@pytest.fixture
def streams(client: Client) -> Iterator[list[Stream]]:
    opened: list[Stream] = []
    yield opened
    client.emulator.drop_watches()
    for stream in opened:
        stream.close()


def open_stream(client: Client, streams: list[Stream], query: str) -> Stream:
    stream = Stream(client, query)
    streams.append(stream)
    return stream


def test_no_event_lost_between_list_and_watch(client: Client, streams: list[Stream]) -> None:
    for i in range(3):
        client.post(CM, configmap(f"w{i}"))
    listed = client.get(CM).json()
    rv = listed["metadata"]["resourceVersion"]
    client.post(CM, configmap("between"))  # after the list, before the watch opens
    client.delete(CM + "/w0")
    stream = open_stream(client, streams, f"resourceVersion={rv}")
    client.patch(CM + "/w1", {"data": {"x": "1"}})
    events = stream.wait(3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "between"),
        ("DELETED", "w0"),
        ("MODIFIED", "w1"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_without_resource_version_starts_with_current_state(
    client: Client, streams: list[Stream]
) -> None:
    client.post(CM, configmap("a"))
    client.post(CM, configmap("b"))
    stream = open_stream(client, streams, "")
    events = stream.wait(2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_label_selector_watch_sees_objects_enter_and_leave(
    client: Client, streams: list[Stream]
) -> None:
    rv = client.get(CM).json()["metadata"]["resourceVersion"]
    stream = open_stream(client, streams, f"resourceVersion={rv}&labelSelector=app%3Dx")
    client.post(CM, configmap("sel"))
    client.patch(CM + "/sel", {"metadata": {"labels": {"app": "x"}}})
    client.patch(CM + "/sel", {"data": {"k": "v"}})
    client.patch(CM + "/sel", {"metadata": {"labels": {"app": None}}})
    events = stream.wait(3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


def test_too_old_resource_version_is_410_error_event(client: Client) -> None:
    rv = client.get(CM).json()["metadata"]["resourceVersion"]
    client.post(CM, configmap("x"))
    client.emulator.forget_history()
    response = client.get(CM + f"?watch=true&resourceVersion={rv}")
    assert response.status_code == 200
    events = [json.loads(line) for line in response.text.splitlines()]
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"].startswith(f"too old resource version: {rv} (")


def test_bounded_history_expires_old_resource_versions(tmp_path: Path) -> None:
    with Emulator(history_size=10) as emulator:
        (tmp_path / "ca").write_bytes(emulator.ca_pem)
        client = Client(emulator, tmp_path / "ca")
        rv = client.get(CM).json()["metadata"]["resourceVersion"]
        for i in range(100):
            client.post(CM, configmap(f"h{i}"))
        old = client.get(CM + f"?watch=true&resourceVersion={rv}&timeoutSeconds=1")
        assert json.loads(old.text.splitlines()[0])["object"]["code"] == 410
        client.close()


def test_timeout_seconds_ends_stream_and_bookmarks_carry_progress(tmp_path: Path) -> None:
    with Emulator(bookmark_interval=0.2) as emulator:
        (tmp_path / "ca").write_bytes(emulator.ca_pem)
        client = Client(emulator, tmp_path / "ca")
        rv = client.get(CM).json()["metadata"]["resourceVersion"]
        client.post("/api/v1/namespaces", {"metadata": {"name": "elsewhere"}})
        response = client.get(
            CM + f"?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1"
        )
        events = [json.loads(line) for line in response.text.splitlines()]
        assert events and {e["type"] for e in events} == {"BOOKMARK"}
        latest = client.get(CM).json()["metadata"]["resourceVersion"]
        assert events[-1]["object"]["metadata"]["resourceVersion"] == latest
        client.close()


def test_drop_watches_ends_streams_cleanly(client: Client, streams: list[Stream]) -> None:
    stream = open_stream(client, streams, "timeoutSeconds=60")
    assert client.emulator.wait_for(lambda: client.emulator.open_watches == 1)
    assert client.emulator.drop_watches() == 1
    assert stream.ended.wait(5)
    assert stream.error is None


def test_restart_cuts_streams_and_loses_history(client: Client, streams: list[Stream]) -> None:
    rv = client.get(CM).json()["metadata"]["resourceVersion"]
    client.post(CM, configmap("r1"))
    stream = open_stream(client, streams, f"resourceVersion={rv}&timeoutSeconds=60")
    stream.wait(1)
    client.emulator.restart()
    assert stream.ended.wait(5)
    again = client.get(CM + f"?watch=true&resourceVersion={rv}")
    assert json.loads(again.text.splitlines()[0])["object"]["code"] == 410
    assert client.get(CM + "/r1").status_code == 200


def test_concurrent_writers_every_event_seen_once_in_order(
    client: Client, streams: list[Stream]
) -> None:
    rv = client.get(CM).json()["metadata"]["resourceVersion"]
    stream = open_stream(client, streams, f"resourceVersion={rv}&timeoutSeconds=30")

    def write(k: int) -> None:
        c = client.as_token(client.emulator.admin_token)
        for i in range(25):
            c.post(CM, configmap(f"cw{k}-{i}"))
            c.patch(CM + f"/cw{k}-{i}", {"data": {"i": str(i)}})
        c.close()

    writers = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(30)
    events = stream.wait(200, timeout=10)
    assert len(events) == 200
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(set(rvs))
    per_object: dict[str, list[str]] = {}
    for e in events:
        per_object.setdefault(e["object"]["metadata"]["name"], []).append(e["type"])
    assert all(types == ["ADDED", "MODIFIED"] for types in per_object.values())


def test_idle_watch_of_a_departed_client_is_released(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emulator_watch, "PEER_CHECK", 0.2)  # the check's period, not what it finds
    emulator = client.emulator
    response = client.get(CM + "?watch=true&timeoutSeconds=120", stream=True)
    assert emulator.wait_for(lambda: emulator.open_watches == 1)
    response.close()
    client.session.close()
    assert emulator.wait_for(lambda: emulator.open_watches == 0, timeout=6)


def test_open_watch_that_falls_behind_lost_history_gets_410(
    client: Client, streams: list[Stream]
) -> None:
    emulator = client.emulator
    rv = client.get(CM).json()["metadata"]["resourceVersion"]
    stream = open_stream(client, streams, f"resourceVersion={rv}&timeoutSeconds=10")
    assert emulator.wait_for(lambda: emulator.open_watches == 1)
    with emulator.store.lock:  # the stream cannot send while the lock is held
        emulator.create_object(configmap("lost"))
        emulator.forget_history()
    events = stream.wait(1)
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410
    assert stream.ended.wait(5)


def _raw_watch(client: Client, query: str) -> ssl.SSLSocket:
    """A watch on a bare TLS socket, its response headers read: the test can drop it."""
    host, port = client.emulator.url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(client.ca_file))
    sock = context.wrap_socket(socket.create_connection((host, int(port)), 5), server_hostname=host)
    sock.sendall(
        f"GET {CM}?watch=true&{query} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {client.emulator.admin_token}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)  # the socket's 5 s timeout bounds each read
        assert chunk, f"the emulator closed the watch before its headers: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def test_a_watch_whose_client_left_is_ended_while_idle_and_while_busy(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = client.emulator
    monkeypatch.setattr(emulator_watch, "PEER_CHECK", 0.2)
    idle = _raw_watch(client, "labelSelector=none%3Dmatch&timeoutSeconds=60")
    assert wait_until(lambda: emulator.open_watches == 1, 5)
    idle.close()  # no event will ever be written to it: only the peer check can notice
    assert emulator.watches.wait_closed(6.0)
    # From here the periodic check never comes within the test: only events can reveal it.
    monkeypatch.setattr(emulator_watch, "PEER_CHECK", 600.0)
    unrelated = _raw_watch(client, "labelSelector=none%3Dmatch&timeoutSeconds=60")
    assert wait_until(lambda: emulator.open_watches == 1, 5)
    unrelated.close()
    for i in range(1000):  # events this watch filters out must not hide that its client left
        client.post(CM, configmap(f"other-{i}"))
        if emulator.open_watches == 0:
            break
    assert emulator.open_watches == 0
    busy = _raw_watch(client, "timeoutSeconds=60")
    assert wait_until(lambda: emulator.open_watches == 1, 5)
    busy.close()
    for i in range(50):  # events keep flowing: a failed write ends it
        client.post(CM, configmap(f"busy-{i}"))
        if emulator.open_watches == 0:
            break
    assert emulator.watches.wait_closed(6.0)


def test_a_watch_served_on_a_descriptor_past_1024_stays_open(
    client: Client, streams: list[Stream], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process holding many descriptors (a long test session) gets connection sockets
    # numbered past select()'s 1024 limit: the emulator must still tell a live client apart
    # from a gone one (it ended every such watch at once), so does the test's fault proxy.
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        client.post(CM, configmap("before"))
        rv = client.get(CM).json()["metadata"]["resourceVersion"]
        monkeypatch.setattr(emulator_watch, "PEER_CHECK", 0.02)  # idle rounds check the peer
        fresh = Client(client.emulator, client.ca_file)  # a new connection: a high descriptor
        stream = open_stream(fresh, streams, f"resourceVersion={rv}")
        assert not stream.ended.wait(0.5)  # many idle rounds: the live client is not "gone"
        for i in range(3):
            client.post(CM, configmap(f"late{i}"))
        events = stream.wait(3)
        assert [e["object"]["metadata"]["name"] for e in events] == ["late0", "late1", "late2"]
    finally:
        for fd in held:
            os.close(fd)
