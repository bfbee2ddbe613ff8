"""An in-memory list/watch source for deterministic informer unit tests.

The emulator tests (test_informer_emulator.py) cover the real client over HTTP; this fake
lets tests decide exactly when a stream drops, history expires, or a list fails.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

from cloudcoil_sync.client._internal.errors import APIError, api_error

JSON = dict[str, Any]
_CLOSE = object()


def status(code: int, reason: str, message: str = "") -> JSON:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message or reason,
    }


class FakeStream:
    def __init__(self, source: FakeSource, backlog: list[tuple[str, JSON]]) -> None:
        self._source = source
        self._events: queue.Queue[Any] = queue.Queue()
        for event in backlog:
            self._events.put(event)
        self.closed = threading.Event()

    def push(self, event: tuple[str, JSON] | object) -> None:
        self._events.put(event)

    def __iter__(self) -> Iterator[tuple[str, JSON]]:
        while True:
            event = self._events.get()
            if event is _CLOSE or self.closed.is_set():
                return
            if isinstance(event, BaseException):
                raise event
            yield event

    def close(self) -> None:
        self.closed.set()
        self._events.put(_CLOSE)
        self._source.forget(self)


class FakeSource:
    """Objects with integer resourceVersions, a bounded event history and open streams."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rv = 100
        self.objects: dict[tuple[str, str], JSON] = {}
        self.history: list[tuple[int, str, JSON]] = []
        self.oldest = self.rv  # watches from an older resourceVersion get 410
        self.streams: list[FakeStream] = []
        self.list_calls: list[int] = []
        self.watch_calls: list[str] = []
        self.list_errors: list[BaseException] = []
        self.watch_errors: list[BaseException] = []
        self.watch_opened = threading.Condition(self.lock)
        self.uids = 0
        self.silent = False

    # -- mutations -----------------------------------------------------------------------

    def _emit(self, kind: str, obj: JSON) -> None:
        self.history.append((self.rv, kind, obj))
        if self.silent:
            return
        for stream in list(self.streams):
            stream.push((kind, _copy(obj)))

    def put(self, name: str, namespace: str = "ns", **data: Any) -> JSON:
        with self.lock:
            self.rv += 1
            key = (namespace, name)
            old = self.objects.get(key)
            if old is None:
                self.uids += 1
                uid = f"uid-{self.uids}"
            else:
                uid = old["metadata"]["uid"]
            obj = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": uid,
                    "resourceVersion": str(self.rv),
                    "managedFields": [{"manager": "test"}],
                },
                "data": data,
            }
            self.objects[key] = obj
            self._emit("ADDED" if old is None else "MODIFIED", obj)
            return _copy(obj)

    def delete(self, name: str, namespace: str = "ns") -> None:
        with self.lock:
            self.rv += 1
            obj = self.objects.pop((namespace, name))
            obj = _copy(obj)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._emit("DELETED", obj)

    def bookmark(self) -> None:
        with self.lock:
            self.rv += 1
            mark = {"kind": "ConfigMap", "metadata": {"resourceVersion": str(self.rv)}}
            for stream in self.streams:
                stream.push(("BOOKMARK", mark))

    # -- faults ----------------------------------------------------------------------------

    def drop_watches(self) -> None:
        with self.lock:
            streams, self.streams = self.streams, []
        for stream in streams:
            stream.push(_CLOSE)

    def forget_history(self) -> None:
        """Lose the event history: any watch from before now answers 410."""
        with self.lock:
            self.history.clear()
            self.oldest = self.rv

    def send_error(self, code: int, reason: str) -> None:
        with self.lock:
            for stream in self.streams:
                stream.push(("ERROR", status(code, reason)))

    def break_streams(self, error: BaseException) -> None:
        with self.lock:
            for stream in self.streams:
                stream.push(error)

    def wait_watching(self, count: int, timeout: float = 5) -> bool:
        """Wait until at least `count` watch calls were made and one stream is open."""
        with self.lock:
            return self.watch_opened.wait_for(
                lambda: len(self.watch_calls) >= count and bool(self.streams), timeout
            )

    # -- ListWatch ---------------------------------------------------------------------------

    def pages(self, *, limit: int) -> Iterator[tuple[list[JSON], str]]:
        with self.lock:
            self.list_calls.append(limit)
            if self.list_errors:
                raise self.list_errors.pop(0)
            items = _copy([self.objects[key] for key in sorted(self.objects)])
            version = str(self.rv)
        if not items:
            yield [], version
        for start in range(0, len(items), limit or len(items)):
            yield items[start : start + limit], version

    def watch(self, *, resource_version: str, timeout_seconds: int) -> FakeStream:
        with self.lock:
            self.watch_calls.append(resource_version)
            if self.watch_errors:
                raise self.watch_errors.pop(0)
            since = int(resource_version)
            if since < self.oldest:
                stream = FakeStream(self, [("ERROR", status(410, "Expired", "too old"))])
            else:
                backlog = [(k, _copy(o)) for rv, k, o in self.history if rv > since]
                stream = FakeStream(self, backlog)
                self.streams.append(stream)
            self.watch_opened.notify_all()
            return stream

    def forget(self, stream: FakeStream) -> None:
        with self.lock:
            if stream in self.streams:
                self.streams.remove(stream)


def http_error(code: int, reason: str) -> APIError:
    return api_error(code, status(code, reason))


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)
